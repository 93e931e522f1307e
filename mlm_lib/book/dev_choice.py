"""A development split that chooses: chapters 12 and 13's tasks fine-tuned at a few learning rates,
each epoch scored on held-out training data, the best (rate, epoch) kept, the test set scored once.

Chapter 12's and 13's recipe (3 epochs at 5e-4) suits the book's small model; the second model's
larger encoder collapses at that rate on the pair task, and at BERT's 5e-5 its tagger learns nothing
in 3 epochs (:mod:`mlm_lib.book.task_shapes`). A practitioner does not pick the rate on the test
set: a fifth of the training examples becomes a development set, each rate of a small grid trains
:data:`MAX_EPOCHS` epochs, the development score after each epoch picks the epoch whose weights
are kept (:func:`mlm_lib.finetune.finetune`'s ``keep_best``, 🤗's ``load_best_model_at_end``), the
best of the rates is chosen, and only that model meets the test set. The grid is scaled to the
model: the book's model around its recipe's 5e-4, the second model from BERT's largest fine-tuning
rate (5e-5, Devlin et al. 2019, appendix A.3) past the book's.

:func:`choice_metrics` runs one task on one checkpoint with one seed: the ``dev_choice`` results
file's rows (the chosen rate and epoch, the test scores, and every rate's curves per epoch).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from torch import nn

from mlm_lib.book import task_shapes, which_article
from mlm_lib.book.task_shapes import FINETUNE, MAX_PIECES, QuestionSet, task_data, task_model
from mlm_lib.finetune import FinetuneConfig, LabelledSet, evaluate_task, finetune
from mlm_lib.tasks import TaggedSet, predict_answers, squad_scores, tagging_scores

BOOK, SECOND = "book model", "second model"
CHECKPOINTS = (BOOK, SECOND)
# (task, its measure on the development and test sets): chapter 12's classifier on the four read
# articles, then chapter 13's three shapes
TASKS = {"which article": "accuracy", "pair": "accuracy", "tagging": "f1", "span": "f1"}
# about two rates a decade, ascending; each grid reaches past the rate its model's tasks chose in
# trial runs, so that a choice at the top edge would show
RATES = {BOOK: (1e-4, 5e-4, 2e-3, 5e-3), SECOND: (5e-5, 2e-4, 5e-4, 1e-3)}
MAX_EPOCHS = 4  # the most BERT's appendix A.3 searched
DEV_FRACTION = 0.2
DEV_SEED = 0  # one split for every run seed: seeds differ in the head's start, order and dropout
ARMS = tuple(f"{task}, {checkpoint}" for checkpoint in CHECKPOINTS for task in TASKS)


def split_arm(arm: str) -> tuple[str, str]:
    """(task, checkpoint) of an arm named ``"<task>, <checkpoint>"``."""
    task, _, checkpoint = arm.rpartition(", ")
    if task not in TASKS or checkpoint not in CHECKPOINTS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    return task, checkpoint


def _dev_rows(n: int) -> set[int]:
    return set(random.Random(DEV_SEED).sample(range(n), round(DEV_FRACTION * n)))


def dev_split(data: LabelledSet | TaggedSet | QuestionSet) -> tuple[Any, Any]:
    """(training, development) sets from a training set: a seeded fifth of its examples (of its
    paragraphs, for questions, so that no context is in both)."""
    if isinstance(data, QuestionSet):
        contexts = sorted(set(data.contexts))
        dev_contexts = {contexts[i] for i in _dev_rows(len(contexts))}
        parts = [[i for i, c in enumerate(data.contexts) if (c in dev_contexts) == dev]
                 for dev in (False, True)]
        return tuple(QuestionSet(*([column[i] for i in rows] for column in
                                   (data.questions, data.contexts, data.answers, data.starts)))
                     for rows in parts)
    dev = _dev_rows(len(data))
    parts = [[i for i in range(len(data)) if (i in dev) == d] for d in (False, True)]
    if isinstance(data, TaggedSet):
        return tuple(TaggedSet([data.words[i] for i in rows], [data.tags[i] for i in rows],
                               data.label_names) for rows in parts)
    return tuple(LabelledSet([data.texts[i] for i in rows], [data.labels[i] for i in rows],
                             data.label_names,
                             None if data.pairs is None else [data.pairs[i] for i in rows])
                 for rows in parts)


def task_splits(task: str) -> tuple[Any, Any, Any]:
    """(training, development, test) sets of a task; the test set is the chapter's."""
    train, test = which_article.read_task() if task == "which article" else task_data(task)
    return (*dev_split(train), test)


def scores(task: str, model: nn.Module, tokenizer: Any, data: Any) -> dict[str, float]:
    """The task's measures on ``data``, as the chapters score their test sets: accuracy; CoNLL's
    entity F1 (with precision and recall); SQuAD's exact match and F1 of the best answer over all
    windows."""
    if task in ("which article", "pair"):
        max_length = which_article.MAX_LENGTH if task == "which article" else MAX_PIECES
        return {"accuracy": evaluate_task(model, tokenizer, data, max_length)["accuracy"]}
    if task == "tagging":
        return tagging_scores(model, tokenizer, data, MAX_PIECES)
    best = predict_answers(model, tokenizer, data.questions, data.contexts, MAX_PIECES)
    return squad_scores([n[0].text if n else "" for n in best], [[a] for a in data.answers])


def fresh_model(task: str, checkpoint: str, seed: int) -> nn.Module:
    """The task's head on the checkpoint's pretrained encoder (``seed``: the head's start)."""
    if task == "which article":
        arm = which_article.SECOND_ARM if checkpoint == SECOND else "pretrained encoder"
        return which_article.classifier(arm, seed)
    encoder = task_shapes.SECOND_ENCODER if checkpoint == SECOND else task_shapes.ENCODERS[0]
    return task_model(task, encoder, seed)


def tokenizer_of(checkpoint: str) -> Any:
    """The vocabulary the checkpoint reads."""
    return task_shapes.tokenizer_for(task_shapes.SECOND_ENCODER if checkpoint == SECOND
                                     else task_shapes.ENCODERS[0])


def settings(task: str) -> dict[str, Any]:
    """The chapter's batch size and length for the task (chapter 12's for *which article*)."""
    if task == "which article":
        return {"batch_size": which_article.BATCH_SIZE, "max_length": which_article.MAX_LENGTH}
    return {"batch_size": FINETUNE["batch_size"], "max_length": FINETUNE["max_length"]}


def dev_run(task: str, checkpoint: str, seed: int, lr: float, train: Any, dev: Any
            ) -> tuple[nn.Module, dict[str, float], int]:
    """One rate: MAX_EPOCHS epochs, the development score after each; the model at its best epoch,
    the per-epoch records (development score and loss, mean training loss) and that epoch."""
    tokenizer = tokenizer_of(checkpoint)
    train_units = train.windows(tokenizer=tokenizer) if task == "span" else train
    dev_units = dev.windows(tokenizer=tokenizer) if task == "span" else dev
    measure = TASKS[task]
    keep_best: Callable[[nn.Module], float] = lambda m: scores(task, m, tokenizer, dev)[measure]
    cfg = FinetuneConfig(epochs=MAX_EPOCHS, lr=lr, seed=seed, progress=False, **settings(task))
    run = finetune(fresh_model(task, checkpoint, seed), tokenizer, train_units, cfg,
                   eval_set=dev_units, keep_best=keep_best)
    steps_per_epoch = -(-len(train_units) // cfg.batch_size)
    losses = run.column("loss")
    picked = run.history.columns("epoch", "score", kind="select")
    curves = {}
    for e, score, dev_loss in zip(picked["epoch"], picked["score"], run.column("loss", kind="eval")):
        curves[f"dev_score_lr{lr:g}_ep{e}"] = score
        curves[f"dev_loss_lr{lr:g}_ep{e}"] = dev_loss
        epoch_losses = losses[(e - 1) * steps_per_epoch:e * steps_per_epoch]
        curves[f"train_loss_lr{lr:g}_ep{e}"] = sum(epoch_losses) / len(epoch_losses)
    return run.model, curves, run.best_epoch


def choice_metrics(arm: str, seed: int) -> dict[str, float]:
    """One task on one checkpoint with one seed: every rate of its grid trained and read on the
    development set, the best (rate, epoch) chosen there, and only its model scored on the test
    set (``test_<measure>``); ``lr`` and ``epoch`` say what was chosen, ``dev_score`` its score."""
    task, checkpoint = split_arm(arm)
    train, dev, test = task_splits(task)
    metrics: dict[str, float] = {}
    chosen: tuple[float, float, int, nn.Module] | None = None
    for lr in RATES[checkpoint]:
        model, curves, epoch = dev_run(task, checkpoint, seed, lr, train, dev)
        metrics.update(curves)
        score = curves[f"dev_score_lr{lr:g}_ep{epoch}"]
        if chosen is None or score > chosen[0]:  # a tie keeps the smaller rate
            chosen = (score, lr, epoch, model)
    score, lr, epoch, model = chosen
    test_scores = scores(task, model, tokenizer_of(checkpoint), test)
    return {"lr": lr, "epoch": epoch, "dev_score": score,
            **{f"test_{k}": v for k, v in test_scores.items()}, **metrics}
