"""BERT's task shapes, trained on articles the book's model read and tested on the five it never
read.

- a **pair** task, ``[CLS] A [SEP] B [SEP]``: are A and B sentences of the same article? (a label
  the text gives for free);
- a **tagging** task, a label per word: which words did a Wikipedia editor link? (CoNLL columns
  built by :mod:`mlm_lib.book.wiki_links`, BIO tags, scored by entity-level F1);
- a **span** task, SQuAD's shape: the question is the title of a page an editor linked, the
  context the paragraph, the answer the words linked to it (SQuAD JSON, cut into windows of the
  model's 64 positions, scored by exact match and F1).

Each is fine-tuned from the book's pretrained encoder, from it continued with MLM + NSP (which
trains the pooler and segment B's embedding row that MLM alone leaves untrained), from a random
encoder of the same shape, and from the encoder of the book's second model
(:mod:`mlm_lib.book.second_model`: larger, pretrained on far more text, on BERT's vocabulary, which
it reads here), by the same :func:`~mlm_lib.finetune.finetune` call; :func:`task_run` does one
task for one seed, and :func:`pair_diagnostics` measures why the pair task stays at
guessing.
"""

from __future__ import annotations

import functools
import random
from typing import Any
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mlm_lib.book import wiki_links
from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.book.chapter_runs import CONTINUE, chapter_data, train_micro
from mlm_lib.book.second_model import regrown_model, regrown_tokenizer
from mlm_lib.corpus import Document, load_wikipedia, train_valid_split
from mlm_lib.finetune import (BertClassifier, FinetuneConfig, FinetunedBert, FinetuneResult,
                              LabelledSet, evaluate_task, finetune)
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.model import BertForPreTraining
from mlm_lib.pretraining import SPLIT_SEED, VALID_FRACTION
from mlm_lib.tasks import (STRIDE, BertSpanHead, BertTokenClassifier, TaggedSet, WindowSet,
                           predict_answers, squad_scores, tagging_scores, windows_for)
from mlm_lib.tokenizer import WordPieceTokenizer

PAIR_LABELS = ["other article", "same article"]
MIN_WORDS = 6  # shorter "sentences" are mostly list items and headings left in the excerpt
MAX_PIECES = 64  # the book's model has 64 positions
# The book's MLM-only model never trained its pooler or segment B's embedding row; the third
# encoder is it continued as chapter 11 does, with MLM + NSP on sentence pairs, which trains both.
ENCODERS = ("pretrained encoder", "random encoder", "NSP-continued encoder")
# The second model's encoder: 6 layers of 384 (the book's: 2 of 128), pretrained as a sentence
# encoder before its MLM head was regrown on the book's training split; its pooler and NSP head
# were never trained. Same recipe and the same 64 pieces, on its own vocabulary.
SECOND_ENCODER = "second model's encoder"
# The same encoder at the rate BERT's paper fine-tunes with (Devlin et al. 2019, appendix A.3:
# "Learning rate (Adam): 5e-5, 3e-5, 2e-5"; the largest), a tenth of the book's.
BERT_FINETUNE_LR = 5e-5
SECOND_AT_BERT_RATE = "second model's encoder, lr 5e-5"
SECOND_ENCODERS = (SECOND_ENCODER, SECOND_AT_BERT_RATE)
EXPERIMENT_ENCODERS = ENCODERS + SECOND_ENCODERS  # the rows of the task_shapes results
# One recipe for every task and encoder: chapter 12's (its random encoder gets no longer run
# here: that comparison is chapter 12's). Only SECOND_AT_BERT_RATE changes the rate.
FINETUNE = dict(epochs=3, batch_size=16, lr=5e-4, max_length=MAX_PIECES)
IS_NEXT_COLUMN = 0  # of nsp_logits: IsNext, then NotNext (Google's order)
SIZES = {"train": 480, "test": 180}  # pairs from read / unread articles (the files' sizes:
# mlm_lib.book.wiki_links.SIZES)


def _usable(doc: Document) -> list[str]:
    return [s for s in doc.sentences if len(s.split()) >= MIN_WORDS]


@functools.lru_cache(maxsize=1)
def read_and_unread() -> tuple[list[Document], list[Document]]:
    """The pretraining split of the Wikipedia excerpt: the articles the book's model read and the
    five it held out."""
    read, unread = train_valid_split(load_wikipedia(), valid_fraction=VALID_FRACTION,
                                     seed=SPLIT_SEED)
    return list(read), list(unread)


def same_article_pairs(docs: Sequence[Document], n: int, seed: int = 0) -> LabelledSet:
    """``n`` pairs (A, B), half with B another sentence of A's article, half with B a sentence of
    another article; articles weighted by their sentences."""
    rng = random.Random(seed)
    pools = [(d, _usable(d)) for d in docs if len(_usable(d)) >= 2]
    if len(pools) < 2:
        raise ValueError("the pair task needs two articles with two usable sentences each")
    weights = [len(p) for _, p in pools]
    a, b, labels = [], [], []
    for k in range(n):
        i = rng.choices(range(len(pools)), weights)[0]
        first, second = rng.sample(pools[i][1], 2)
        same = k % 2
        if not same:
            j = rng.choices([j for j in range(len(pools)) if j != i],
                            [w for j, w in enumerate(weights) if j != i])[0]
            second = rng.choice(pools[j][1])
        a.append(first)
        b.append(second)
        labels.append(same)
    return LabelledSet(a, labels, PAIR_LABELS, pairs=b)


@dataclass
class QuestionSet:
    """Questions on contexts, SQuAD's columns flattened: the training unit is a window of the
    context that holds the answer (``windows``), the test unit the question, answered over every
    window of its context."""

    questions: list[str]
    contexts: list[str]
    answers: list[str]
    starts: list[int]  # each answer's first character in its context

    def __len__(self) -> int:
        return len(self.questions)

    def spans(self) -> list[tuple[int, int]]:
        return [(s, s + len(a)) for s, a in zip(self.starts, self.answers)]

    def windows(self, answered_only: bool = True, tokenizer: WordPieceTokenizer | None = None
                ) -> WindowSet:
        """The windows of MAX_PIECES pieces, cut with ``tokenizer`` (the book's unless given)."""
        return windows_for(tokenizer or book_model_tokenizer(), self.questions, self.contexts,
                           self.spans(), MAX_PIECES, STRIDE, answered_only)


def link_tagging_sets(files: Mapping[str, Path] = wiki_links.TAGGING_FILES
                      ) -> tuple[TaggedSet, TaggedSet]:
    """The editors' links as (training, test) tagged sentences, read through ``datasets``;
    ``files``: another pair of CoNLL files (:data:`~mlm_lib.book.wiki_links.PROPAGATED_FILES`)."""
    data = wiki_links.load_link_tagging(files)
    return tuple(TaggedSet([list(w) for w in data[split]["tokens"]],
                           [list(t) for t in data[split]["tags"]], wiki_links.TAGS)
                 for split in ("train", "test"))


def link_question_sets() -> tuple[QuestionSet, QuestionSet]:
    """The link questions as (training, test) sets, read through ``datasets``."""
    data = wiki_links.load_link_questions()
    return tuple(QuestionSet(list(d["question"]), list(d["context"]),
                             [a["text"][0] for a in d["answers"]],
                             [a["answer_start"][0] for a in d["answers"]])
                 for d in (data["train"], data["test"]))


@dataclass(frozen=True)
class TaskShape:
    """One task: its head, and the measure the chapter compares (the first of ``measures``)."""

    head: type[FinetunedBert]
    head_args: dict[str, int]
    measures: tuple[str, ...]

    @property
    def measure(self) -> str:
        return self.measures[0]


TASKS = {
    "pair": TaskShape(BertClassifier, {"num_labels": 2}, ("accuracy",)),
    "tagging": TaskShape(BertTokenClassifier, {"num_labels": len(wiki_links.TAGS)},
                         ("f1", "precision", "recall")),
    "span": TaskShape(BertSpanHead, {}, ("exact_match", "f1")),
}


@functools.lru_cache(maxsize=len(TASKS))
def task_data(task: str) -> tuple:
    """(training set from read articles, test set from the five unread ones); the same for every
    seed, so seeds differ only in the head's start (and the random encoder's), the data order and
    dropout."""
    if task == "pair":
        read, unread = read_and_unread()
        return (same_article_pairs(read, SIZES["train"], 0),
                same_article_pairs(unread, SIZES["test"], 0))
    if task == "tagging":
        return link_tagging_sets()
    if task == "span":
        return link_question_sets()
    raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")


@functools.lru_cache(maxsize=1)
def nsp_continued_model(seed: int) -> BertForPreTraining:
    """The book's model continued CONTINUE's steps with MLM + NSP on sentence pairs of the
    articles it read (chapter 11's run, with ``seed``): its pooler and NSP head trained, and segment
    B's embedding row. Cached: the three tasks of one seed start from the same model."""
    model = book_model()
    data = chapter_data(model.config.max_position_embeddings, nsp=True)
    return train_micro(BERT_CORRUPTION, seed=seed, data=data, start_from=model, nsp=True,
                       **CONTINUE).model


def tokenizer_for(encoder: str) -> WordPieceTokenizer:
    """The vocabulary ``encoder`` reads: BERT's 30,522 pieces for the second model's."""
    return regrown_tokenizer() if encoder in SECOND_ENCODERS else book_model_tokenizer()


def finetune_settings(encoder: str | BertForPreTraining) -> dict[str, Any]:
    """FINETUNE, at BERT_FINETUNE_LR for SECOND_AT_BERT_RATE."""
    return {**FINETUNE, "lr": BERT_FINETUNE_LR} if encoder == SECOND_AT_BERT_RATE else FINETUNE


def task_model(task: str, encoder: str, seed: int) -> FinetunedBert:
    """The task's head on the book's pretrained encoder, on it continued with NSP, on a random
    encoder of the same shape, or on the second model's encoder."""
    shape = TASKS[task]
    if encoder in SECOND_ENCODERS:
        return shape.head.from_pretraining(regrown_model(), **shape.head_args, seed=seed)
    if encoder == ENCODERS[0]:
        return shape.head.from_pretraining(book_model(), **shape.head_args, seed=seed)
    if encoder == ENCODERS[2]:
        return shape.head.from_pretraining(nsp_continued_model(seed), **shape.head_args, seed=seed)
    if encoder == ENCODERS[1]:
        return shape.head.from_scratch(book_model().config, **shape.head_args, seed=seed)
    raise ValueError(f"encoder must be one of {EXPERIMENT_ENCODERS}, got {encoder!r}")


def task_scores(task: str, model: FinetunedBert, tokenizer: WordPieceTokenizer | None = None
                ) -> dict[str, float]:
    """The model's loss on the unread articles and its task's measures, as the field scores them:
    accuracy; entity-level F1 (CoNLL); exact match and F1 of the best answer over all windows
    (SQuAD; no answer is the empty string). ``tokenizer``: the book's unless given."""
    tokenizer = tokenizer or book_model_tokenizer()
    test = task_data(task)[1]
    if task == "pair":
        return evaluate_task(model, tokenizer, test, MAX_PIECES)
    if task == "tagging":
        loss = evaluate_task(model, tokenizer, test, MAX_PIECES)["loss"]
        return {**tagging_scores(model, tokenizer, test, MAX_PIECES), "loss": loss}
    loss = evaluate_task(model, tokenizer, test.windows(tokenizer=tokenizer), MAX_PIECES)["loss"]
    nbest = predict_answers(model, tokenizer, test.questions, test.contexts, MAX_PIECES)
    best = [n[0].text if n else "" for n in nbest]
    return {**squad_scores(best, [[a] for a in test.answers]), "loss": loss}


@torch.no_grad()
def nsp_head_accuracy(model: BertForPreTraining, pairs: LabelledSet,
                      tokenizer: WordPieceTokenizer | None = None) -> float:
    """The pair task answered with no fine-tuning: the model's NSP head read as "same article"
    when it says IsNext. Trained only in the NSP-continued encoder; the book's MLM-only model and
    the second model carry an NSP head never trained, and the random encoder a random one."""
    batch = (tokenizer or book_model_tokenizer()).encode_batch(pairs.texts, pairs.pairs,
                                                               max_length=MAX_PIECES)
    logits = model.eval()(batch["input_ids"], batch["token_type_ids"],
                          batch["attention_mask"]).nsp_logits
    same = PAIR_LABELS.index("same article")
    said_same = torch.where(logits.argmax(-1) == IS_NEXT_COLUMN, same, 1 - same)
    return float((said_same == torch.tensor(pairs.labels)).float().mean())


def pair_diagnostics(encoder: str, seed: int, run: FinetuneResult) -> dict[str, float]:
    """Why the pair task stays at guessing, measured: the fine-tuned head's accuracy on its own
    training pairs (does it fit them?) and the arm's NSP head without fine-tuning on the test pairs
    (does the encoder carry the signal?)."""
    train_set, test_set = task_data("pair")
    tokenizer = tokenizer_for(encoder)
    fitted = evaluate_task(run.model, tokenizer, train_set, MAX_PIECES)["accuracy"]
    if encoder in SECOND_ENCODERS:
        start = regrown_model()
    elif encoder == ENCODERS[0]:
        start = book_model()
    elif encoder == ENCODERS[1]:
        start = BertForPreTraining(book_model().config, seed=seed)  # the random arm's encoder
    else:
        start = nsp_continued_model(seed)
    return {"train_accuracy": fitted,
            "nsp_head_accuracy": nsp_head_accuracy(start, test_set, tokenizer)}


def task_run(task: str, encoder: str | BertForPreTraining, seed: int
             ) -> tuple[FinetuneResult, dict[str, float]]:
    """Fine-tune one head from one encoder (one of EXPERIMENT_ENCODERS, or any pretrained model on
    the book's vocabulary) with FINETUNE's recipe; its scores on the unread articles."""
    tokenizer = book_model_tokenizer() if isinstance(encoder, BertForPreTraining) else tokenizer_for(encoder)
    train_set = task_data(task)[0]
    if task == "span":
        train_set = train_set.windows(tokenizer=tokenizer)
    cfg = FinetuneConfig(**finetune_settings(encoder), seed=seed, progress=False)
    model = (TASKS[task].head.from_pretraining(encoder, **TASKS[task].head_args, seed=seed)
             if isinstance(encoder, BertForPreTraining) else task_model(task, encoder, seed))
    run = finetune(model, tokenizer, train_set, cfg)
    return run, task_scores(task, run.model, tokenizer)


# The tagger on two sets of labels for the same sentences: the editors' links, and every mention in
# the article of a phrase linked in it (wiki_links.propagate_links, as WikiNER builds its labels).
LABELS = {"editors' links": wiki_links.TAGGING_FILES, "propagated links": wiki_links.PROPAGATED_FILES}
LABEL_ARMS = tuple(f"{encoder}, {labels}" for encoder in (ENCODERS[0], SECOND_ENCODER)
                   for labels in LABELS)


def label_metrics(arm: str, seed: int) -> dict[str, float]:
    """The tagger of ``arm``'s encoder (FINETUNE's recipe, as the task_shapes runs), trained and
    tested on ``arm``'s labels: entity F1, precision and recall on the unread articles."""
    encoder, _, labels = arm.partition(", ")
    if arm not in LABEL_ARMS:
        raise ValueError(f"arm must be one of {LABEL_ARMS}, got {arm!r}")
    train, test = link_tagging_sets(LABELS[labels])
    tokenizer = tokenizer_for(encoder)
    cfg = FinetuneConfig(**finetune_settings(encoder), seed=seed, progress=False)
    run = finetune(task_model("tagging", encoder, seed), tokenizer, train, cfg)
    scores = tagging_scores(run.model, tokenizer, test, MAX_PIECES)
    return {k: scores[k] for k in ("f1", "precision", "recall")}
