"""Multi-seed experiments: a chapter's comparison repeated over seeds, from the command line.

A conclusion drawn from one seed can be noise. Each experiment here is a question answered by runs
that differ in one setting (the arm), every arm run with several seeds; the command writes a
results file (see :mod:`mlm_lib.book.results`) that the chapters load and summarise with 95%
intervals:

    python -m mlm_lib.book.experiments corruption --seeds 5

The runs themselves are the chapters' own (:mod:`mlm_lib.book.chapter_runs`), made longer.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mlm_lib.book import (corruption, dev_choice, domain, generation, hf_routes, leak, masking_units,
                          nsp, regrown, successors, transfer, which_article)
from mlm_lib.book.book_model import BOOK_RECIPE_32
from mlm_lib.book.chapter_runs import CONTINUE, chapter_data, score
from mlm_lib.book.replaced_tokens import ARMS as ELECTRA_ARMS
from mlm_lib.book.replaced_tokens import BATCH_SIZE as ELECTRA_BATCH_SIZE
from mlm_lib.book.replaced_tokens import LR as ELECTRA_LR
from mlm_lib.book.replaced_tokens import STEPS as ELECTRA_STEPS
from mlm_lib.book.replaced_tokens import electra_metrics
from mlm_lib.book.results import RESULTS_DIR, Results, Run, git_commit, provenance, save_results
from mlm_lib.book.task_shapes import (BERT_FINETUNE_LR, ENCODERS, EXPERIMENT_ENCODERS, FINETUNE,
                                      LABEL_ARMS, LABELS, SECOND_AT_BERT_RATE, SIZES, TASKS,
                                      label_metrics, pair_diagnostics, task_run)
from mlm_lib.book.wiki_links import QUESTIONS as WIKI_LINK_QUESTIONS
from mlm_lib.book.wiki_links import SIZES as WIKI_LINK_SIZES
from mlm_lib.init import build_model
from mlm_lib.train import TrainConfig, train

# Chapter 10 compares the first 800 steps of the book's 6,000-step recipe (its schedule, stopped
# early) with runs that change one choice: by then the book's recipe is well off the plateau.
RECIPE_STEPS = 800
RECIPE_ARMS: dict[str, dict[str, Any]] = {
    "book recipe": {},
    "with NSP": {"nsp": True},
    "positions start random": {"position_init": "normal"},
    "init std 0.02": {"model": {"initializer_range": 0.02}},
    "BERT scaled down": {"nsp": True, "position_init": "normal", "unigram_bias_init": False,
                         "model": {"initializer_range": 0.02}, "max_seq_length": 64,
                         "batch_size": 64, "lr": 2e-3},
}
# Chapter 10: the recipe's 30 warm-up steps against none, the full rate from the first step, for
# the book's post-LN model from scratch; the held-out loss every WARMUP_EVAL_EVERY steps.
WARMUP_ARMS: dict[str, dict[str, Any]] = {"warm-up, 30 steps": {}, "no warm-up": {"warmup_steps": 0}}
WARMUP_EVAL_EVERY = 200


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """A question answered by runs that differ in one setting (the arm), over several seeds.

    ``run(arm, seed)`` trains one model and returns its metrics; ``cheapest_arm`` is the one the
    reproduction test re-runs, within the results file's tolerance
    (:data:`mlm_lib.book.results.TOLERANCE`).
    """

    name: str
    question: str
    arms: tuple[str, ...]
    run: Callable[[str, int], dict[str, float]]
    settings: dict[str, Any]
    cheapest_arm: str



def task_shape_metrics(arm: str, seed: int) -> dict[str, float]:
    """Each task's head fine-tuned from ``arm``'s encoder: its measure and its loss on the unread
    articles, e.g. ``span_exact_match`` and ``span_loss``."""
    metrics = {}
    for task, shape in TASKS.items():
        run, scores = task_run(task, arm, seed)
        for measure in shape.measures:
            metrics[f"{task}_{measure}"] = scores[measure]
        metrics[f"{task}_loss"] = scores["loss"]
        if task == "pair":
            metrics.update({f"pair_{k}": v for k, v in pair_diagnostics(arm, seed, run).items()})
    return metrics



def recipe_config(change: dict[str, Any], seed: int, steps: int = RECIPE_STEPS,
                  **settings: Any) -> TrainConfig:
    """The book's recipe (BOOK_RECIPE_32) with one ``change``, stopped after ``steps`` of its
    6,000-step schedule."""
    change = dict(change)
    model_change = change.pop("model", {})
    return TrainConfig(**{**BOOK_RECIPE_32, "model": {**BOOK_RECIPE_32["model"], **model_change},
                          "stop_at_step": steps, "save_every": 0, "threads": None,
                          "progress": False, "seed": seed, **settings, **change})


def run_recipe(arm: str, seed: int, steps: int = RECIPE_STEPS) -> dict[str, float]:
    """One arm of the recipe experiment, stopped after ``steps`` of the 6,000-step schedule (fewer
    than RECIPE_STEPS: the same run's first steps, which tests/book/test_results.py checks quickly)."""
    cfg = recipe_config(RECIPE_ARMS[arm], seed, steps)
    data = chapter_data(cfg.max_seq_length, cfg.nsp)
    model = build_model(**cfg.model_options(data.tokenizer.vocab_size))
    trained = train(model, data.tokenizer, data.train_examples, cfg).model.eval()
    held_out = score(trained, chapter_data(BOOK_RECIPE_32["max_seq_length"]))  # the same blanks
    return {"mlm_acc": held_out["mlm_acc"], "mlm_loss": held_out["mlm_loss"]}


def run_warmup(arm: str, seed: int) -> dict[str, float]:
    """One arm of the warm-up experiment: the held-out loss every WARMUP_EVAL_EVERY steps
    (``mlm_loss_200``...) and the accuracy at the end, on the recipe experiment's blanks."""
    cfg = recipe_config(WARMUP_ARMS[arm], seed, eval_every=WARMUP_EVAL_EVERY)
    data = chapter_data(cfg.max_seq_length, cfg.nsp)
    model = build_model(**cfg.model_options(data.tokenizer.vocab_size))
    history = train(model, data.tokenizer, data.train_examples, cfg,
                    valid_examples=data.valid_examples).history
    evals = history.columns("step", "mlm_loss", "mlm_acc", kind="eval")
    metrics = {f"mlm_loss_{step}": loss for step, loss in zip(evals["step"], evals["mlm_loss"])}
    return {**metrics, "mlm_acc": evals["mlm_acc"][-1], "mlm_loss": evals["mlm_loss"][-1]}


# Chapter 12: which article a sentence is from, on the four read articles and the unread ones.
FINETUNE_SETTINGS = {"epochs": which_article.EPOCHS, "batch_size": which_article.BATCH_SIZE,
                     "lr": which_article.LR, "max_length": which_article.MAX_LENGTH,
                     "read": "the 4 read articles with the most sentences, 70 + 30 of each",
                     "unread": f"the held-out articles with {which_article.UNREAD_SENTENCES} "
                               "sentences, 42 + 18 of each"}
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        name="corruption",
        question="What do the corruption recipe and the mask rate change, 150 steps on from the "
                 "book's model? (chapter 6)",
        arms=tuple(corruption.CORRUPTION_ARMS), run=corruption.corruption_metrics,
        settings={**CONTINUE, "start": "book model", "tests": list(corruption.TESTS)},
        cheapest_arm="80/10/10"),
    Experiment(
        name="leak",
        question="Does a model that sees the answer at its blanks learn to infer it? (chapter 7)",
        arms=tuple(leak.LEAK_ARMS), run=leak.leak_metrics,
        settings={**CONTINUE, "start": "book model"},
        cheapest_arm="[MASK]"),
    Experiment(
        name="nsp",
        question="Does adding NSP to MLM change what a trained encoder learns in 150 more steps, "
                 "does its NSP head learn, and from which cue; and does a sentence-order head "
                 "(ALBERT's SOP) learn order where NSP learns topic? (chapter 11)",
        arms=tuple(nsp.NSP_ARMS), run=nsp.nsp_arm_metrics,
        settings={**CONTINUE, "start": "book model",
                  "data": "NSP pairs; SOP pairs for MLM + SOP",
                  "tests": "blanks of held-out NSP pairs; held-out pairs of both tasks; "
                           "chapter 11's four kinds of B"},
        cheapest_arm="MLM alone"),
    Experiment(
        name="recipe",
        question="Which choices get a small BERT off the unigram plateau? (chapter 10)",
        arms=tuple(RECIPE_ARMS), run=run_recipe,
        settings={"steps": RECIPE_STEPS, "schedule_steps": 6000, "base": "BOOK_RECIPE_32",
                  "changes": RECIPE_ARMS},
        cheapest_arm="book recipe"),
    Experiment(
        name="warmup",
        question="Does the book's post-LN model need its 30 warm-up steps: from scratch, with them "
                 "and without, how does the held-out loss go over the recipe's first 800 steps? "
                 "(chapter 10)",
        arms=tuple(WARMUP_ARMS), run=run_warmup, cheapest_arm="no warm-up",
        settings={"steps": RECIPE_STEPS, "schedule_steps": 6000, "base": "BOOK_RECIPE_32",
                  "changes": WARMUP_ARMS, "eval_every": WARMUP_EVAL_EVERY}),
    Experiment(
        name="masking", arms=tuple(masking_units.MASKING_ARMS), cheapest_arm="book model",
        run=masking_units.masking_arm_metrics,
        question="Does choosing M per whole word or in spans, 150 steps on from the book's model, "
                 "change how it fills blanks of single pieces and of whole words? (chapter 9)",
        settings={**CONTINUE, "start": "book model", "tests": ["per piece", "whole word"]}),
    Experiment(
        name="domain",
        question="What do 150 more steps of MLM on Python's documentation do to the book's model, "
                 "on held-out Python docs and on held-out Wikipedia? (chapter 12)",
        arms=domain.DOMAIN_ARMS, run=domain.domain_arm_metrics,
        settings={**CONTINUE, "start": "book model", "data": "python-docs-topics (Python 3.11.7)",
                  "valid_fraction": domain.DOMAIN_VALID_FRACTION},
        cheapest_arm="book model"),
    Experiment(
        name="finetune",
        question="How much does the book's pretrained encoder add over a random one and over "
                 "itself frozen, on a task of articles it read and of articles it never read? "
                 "And the second model's larger encoder, pretrained on far more text? (chapter 12)",
        arms=which_article.EXPERIMENT_ARMS, run=which_article.short_run_accuracies,
        cheapest_arm="frozen encoder", settings=FINETUNE_SETTINGS),
    Experiment(
        name="finetune_long",
        question="How close does the random encoder come with 180 steps instead of 54, at three "
                 "learning rates? (chapter 12)",
        arms=tuple(which_article.LONG_ARMS), run=which_article.long_run_accuracies,
        cheapest_arm="random encoder, lr 0.002",
        settings={**FINETUNE_SETTINGS, "epochs": which_article.LONG_EPOCHS,
                  "lr": dict(which_article.LONG_ARMS)}),
    Experiment(
        name="task_shapes",
        question="Does the book's pretrained encoder, as it is and continued with NSP, beat a "
                 "random one on a pair task, on tagging the words Wikipedia's editors linked and on "
                 "finding the words linked to a page, tested on articles it never read? And the second "
                 "model's encoder, at the book's rate and at BERT's? (chapter 13)",
        arms=EXPERIMENT_ENCODERS, run=task_shape_metrics, cheapest_arm="random encoder",
        settings={**FINETUNE, "lr_by_arm": {SECOND_AT_BERT_RATE: BERT_FINETUNE_LR},
                  "sizes": {"pair": SIZES, "tagging": WIKI_LINK_SIZES, "span": WIKI_LINK_QUESTIONS},
                  "tasks": {k: list(t.measures) for k, t in TASKS.items()},
                  "train": "articles the book's model read", "test": "the five it never read"}),
    Experiment(
        name="hf_routes",
        question="Fine-tuned through 🤗 Trainer with chapter 13's settings, do the book's tagger and "
                 "span head land where mlm_lib's do; and does the span head trained on every window, "
                 "[CLS] where the answer is not (BERT's way), answer better than one trained on the "
                 "answering windows alone? (chapter 13, its second page)",
        arms=hf_routes.ARMS, run=hf_routes.route_metrics, cheapest_arm=hf_routes.TAGGER,
        settings={**FINETUNE, "overlap": hf_routes.OVERLAP, "checkpoint": "the book's model as a 🤗 folder",
                  "train": "articles the book's model read", "test": "the five it never read"}),
    Experiment(
        name="link_labels",
        question="Does a tagger find the editors' links better when every mention in the article of "
                 "a phrase linked in it is tagged too (WikiNER's propagation), on the book's encoder "
                 "and on the second model's? (chapter 13)",
        arms=LABEL_ARMS, run=label_metrics, cheapest_arm=f"{ENCODERS[0]}, propagated links",
        settings={**FINETUNE, "labels": {k: [str(p.name) for p in v.values()]
                                         for k, v in LABELS.items()},
                  "train": "articles the book's model read", "test": "the five it never read"}),
    Experiment(
        name="dev_choice",
        question="Chosen on a development split (a fifth of the training examples) from a grid of "
                 "rates scaled to each model, the best epoch's weights kept and the test set scored "
                 "once: which rate and epochs suit the book's model and the second model on chapter "
                 "12's and 13's tasks, and does the second model still collapse? (chapters 12, 13)",
        arms=dev_choice.ARMS, run=dev_choice.choice_metrics,
        cheapest_arm=f"which article, {dev_choice.BOOK}",
        settings={"rates": {k: list(v) for k, v in dev_choice.RATES.items()},
                  "max_epochs": dev_choice.MAX_EPOCHS, "dev_fraction": dev_choice.DEV_FRACTION,
                  "dev_seed": dev_choice.DEV_SEED, "measures": dev_choice.TASKS,
                  "which_article": FINETUNE_SETTINGS, "task_shapes": FINETUNE,
                  "chosen": "per seed: the rate and epoch with the best development score",
                  "test": "chapter 12's read-article test sentences; chapter 13's unread articles"}),
    Experiment(
        name="generation",
        question="Does BERT write better by refilling a whole draft than left to right, and how "
                 "does either compare with a causal model of the same size? (chapter 8)",
        arms=generation.ARMS, run=generation.generation_metrics, cheapest_arm=generation.ARMS[1],
        settings={"prompts_per_seed": generation.PROMPTS_PER_SEED,
                  "prompt_words": generation.PROMPT_WORDS, "num_tokens": generation.NUM_TOKENS,
                  "rounds": generation.ROUNDS, "causal": generation.CAUSAL,
                  "prompts": "first words of sentences of the five unread articles, drawn per seed",
                  "judge": "repeats: share of pieces closing a pair already written; bigram_nll: "
                           "add-one bigram counts of the training text"}),
    Experiment(
        name="transfer",
        question="Fine-tuned on chapter 12's and chapter 13's tasks, does the book's model continued "
                 "as ELECTRA's discriminator beat it continued with MLM, at the same steps, "
                 "batches and learning rate? (chapter 15)",
        arms=transfer.ARMS, run=transfer.transfer_metrics, cheapest_arm=transfer.ARMS[0],
        settings={"continue": {**transfer.BUDGET, "start": "book model",
                               "electra_generator": "book model, fixed"},
                  "which_article": FINETUNE_SETTINGS, "task_shapes": FINETUNE,
                  "test": "chapter 12's read and unread test sentences; chapter 13's unread articles"}),
    Experiment(
        name="regrow",
        question=f"How many held-out blanks does {regrown.ENCODER}'s encoder fill once given an MLM "
                 "head again, against the count baselines and the book's model? (chapters 10, 12)",
        arms=(regrown.SHIPPED_ARM,), run=regrown.run_regrow, cheapest_arm=regrown.SHIPPED_ARM,
        settings={**regrown.RECIPE, "seq_length": regrown.SEQ_LENGTH,
                  "start": f"{regrown.ENCODER} ({regrown.PACKAGE}), a new MLM head",
                  "trains": list(regrown.ARMS[regrown.SHIPPED_ARM]),
                  "tests": "the held-out split's blanks (15% of pieces, [MASK]); shared blanks: "
                           "held-out words one piece in both vocabularies"}),
    Experiment(
        name="regrow_arms",
        question=f"How much of {regrown.ENCODER}'s encoder must train with its new MLM head: none, "
                 f"the top two layers, or all six, in {regrown.ARMS_STEPS} steps? (chapter 12)",
        arms=tuple(regrown.ARMS), run=regrown.run_regrow_arm, cheapest_arm="head only",
        settings={**regrown.RECIPE, "steps": regrown.ARMS_STEPS, "seq_length": regrown.SEQ_LENGTH,
                  "trains": {arm: list(p) for arm, p in regrown.ARMS.items()}}),
    Experiment(
        name="electra",
        question="Can a small ELECTRA discriminator learn to spot a fixed generator's samples in "
                 f"{ELECTRA_STEPS} steps, and better than a detector that reads only the token? "
                 "(chapter 15)",
        arms=tuple(ELECTRA_ARMS), run=electra_metrics, cheapest_arm="unigram, token only",
        settings={"steps": ELECTRA_STEPS, "batch_size": ELECTRA_BATCH_SIZE, "lr": ELECTRA_LR,
                  "generator": "fixed", "train": "articles the book's model read",
                  "test": "the five it never read, masks and samples drawn once"}),
    Experiment(
        name="successors",
        question="With the book's recipe, data and budget, do ModernBERT's and DeBERTa-v3's encoders "
                 "fill more held-out blanks than BERT's, per step and per second? (chapter 15)",
        arms=successors.ENCODERS, run=successors.successor_metrics,
        cheapest_arm=successors.MODERNBERT,
        settings={"steps": successors.STEPS, "schedule_steps": 6000, "base": "BOOK_RECIPE_32",
                  "eval_every": successors.EVAL_EVERY, "geglu_inner": successors.GEGLU_INNER,
                  "modernbert": successors.MODERNBERT_BASE, "deberta": successors.DEBERTA_V3,
                  "objective": "MLM at 15% (80/10/10) for all three",
                  "test": "the held-out split's blanks, as every chapter's"}),
    Experiment(
        name="successor_mask_rate",
        question="Does ModernBERT's encoder, on the book's recipe and budget, fill more held-out "
                 "blanks when it trains at its paper's 30% mask rate than at BERT's 15%? (chapter 15)",
        arms=tuple(successors.MASK_RATE_ARMS), run=successors.mask_rate_metrics,
        cheapest_arm=f"{successors.MODERNBERT}, 15%",
        settings={"steps": successors.STEPS, "schedule_steps": 6000, "base": "BOOK_RECIPE_32",
                  "eval_every": successors.EVAL_EVERY, "mask_rates": successors.MASK_RATE_ARMS,
                  "test": "the held-out split's blanks (15%, all [MASK]), as every chapter's"}),
)}


def _timed_run(name: str, arm: str, seed: int, threads: int) -> tuple[dict[str, float], float]:
    """One run in a worker process (module-level, so that a process pool can call it)."""
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    metrics = EXPERIMENTS[name].run(arm, seed)
    return metrics, round(time.perf_counter() - t0, 1)


def run_experiment(experiment: Experiment, seeds: Sequence[int], command: str,
                   arms: Sequence[str] | None = None, jobs: int = 1,
                   log: Callable[[str], None] = print) -> Results:
    """Run every arm with every seed, ``jobs`` runs at a time in separate processes (each with
    the current number of torch threads); returns the :class:`~mlm_lib.book.results.Results`."""
    start, commit = time.perf_counter(), git_commit()
    arms = list(arms or experiment.arms)
    todo = [(arm, seed) for arm in arms for seed in seeds]
    threads = torch.get_num_threads()
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_timed_run, experiment.name, arm, seed, threads)
                   for arm, seed in todo]
        runs = []
        for (arm, seed), future in zip(todo, futures):
            metrics, wall_s = future.result()
            runs.append(Run(arm, seed, metrics, wall_s))
            log(f"{experiment.name} | {arm} | seed {seed}: "
                + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
    return Results(experiment.name, experiment.question, arms, list(seeds), experiment.settings,
                   runs, provenance(command, time.perf_counter() - start, commit))



def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m mlm_lib.book.experiments",
                                     description="Run a multi-seed experiment and write its "
                                                 "results file.")
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads per run (default 1: run experiments side by side)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs side by side, one process each (e.g. one per core)")
    parser.add_argument("--out", help=f"folder for the results file (default {RESULTS_DIR})")
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error("--seeds must be at least 2: an interval needs two runs")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    torch.set_num_threads(args.threads)
    given = list(argv if argv is not None else sys.argv[1:])
    if args.out:  # where the file goes is not part of the experiment (nor a machine's folders)
        at = given.index("--out") if "--out" in given else None
        given = given[:at] + given[at + 2:] if at is not None else [a for a in given if not a.startswith("--out=")]
    command = "python -m mlm_lib.book.experiments " + " ".join(given)
    results = run_experiment(EXPERIMENTS[args.experiment], range(args.seeds), command.strip(),
                             jobs=args.jobs)
    path = save_results(results, args.out)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
