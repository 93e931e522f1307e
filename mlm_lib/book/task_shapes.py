"""BERT's task shapes on labels the text gives for free, trained on articles the book's model read
and tested on the five it never read.

- a **pair** task, ``[CLS] A [SEP] B [SEP]``: are A and B sentences of the same article?
- a **tagging** task, a label per word: which words were capitalised in the original text? The
  book's tokenizer lowercases, so the model sees none of it; names must be told from context
  (the sentence's first word, capitalised by convention, is not scored);
- a **span** task, SQuAD's shape: A is a sentence with a word blanked out, B the sentence after it,
  which uses the same word; the answer is where that word stands in B.

Each is fine-tuned from the book's pretrained encoder and from a random one of the same shape, by
the same :func:`~mlm_lib.finetune.finetune` call; :func:`task_run` does one task for one seed.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.corpus import Document, load_wikipedia, train_valid_split
from mlm_lib.finetune import (BertClassifier, FinetuneConfig, FinetunedBert, FinetuneResult,
                              LabelledSet, TaskSet, evaluate_task, finetune)
from mlm_lib.pretraining import SPLIT_SEED, VALID_FRACTION
from mlm_lib.masking import IGNORE_INDEX
from mlm_lib.tasks import BertSpanHead, BertTokenClassifier, SpanSet, TaggedSet
from mlm_lib.tokenizer import BasicTokenizer, WordPieceTokenizer

PAIR_LABELS = ["other article", "same article"]
CASE_LABELS = ["lower case", "capitalised"]
MIN_WORDS = 6  # shorter "sentences" are mostly list items and headings left in the excerpt
MAX_PIECES = 64  # the book's model has 64 positions
# Words too common to make a blank worth finding: the span task blanks a word of four letters or
# more that is none of these.
COMMON = frozenset("""that this with from were have which their they there them than then also
been into more most such these those when where what while would could should other only some
many much very over after before about being both each even first made make like between under
within without through during against among because since until upon will shall""".split())
ENCODERS = ("pretrained encoder", "random encoder")
# One recipe for every task and both encoders: chapter 12's (its random encoder gets no
# longer run here: that comparison is chapter 12's).
FINETUNE = dict(epochs=3, batch_size=16, lr=5e-4, max_length=MAX_PIECES)
SIZES = {"train": 480, "test": 180}  # examples of each task from read / unread articles


def _usable(doc: Document) -> list[str]:
    return [s for s in doc.sentences if len(s.split()) >= MIN_WORDS]


@functools.lru_cache(maxsize=1)
def read_and_unread() -> tuple[list[Document], list[Document]]:
    """The pretraining split of the Wikipedia excerpt: the articles the book's model read and the
    five it held out."""
    read, unread = train_valid_split(load_wikipedia(), valid_fraction=VALID_FRACTION,
                                     seed=SPLIT_SEED)
    return list(read), list(unread)


CASED = BasicTokenizer(do_lower_case=False)  # BERT's word splitting, the case kept


def _cased_words(sentence: str) -> list[str]:
    return CASED.tokenize(sentence)


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


def capitalisation_tags(sentence: str) -> tuple[list[str], list[int]]:
    """The sentence's words and, for each, 1 if it was capitalised, 0 if not; ``IGNORE_INDEX``
    for the first word (capitalised by convention) and for words that do not start with a
    letter."""
    words = _cased_words(sentence)
    tags = [IGNORE_INDEX if k == 0 or not w[0].isalpha() else int(w[0].isupper())
            for k, w in enumerate(words)]
    return words, tags


def capitalisation_task(docs: Sequence[Document], n: int, seed: int = 0) -> TaggedSet:
    """``n`` sentences drawn from ``docs``, each word tagged by its original case."""
    pool = sorted({s for d in docs for s in _usable(d)})
    if len(pool) < n:
        raise ValueError(f"asked for {n} sentences, the articles have {len(pool)}")
    words, tags = zip(*(capitalisation_tags(s) for s in random.Random(seed).sample(pool, n)))
    return TaggedSet(list(words), list(tags), CASE_LABELS)


def _blank_example(a: str, b: str, rng: random.Random, tokenizer: WordPieceTokenizer
                   ) -> tuple[str, list[str], int] | None:
    """(A with one word blanked at every occurrence, B's words, where the word stands in B), or
    None when A and B share no word worth blanking or the pair does not fit the model."""
    words_a, words_b = a.lower().split(), _cased_words(b.lower())
    shared = sorted({w for w in _cased_words(a.lower()) if len(w) >= 4 and w.isalpha()
                     and w not in COMMON} & set(words_b))
    if not shared:
        return None
    word = rng.choice(shared)
    question = " ".join("[MASK]" if w.strip(".,;:()\"'") == word else w for w in words_a)
    if "[MASK]" not in question:  # the word stands in A only inside a longer token ("word's")
        return None
    if len(tokenizer.encode_ids(question)) + len(tokenizer.encode_ids(" ".join(words_b))) + 3 > MAX_PIECES:
        return None
    return question, words_b, words_b.index(word)


def blank_in_b_task(docs: Sequence[Document], n: int, seed: int = 0) -> SpanSet:
    """``n`` (A, B) pairs of consecutive sentences, in a seeded order: A with a word blanked, and
    the span of B that fills it (the word's first place in B)."""
    rng, tokenizer = random.Random(seed), book_model_tokenizer()
    pairs = [(a, b) for d in docs for a, b in zip(d.sentences, d.sentences[1:])]
    rng.shuffle(pairs)
    found = []
    for a, b in pairs:
        ex = _blank_example(a, b, rng, tokenizer)
        if ex is not None:
            found.append(ex)
            if len(found) == n:
                return SpanSet([q for q, _, _ in found], [c for _, c, _ in found],
                               [(k, k) for _, _, k in found])
    raise ValueError(f"asked for {n} examples, the articles give {len(found)}")


@dataclass(frozen=True)
class TaskShape:
    """One task: how its data is drawn, its head, and the measure the chapter compares."""

    make_data: Callable[[Sequence[Document], int, int], TaskSet]
    head: type[FinetunedBert]
    head_args: dict[str, int]
    measure: str


TASKS = {
    "pair": TaskShape(same_article_pairs, BertClassifier, {"num_labels": 2}, "accuracy"),
    "tagging": TaskShape(capitalisation_task, BertTokenClassifier, {"num_labels": 2}, "f1"),
    "span": TaskShape(blank_in_b_task, BertSpanHead, {}, "exact_match"),
}


@functools.lru_cache(maxsize=len(TASKS))
def task_data(task: str) -> tuple[TaskSet, TaskSet]:
    """(training set from read articles, test set from the five unread ones); the same for every
    seed, so seeds differ only in the head's start (and the random encoder's), the data order and
    dropout."""
    read, unread = read_and_unread()
    make = TASKS[task].make_data
    return make(read, SIZES["train"], 0), make(unread, SIZES["test"], 0)


def task_model(task: str, encoder: str, seed: int) -> FinetunedBert:
    """The task's head on the book's pretrained encoder or on a random one of the same shape."""
    shape = TASKS[task]
    if encoder == ENCODERS[0]:
        return shape.head.from_pretraining(book_model(), **shape.head_args, seed=seed)
    if encoder == ENCODERS[1]:
        return shape.head.from_scratch(book_model().config, **shape.head_args, seed=seed)
    raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")


def task_run(task: str, encoder: str, seed: int) -> tuple[FinetuneResult, dict[str, float]]:
    """Fine-tune one head from one encoder with FINETUNE's recipe; its scores on the unread
    articles."""
    train_set, test_set = task_data(task)
    tokenizer = book_model_tokenizer()
    cfg = FinetuneConfig(**FINETUNE, seed=seed, progress=False)
    run = finetune(task_model(task, encoder, seed), tokenizer, train_set, cfg)
    return run, evaluate_task(run.model, tokenizer, test_set, MAX_PIECES)
