"""Chapter 13's tagger and span head through 🤗 transformers' own classes: the code its second page
shows, and the runs of the ``hf_routes`` results file.

- A **tagger**: the words tokenized with ``is_split_into_words=True``, each word's tag on its first
  piece (:func:`~mlm_lib.spans.align_labels` over the tokenizer's ``word_ids``),
  ``DataCollatorForTokenClassification`` (which pads the labels with -100),
  ``AutoModelForTokenClassification`` with ``id2label``, and CoNLL's entity F1 as
  ``compute_metrics``.
- A **reader**: each question with its context cut into windows by the tokenizer
  (``truncation="only_second"``, ``stride``, ``return_overflowing_tokens``), start and end labels
  per window, ``[CLS]`` where the whole answer is not inside (BERT's ``run_squad.py``, lines
  409-420), ``AutoModelForQuestionAnswering``, and each question's answer read back over its windows
  by the book's n-best (:func:`~mlm_lib.spans.nbest_answers`): transformers 5 has no
  question-answering pipeline.

Every function takes the checkpoint (a folder or a Hub name), its tokenizer and ``datasets`` splits,
so the page's code runs unchanged on another BERT and a reader's own files. The settings are
chapter 13's (:data:`~mlm_lib.book.task_shapes.FINETUNE`) as ``TrainingArguments``
(:func:`~mlm_lib.book.trainer_args.training_arguments`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import datasets
import torch
import transformers
from transformers import (AutoModelForQuestionAnswering, AutoModelForTokenClassification,
                          AutoTokenizer, BatchEncoding, DataCollatorForTokenClassification,
                          DataCollatorWithPadding, EvalPrediction, Trainer)

from mlm_lib.book.hf_folder import book_hf_folder
from mlm_lib.book.task_shapes import FINETUNE, MAX_PIECES
from mlm_lib.book.trainer_args import training_arguments
from mlm_lib.book.wiki_links import load_link_questions, load_link_tagging
from mlm_lib.finetune import FinetuneConfig
from mlm_lib.metrics import entity_scores
from mlm_lib.spans import Window, align_labels, char_span_to_pieces, nbest_answers
from mlm_lib.tasks import MAX_ANSWER_PIECES, N_BEST, squad_scores

# 🤗's stride is the overlap of two windows: with about 55 context pieces in a window, each then
# starts about 31 pieces after the last, near chapter 13's step of 32 (mlm_lib.tasks.STRIDE, what
# BERT's run_squad.py calls doc_stride; its default there is 128, for 384 positions).
OVERLAP = 24
TAGGER = "Trainer tagger"
EVERY_WINDOW = "Trainer reader, every window"  # [CLS] labels where the answer is not (BERT's way)
ANSWERING_WINDOWS = "Trainer reader, answering windows"  # chapter 13's span head's training set
ARMS = (TAGGER, EVERY_WINDOW, ANSWERING_WINDOWS)


def tokenize_and_align(batch: dict, tokenizer: Any, max_length: int = MAX_PIECES) -> BatchEncoding:
    """Each sentence's pieces; each word's tag on its first piece, -100 everywhere else."""
    enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
    enc["labels"] = [align_labels(enc.word_ids(i), tags) for i, tags in enumerate(batch["tags"])]
    return enc


def entity_f1_on(sentences: datasets.Dataset) -> Callable[[EvalPrediction], dict[str, float]]:
    """``compute_metrics`` for these sentences: CoNLL's entity F1, each kept word's tag read at its
    first piece, a word past the model's length counted as ``O`` (as chapter 13 counts it)."""
    names = sentences.features["tags"].feature.names
    truths = [[names[t] for t in tags] for tags in sentences["tags"]]

    def entity_f1(p: EvalPrediction) -> dict[str, float]:
        guesses = []
        for pred, labels, truth in zip(p.predictions.argmax(-1), p.label_ids, truths):
            kept = [names[t] for t in pred[labels != -100]]  # first pieces: one per kept word
            guesses.append(kept + ["O"] * (len(truth) - len(kept)))
        return {"f1": entity_scores(truths, guesses)["f1"]}
    return entity_f1


def trainer_tagger(checkpoint: str, tokenizer: Any, data: datasets.DatasetDict, seed: int,
                   held_out: str = "test", lr: float = FINETUNE["lr"],
                   epochs: int = FINETUNE["epochs"], **args: Any) -> Trainer:
    """A tagger fine-tuned on ``data["train"]`` and scored on ``data[held_out]``; ``args`` go to
    ``TrainingArguments`` (a development set's ``eval_strategy``, say; ``use_cpu=False`` for a GPU).
    ``lr``: the book's model's rate by default; a BERT-base-sized checkpoint wants BERT's."""
    transformers.set_seed(seed)  # the new layer's weights, then the data order
    names = data["train"].features["tags"].feature.names
    model = AutoModelForTokenClassification.from_pretrained(
        checkpoint, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    encoded = data.map(tokenize_and_align, batched=True, fn_kwargs={"tokenizer": tokenizer},
                       remove_columns=["tokens", "tags"])
    cfg = FinetuneConfig(**{**FINETUNE, "lr": lr, "epochs": epochs}, seed=seed)
    trainer = Trainer(model=model, args=training_arguments(cfg, **args),
                      train_dataset=encoded["train"], eval_dataset=encoded[held_out],
                      data_collator=DataCollatorForTokenClassification(tokenizer),
                      compute_metrics=entity_f1_on(data[held_out]))
    trainer.remove_callback(transformers.PrinterCallback)  # it would print every record
    trainer.train()
    return trainer


def windows(batch: dict, rows: list[int], tokenizer: Any, overlap: int = OVERLAP) -> BatchEncoding:
    """Each question with its context cut into windows of MAX_PIECES positions; ``example``: the
    row of the question each window came from."""
    enc = tokenizer(batch["question"], batch["context"], truncation="only_second",
                    max_length=MAX_PIECES, stride=overlap, return_overflowing_tokens=True,
                    return_offsets_mapping=True)
    enc["example"] = [rows[k] for k in enc.pop("overflow_to_sample_mapping")]
    return enc


def with_answers(batch: dict, rows: list[int], tokenizer: Any, overlap: int = OVERLAP) -> BatchEncoding:
    """Start and end positions per window; [CLS] (0, 0) where the whole answer is not inside."""
    enc, starts, ends = windows(batch, rows, tokenizer, overlap), [], []
    for i, example in enumerate(enc["example"]):
        answer = batch["answers"][rows.index(example)]
        first = answer["answer_start"][0]
        end = first + len(answer["text"][0])
        context = [k for k, s in enumerate(enc.sequence_ids(i)) if s == 1]
        offsets = [enc["offset_mapping"][i][k] for k in context]
        inside = offsets[0][0] <= first and end <= offsets[-1][1]
        a, b = char_span_to_pieces(offsets, first, end) if inside else (-context[0], -context[0])
        starts.append(context[0] + a)
        ends.append(context[0] + b)
    enc.pop("offset_mapping")
    return enc | {"start_positions": starts, "end_positions": ends}


def trainer_reader(checkpoint: str, tokenizer: Any, train: datasets.Dataset, seed: int,
                   lr: float = FINETUNE["lr"], epochs: int = FINETUNE["epochs"], **args: Any) -> Trainer:
    """A span head fine-tuned on these windows (with_answers' columns); ``lr``: a checkpoint of
    BERT-base's size wants BERT's rates (5e-5, 3e-5, 2e-5), not the book's model's."""
    transformers.set_seed(seed)
    cfg = FinetuneConfig(**{**FINETUNE, "lr": lr, "epochs": epochs}, seed=seed)
    trainer = Trainer(model=AutoModelForQuestionAnswering.from_pretrained(checkpoint),
                      args=training_arguments(cfg, **args),
                      train_dataset=train, data_collator=DataCollatorWithPadding(tokenizer))
    trainer.remove_callback(transformers.PrinterCallback)
    trainer.train()
    return trainer


def read_answers(trainer: Trainer, examples: datasets.Dataset, tokenizer: Any,
                 overlap: int = OVERLAP) -> list[str]:
    """Each question's best answer over all its windows, by the n-best: the windows keep their
    characters (``None`` outside the context) for :class:`~mlm_lib.spans.Window`."""
    def cut(batch: dict, rows: list[int]) -> BatchEncoding:
        enc = windows(batch, rows, tokenizer, overlap)
        enc["offset_mapping"] = [[o if s == 1 else None for o, s in zip(offsets, enc.sequence_ids(i))]
                                 for i, offsets in enumerate(enc["offset_mapping"])]
        return enc

    features = examples.map(cut, batched=True, with_indices=True, remove_columns=examples.column_names)
    start, end = trainer.predict(features.remove_columns(["example", "offset_mapping"])).predictions
    found = []
    for i, context in enumerate(examples["context"]):
        mine = [k for k, e in enumerate(features["example"]) if e == i]
        shown = [Window(features[k]["input_ids"], features[k]["token_type_ids"],
                        [tuple(o) if o else None for o in features[k]["offset_mapping"]], 0)
                 for k in mine]
        best = nbest_answers(shown, torch.as_tensor(start[mine]), torch.as_tensor(end[mine]),
                             context, N_BEST, MAX_ANSWER_PIECES)
        found.append(best[0].text if best else "")
    return found


def reader_scores(trainer: Trainer, examples: datasets.Dataset, tokenizer: Any) -> dict[str, float]:
    """SQuAD's exact match and F1 of the reader's answers to ``examples``."""
    scores = squad_scores(read_answers(trainer, examples, tokenizer),
                          [a["text"] for a in examples["answers"]])
    return {"span_exact_match": scores["exact_match"], "span_f1": scores["f1"]}


def answering_only(train: datasets.Dataset) -> datasets.Dataset:
    """The windows that hold their whole answer: chapter 13's span head's training set."""
    return train.filter(lambda w: w["start_positions"] > 0)


def route_metrics(arm: str, seed: int) -> dict[str, float]:
    """One arm of the ``hf_routes`` experiment with one seed, on the book's model and chapter 13's
    files, scored on the five unread articles."""
    checkpoint = str(book_hf_folder())
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    if arm == TAGGER:
        trainer = trainer_tagger(checkpoint, tokenizer, load_link_tagging(), seed)
        return {"tagging_f1": trainer.evaluate()["eval_f1"]}
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    questions = load_link_questions()
    train = questions["train"].map(with_answers, batched=True, with_indices=True,
                                   fn_kwargs={"tokenizer": tokenizer},
                                   remove_columns=questions["train"].column_names)
    if arm == ANSWERING_WINDOWS:
        train = answering_only(train)
    return reader_scores(trainer_reader(checkpoint, tokenizer, train, seed), questions["test"],
                         tokenizer)
