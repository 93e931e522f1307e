"""Small, seeded experiments that the chapters run live, on top of :mod:`mlm_lib.train`.

Each one answers a question of the book with a measurement that takes seconds on a laptop CPU:

- :func:`train_micro` (chapters 6 and 7) trains the chapters' small BERT, preset ``"micro"``
  (2 layers x 64, no dropout), with a chosen :class:`~mlm_lib.masking.Corruption` and returns the
  model with its training history;
- :func:`score` (chapters 6 and 7) evaluates any model on held-out blanks corrupted by any
  recipe, e.g. inputs that contain no [MASK] at all (what a model meets when it is fine-tuned);
- :func:`train_next_token` (chapter 8) trains the same encoder with a bidirectional or a causal
  attention bias, to show why a next-word predictor must not see the future;
- :func:`generate_left_to_right` (chapter 8) uses BERT as if it were GPT, one [MASK] at a time;
- :func:`position_similarity` and :func:`plot_attention` (chapter 7) draw what is inside.

Small models learn little in a few hundred steps, so what the chapters compare is always two
runs that differ in exactly one setting, with the same seed, data and number of steps.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import functools
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mlm_lib.batches import EVAL_SEED, masked_batches
from mlm_lib.init import build_model
from mlm_lib.loop import History, Objective, Sums, evaluate, train_loop
from mlm_lib.loss import mlm_loss_sum
from mlm_lib.masking import BERT_CORRUPTION, EVAL_CORRUPTION, Corruption
from mlm_lib.model import BertForPreTraining, attention_bias
from mlm_lib.optim import build_optimizer
from mlm_lib.pretraining import PreparedData, PretrainingExample, prepare_data
from mlm_lib.book.results import RESULTS_DIR, Results, Run, git_commit, provenance, save_results
from mlm_lib.train import TrainConfig, evaluate_mlm, train

# The chapters' model: preset "micro" (2 layers, hidden 64, 2 heads) without dropout, so that a
# few hundred steps take seconds on two CPU cores and two runs differ only where they are told to.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
WARMUP_STEPS = 20  # a tenth of the usual 200-step run
NEXT_TOKEN_EVAL_ROWS = 256  # held-out windows scored after next-token training (one batch)


@functools.lru_cache(maxsize=4)
def chapter_data(max_seq_length: int = 64, nsp: bool = False, seed: int = 0) -> PreparedData:
    """The Wikipedia excerpt cut into examples with the book's tokenizer (cached per process:
    every run of a chapter trains on exactly the same examples, tokenized once)."""
    cfg = TrainConfig(max_seq_length=max_seq_length, short_seq_prob=0.0, nsp=nsp, seed=seed)
    return prepare_data(cfg)


def _micro_config(**overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of the chapters' experiments; any field can be overridden
    (``model`` overrides are merged into the no-dropout settings)."""
    model = {**NO_DROPOUT, **overrides.pop("model", {})}
    base = dict(preset="micro", model=model, max_seq_length=64, short_seq_prob=0.0, nsp=False,
                batch_size=32, lr=1e-2, position_init="sinusoidal", warmup_steps=WARMUP_STEPS,
                max_steps=200, log_every=10,
                eval_every=0, seed=0, device="cpu", amp=False, threads=None, progress=False)
    base.update(overrides)
    return TrainConfig(**base)


@dataclass
class MicroRun:
    """A trained small model, what it was trained on, and how its training loss went."""

    model: torch.nn.Module
    tokenizer: Any
    history: History
    config: TrainConfig
    data: PreparedData = field(repr=False)

    def train_curve(self, key: str = "mlm_loss") -> tuple[list[int], list[float]]:
        """(steps, values) of a training metric, ready for ``plt.plot``."""
        cols = self.history.columns("step", key, kind="train")
        return cols["step"], cols[key]


def _check_start_from(model: torch.nn.Module, vocab_size: int, seq_len: int) -> None:
    """A model to continue from must share the data's vocabulary and read its sequences."""
    if model.config.vocab_size != vocab_size:
        raise ValueError(f"start_from has a vocabulary of {model.config.vocab_size}, the "
                         f"data's tokenizer {vocab_size}")
    if model.config.max_position_embeddings < seq_len:
        raise ValueError(f"start_from reads at most {model.config.max_position_embeddings} "
                         f"positions; the sequences have {seq_len}")


def train_micro(corruption: Corruption = BERT_CORRUPTION, steps: int = 200, seed: int = 0,
               data: PreparedData | None = None, start_from: BertForPreTraining | None = None,
               **overrides: Any) -> MicroRun:
    """Train the chapters' small BERT with one corruption recipe; everything else fixed and seeded.

    ``corruption.select`` is the share of tokens put in M; ``mask``/``random``/``keep`` split M
    into [MASK], random tokens and unchanged tokens (BERT: 0.8/0.1/0.1). Other
    :class:`TrainConfig` fields (``lr``, ``batch_size``, ``model``...) pass through ``overrides``.

    ``start_from``: continue training a copy of this model (e.g. the book's model) instead of a
    fresh one. A fresh BERT spends its first few hundred steps on the unigram plateau, where every
    recipe looks the same; a trained one shows in a few hundred steps what a recipe does to it.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    overrides.setdefault("warmup_steps", min(WARMUP_STEPS, steps))
    if start_from is not None:
        config = start_from.config
        overrides.setdefault("model", {k: getattr(config, k) for k in (
            "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size")})
        overrides.setdefault("max_seq_length", config.max_position_embeddings)
    cfg = _micro_config(corruption=corruption, max_steps=steps, seed=seed, **overrides)
    if data is None:
        data = chapter_data(cfg.max_seq_length, cfg.nsp)
    if start_from is not None:
        _check_start_from(start_from, data.tokenizer.vocab_size, cfg.max_seq_length)
        model = copy.deepcopy(start_from).float().train()
    else:
        model = build_model(cfg, data.tokenizer.vocab_size)
    result = train(model, data.tokenizer, data.train_examples, cfg)
    result.model.eval()
    return MicroRun(result.model, data.tokenizer, result.history, cfg, data)


def score(model: BertForPreTraining, data: PreparedData, corruption: Corruption = EVAL_CORRUPTION,
          seed: int = EVAL_SEED, max_examples: int | None = None) -> dict[str, float]:
    """Held-out masked-token loss and accuracy (``mlm_loss``, ``mlm_acc``) of ``model`` on the
    validation examples of ``data``, corrupted as :func:`~mlm_lib.batches.masked_batches` does
    (same seed, same blanks for every model)."""
    batches = masked_batches(data.valid_examples, data.tokenizer, corruption, seed,
                             max_examples=max_examples)
    return evaluate_mlm(model, batches, nsp=False)


# ---------------------------------------------------------------- both directions

def token_windows(examples: Sequence[PretrainingExample], special_ids: Sequence[int] | frozenset[int],
                  length: int) -> torch.Tensor:
    """The examples' tokens (special tokens dropped) as one stream cut into rows of ``length``."""
    special = set(special_ids)
    stream = [t for e in examples for t in e.input_ids if t not in special]
    n = len(stream) // length
    if n == 0:
        raise ValueError(f"not enough tokens for one window of length {length}")
    return torch.tensor(stream[:n * length], dtype=torch.long).view(n, length)


@dataclass
class NextTokenRun:
    """A next-token predictor trained with one attention bias."""

    causal: bool
    steps: list[int]
    train_loss: list[float]
    valid_loss: float
    valid_accuracy: float
    model: torch.nn.Module = field(repr=False)


def next_token_objective(bias: torch.Tensor) -> Objective:
    """GPT's objective on rows of tokens: predict x_{i+1} at every position i, through the
    encoder with the attention ``bias``; the MLM head scores the whole vocabulary."""
    def objective(model: BertForPreTraining, rows: torch.Tensor) -> tuple[torch.Tensor, Sums]:
        h = model.bert(rows, attn_bias=bias).last_hidden_state
        logits = model.cls.mlm_logits(h[:, :-1], model.bert.embeddings.word_embeddings.weight)
        targets = rows[:, 1:]
        nll_sum, n = mlm_loss_sum(logits, targets), targets.numel()
        correct = (logits.argmax(-1) == targets).sum()
        return nll_sum / n, {"loss": (nll_sum, n), "accuracy": (correct, n)}
    return objective


def train_next_token(causal: bool, steps: int = 150, seed: int = 0, seq_len: int = 32,
                     batch_size: int = 32, lr: float = 3e-3, data: PreparedData | None = None,
                     log_every: int = 10, start_from: BertForPreTraining | None = None
                     ) -> NextTokenRun:
    """Train a small encoder to predict x_{i+1} at every position i (GPT's objective).

    With ``causal=False`` position i can attend to position i+1, which *is* the answer: the
    loss collapses because the model learns to copy, however small it is. With ``causal=True``
    it must guess from the left, as a language model has to at generation time.

    ``start_from``: train a copy of this model (e.g. the book's) instead of a fresh small one. A
    fresh one first has to discover word order, which takes longer than a chapter can wait.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    data = data or chapter_data()
    tok = data.tokenizer
    train_rows = token_windows(data.train_examples, tok.special_ids, seq_len)
    valid_rows = token_windows(data.valid_examples, tok.special_ids, seq_len)
    if start_from is not None:
        _check_start_from(start_from, tok.vocab_size, seq_len)
        model = copy.deepcopy(start_from).float()
        torch.manual_seed(seed)
    else:  # the masked runs' model, sinusoidal start: word order visible from step 0
        model = build_model(_micro_config(max_seq_length=seq_len, seed=seed), tok.vocab_size)
    g = torch.Generator().manual_seed(seed)

    def batches() -> Iterator[list[torch.Tensor]]:  # random windows, one micro-batch per step
        while True:
            yield [train_rows[torch.randint(len(train_rows), (batch_size,), generator=g)]]

    objective = next_token_objective(attention_bias(seq_len, causal))
    state = train_loop(model, objective, batches(), build_optimizer(model, lr), None, steps,
                       log_every=log_every)  # a constant learning rate
    valid = evaluate(model, objective, [valid_rows[:NEXT_TOKEN_EVAL_ROWS]])
    model.eval()
    curve = state.history.columns("step", "loss", kind="train")
    return NextTokenRun(causal, curve["step"], curve["loss"], valid["loss"], valid["accuracy"], model)


@torch.no_grad()
def generate_left_to_right(model: torch.nn.Module, tokenizer: Any, prompt: str,
                           num_tokens: int = 10) -> list[str]:
    """Use a BERT as if it were GPT: put [MASK] after the text, take the most probable piece,
    append it, repeat. Returns the generated pieces (the prompt not included)."""
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    model.eval()
    ids = tokenizer.encode(prompt).input_ids[:-1]  # [CLS] prompt, without the final [SEP]
    banned = torch.tensor(sorted(tokenizer.special_ids))
    out: list[int] = []
    for _ in range(num_tokens):
        x = torch.tensor([ids + out + [tokenizer.mask_id, tokenizer.sep_id]])
        masked = x == tokenizer.mask_id
        logits = model(x, masked_positions=masked).mlm_logits[0]
        logits[banned] = float("-inf")
        out.append(int(logits.argmax()))
    return tokenizer.convert_ids_to_tokens(out)


# ---------------------------------------------------------------- looking inside

def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between every pair of rows of a position table ([P, H] -> [P, P])."""
    if table.dim() != 2:
        raise ValueError(f"a position table is [positions, hidden], got {tuple(table.shape)}")
    unit = torch.nn.functional.normalize(table.float(), dim=-1)
    return unit @ unit.T


def plot_attention(ax: Any, attention: torch.Tensor, tokens: Sequence[str], title: str = "",
                   highlight: Sequence[int] = ()) -> Any:
    """Draw one head's attention [T, T] (rows: the position that reads, columns: the position it
    reads from) with token labels; ``highlight`` puts a box around the rows of interest."""
    from matplotlib.patches import Rectangle  # matplotlib is optional: only the chapters draw

    a = attention.detach().float().cpu()
    if a.dim() != 2 or a.shape[0] != a.shape[1] or a.shape[0] != len(tokens):
        raise ValueError(f"attention must be [T, T] with T = {len(tokens)} tokens, "
                         f"got {tuple(a.shape)}")
    im = ax.imshow(a.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
    ax.set_xlabel("reads from (key)")
    ax.set_ylabel("position reading (query)")
    for r in highlight:
        ax.add_patch(Rectangle((-0.5, r - 0.5), len(tokens), 1, fill=False, edgecolor="red",
                               linewidth=1.5))
    if title:
        ax.set_title(title)
    return im


# ---------------------------------------------------------------- multi-seed experiments
# A conclusion drawn from one seed can be noise. These experiments run every arm (the one setting
# that differs) with several seeds, from the command line, and write a results file (see
# :mod:`mlm_lib.book.results`) that the chapters load and summarise with 95% intervals:
#
#     python -m mlm_lib.book.experiments corruption --seeds 5

Metrics = dict[str, float]

# Chapters 6 and 7 continue the book's model for 150 steps: a fresh model would spend them on the
# unigram plateau, where every recipe scores the same and a comparison shows nothing.
CONTINUE = dict(steps=150, lr=1e-3, batch_size=32)
TESTS = {"mask": EVAL_CORRUPTION,                                   # real blanks
         "untouched": Corruption(mask=0.0, random=0.0, keep=1.0),  # report the token shown
         "random": Corruption(mask=0.0, random=1.0, keep=0.0)}     # repair a wrong token
CORRUPTION_ARMS = {"80/10/10": BERT_CORRUPTION, "100% [MASK]": EVAL_CORRUPTION,
                   "rate 0.30": Corruption(select=0.3), "rate 0.50": Corruption(select=0.5),
                   "rate 0.80": Corruption(select=0.8)}
LEAK_ARMS = {"token kept (leak)": TESTS["untouched"], "[MASK]": EVAL_CORRUPTION}
NSP_ARMS = {"MLM + NSP": True, "MLM alone": False}
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


@dataclass(frozen=True)
class Experiment:
    """A question answered by runs that differ in one setting (the arm), over several seeds.

    ``run(arm, seed)`` trains one model and returns its metrics. ``tolerance`` is how far a
    re-run may land from the stored metrics on another machine (different CPU kernels round
    differently and training amplifies it); ``cheapest_arm`` is the one the reproduction test
    re-runs.
    """

    name: str
    question: str
    arms: tuple[str, ...]
    run: Callable[[str, int], Metrics]
    settings: dict[str, Any]
    tolerance: dict[str, float]
    cheapest_arm: str


def _continue_book_model(corruption: Corruption, seed: int, pairs: bool = False,
                         nsp: bool = False) -> MicroRun:
    """Continue the book's model for CONTINUE's steps. ``pairs``: on [CLS] A [SEP] B [SEP] pairs
    instead of single segments; ``nsp``: with the NSP loss added to the MLM loss."""
    from mlm_lib.book.book_model import book_model  # the book's model loads its own checkpoint

    model = book_model()
    data = chapter_data(model.config.max_position_embeddings, nsp=pairs)
    return train_micro(corruption, seed=seed, data=data, start_from=model, nsp=nsp, **CONTINUE)


def _run_corruption(arm: str, seed: int) -> Metrics:
    run = _continue_book_model(CORRUPTION_ARMS[arm], seed)
    metrics = {f"{name}_acc": score(run.model, run.data, test)["mlm_acc"]
               for name, test in TESTS.items()}
    return {**metrics, "mlm_loss": score(run.model, run.data)["mlm_loss"]}


def _run_leak(arm: str, seed: int) -> Metrics:
    run = _continue_book_model(LEAK_ARMS[arm], seed)
    held_out = score(run.model, run.data)
    return {"final_train_loss": run.train_curve()[1][-1], "mlm_acc": held_out["mlm_acc"],
            "mlm_loss": held_out["mlm_loss"]}


def _run_nsp(arm: str, seed: int) -> Metrics:
    run = _continue_book_model(BERT_CORRUPTION, seed, pairs=True, nsp=NSP_ARMS[arm])
    held_out = evaluate_mlm(run.model, masked_batches(run.data.valid_examples, run.data.tokenizer),
                            nsp=True)
    return {"mlm_acc": held_out["mlm_acc"], "mlm_loss": held_out["mlm_loss"],
            "nsp_acc": held_out["nsp_acc"]}


def _run_recipe(arm: str, seed: int) -> Metrics:
    from mlm_lib.book.book_model import BOOK_RECIPE_32

    change = dict(RECIPE_ARMS[arm])
    model_change = change.pop("model", {})
    cfg = TrainConfig(**{**BOOK_RECIPE_32, "model": {**BOOK_RECIPE_32["model"], **model_change},
                         "stop_at_step": RECIPE_STEPS, "save_every": 0, "threads": None,
                         "progress": False, "seed": seed, **change})
    data = chapter_data(cfg.max_seq_length, cfg.nsp)
    model = build_model(cfg, data.tokenizer.vocab_size)
    trained = train(model, data.tokenizer, data.train_examples, cfg).model.eval()
    held_out = score(trained, chapter_data(BOOK_RECIPE_32["max_seq_length"]))  # the same blanks
    return {"mlm_acc": held_out["mlm_acc"], "mlm_loss": held_out["mlm_loss"]}


# Tolerances of the reproduction test. Re-running one arm and seed with other fp32 kernels (AVX2
# instead of AVX-512) or 2 threads instead of 1 moved a continued run's accuracies by 0 and its
# losses by < 1e-6. A from-scratch run is chaotic where it leaves the plateau: re-runs moved it by
# up to 0.0052 in accuracy and 0.021 in loss. Each tolerance is about twice the largest drift seen
# and smaller than the standard deviation between seeds (0.003 to 0.006 for the continued runs'
# accuracies, 0.017 and 0.12 for the recipe's), so a change that moves a result by a seed's worth
# is caught.
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("corruption", "What do the corruption recipe and the mask rate change, 150 steps "
               "on from the book's model? (chapter 6)", tuple(CORRUPTION_ARMS), _run_corruption,
               {**CONTINUE, "start": "book model", "tests": list(TESTS)},
               {"mask_acc": 0.002, "untouched_acc": 0.002, "random_acc": 0.002,
                "mlm_loss": 0.005}, "80/10/10"),
    Experiment("leak", "Does a model that sees the answer at its blanks learn to infer it? "
               "(chapter 7)", tuple(LEAK_ARMS), _run_leak, {**CONTINUE, "start": "book model"},
               {"final_train_loss": 0.01, "mlm_acc": 0.002, "mlm_loss": 0.005}, "[MASK]"),
    Experiment("nsp", "Does adding NSP to MLM change what a trained encoder learns in 150 more "
               "steps, and does its NSP head learn? (chapter 11)", tuple(NSP_ARMS), _run_nsp,
               {**CONTINUE, "start": "book model", "data": "NSP pairs"},
               {"mlm_acc": 0.002, "mlm_loss": 0.005, "nsp_acc": 0.006}, "MLM alone"),
    Experiment("recipe", "Which choices get a small BERT off the unigram plateau? (chapter 10)",
               tuple(RECIPE_ARMS), _run_recipe, {"steps": RECIPE_STEPS, "schedule_steps": 6000,
                                                 "base": "BOOK_RECIPE_32", "changes": RECIPE_ARMS},
               {"mlm_acc": 0.011, "mlm_loss": 0.08}, "book recipe"),
)}


def _timed_run(name: str, arm: str, seed: int, threads: int) -> tuple[Metrics, float]:
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
    command = "python -m mlm_lib.book.experiments " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    results = run_experiment(EXPERIMENTS[args.experiment], range(args.seeds), command.strip(),
                             jobs=args.jobs)
    path = save_results(results, args.out)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
