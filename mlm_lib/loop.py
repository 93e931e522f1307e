"""One training loop and one evaluator for every model of the book.

The loop knows nothing of BERT. It is given an *objective*, a function ``objective(model, batch)``
that returns the loss to differentiate and the sums to report, e.g. ``{"mlm_loss": (sum of
-log P(x_i | x_\\M), |M|)}``. Pretraining, the chapters' experiments and fine-tuning differ only
in their objective and their batches (minGPT's ``trainer.py`` is the model).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn
from tqdm.auto import tqdm

from mlm_lib.device import DistInfo, all_reduce_

Batch = dict[str, Any]
# name -> (total, count): reported as total / count; a count of None reports the total itself
Sums = dict[str, tuple[Any, Any]]
Objective = Callable[[nn.Module, Batch], tuple[torch.Tensor, Sums]]


class Schedule(Protocol):
    """A learning-rate schedule: told after every step how far training has come."""

    def step(self, elapsed: float | None = None) -> None: ...


class History:
    """A list of dicts, one per logged step or evaluation, plus :meth:`columns` for plotting:
    ``plt.plot(*h.columns("step", "mlm_loss", kind="train").values())``."""

    def __init__(self, records: list[dict[str, Any]] | None = None) -> None:
        self.records: list[dict[str, Any]] = list(records or [])

    def append(self, kind: str, **values: Any) -> None:
        self.records.append({"kind": kind, **values})

    def columns(self, *keys: str, kind: str | None = None) -> dict[str, list[Any]]:
        """Column-wise view of the records of one ``kind`` ("train" or "eval"). With no keys,
        every key that appears; missing values are ``None``."""
        rows = [r for r in self.records if kind is None or r.get("kind") == kind]
        if not keys:
            seen: dict[str, None] = {}
            for r in rows:
                seen.update(dict.fromkeys(r))
            keys = tuple(seen)
        return {k: [r.get(k) for r in rows] for k in keys}

    def last(self, kind: str) -> dict[str, Any] | None:
        for r in reversed(self.records):
            if r.get("kind") == kind:
                return r
        return None

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"History({len(self.records)} records)"


class Metrics:
    """Running totals of an objective's sums, kept in float64 so that long windows do not drift."""

    def __init__(self) -> None:
        self.totals: dict[str, list[Any]] = {}

    def add(self, sums: Sums) -> None:
        for name, (total, count) in sums.items():
            total = total.detach().double() if isinstance(total, torch.Tensor) else float(total)
            entry = self.totals.setdefault(name, [0.0, None if count is None else 0.0])
            entry[0] = entry[0] + total
            if count is not None:
                entry[1] += float(count)

    def summary(self, dist: DistInfo | None = None) -> dict[str, float]:
        """total / count per name (summed over all processes first), then start afresh. Totals
        without a count (e.g. how many tokens) stay whole numbers when they are."""
        names = list(self.totals)  # the objective's order, the same in every process
        table = torch.tensor([[float(self.totals[n][0]), self.totals[n][1] or 0.0] for n in names],
                             dtype=torch.float64)
        all_reduce_(table, dist or DistInfo())
        out: dict[str, float] = {}
        for name, (total, count) in zip(names, table.tolist()):
            if self.totals[name][1] is not None:
                out[name] = total / max(count, 1.0)
            else:
                out[name] = int(total) if total.is_integer() else total
        self.totals = {}
        return out


@dataclass
class LoopState:
    """Where a run is: what a checkpoint saves and what callbacks read."""

    step: int = 0
    elapsed: float = 0.0  # training seconds (evaluation and saving not counted)
    history: History = field(default_factory=History)
    # Raises TrainingDiverged if a loss so far was not finite; train_loop sets it. A callback that
    # keeps the weights (a checkpoint) calls it first: between log steps the loop has not read the
    # record on a GPU, and a saved checkpoint must not hold a diverged model.
    check_finite: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step."""


class _FirstNonFinite:
    """The first step whose loss was NaN or infinite, kept on the loss's device.

    Noting a step never waits for it; reading the record back does (on a GPU, a read waits for
    all the work queued so far), so :func:`train_loop` reads it where it reads anyway: at its log
    steps, and after every step on the CPU, where reading is free."""

    def __init__(self) -> None:
        self.step: torch.Tensor | None = None  # 0 while every loss so far was finite
        self.loss: torch.Tensor | None = None

    def note(self, step_loss: torch.Tensor, step: int) -> None:
        if self.step is None or self.loss is None:
            self.step = torch.zeros((), dtype=torch.long, device=step_loss.device)
            self.loss = torch.zeros((), dtype=step_loss.dtype, device=step_loss.device)
        first = (self.step == 0) & ~torch.isfinite(step_loss)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, step_loss, self.loss)

    def check(self, optimizer: torch.optim.Optimizer, dist: DistInfo, step: int) -> None:
        """Raise :class:`TrainingDiverged` in every process if a loss of any was not finite by
        ``step``, naming the first bad step."""
        seen = 0 if self.step is None else int(self.step)
        if float(all_reduce_(torch.tensor([float(seen > 0)]), dist)) > 0:
            optimizer.zero_grad(set_to_none=True)
            if seen and self.loss is not None:
                raise TrainingDiverged(f"loss became {float(self.loss)} at step {seen}")
            raise TrainingDiverged(f"loss became non-finite in another process by step {step}")


@torch.no_grad()
def evaluate(model: nn.Module, objective: Objective, batches: Sequence[Batch]) -> dict[str, float]:
    """The objective's reports on held-out batches, in eval mode (no dropout), without gradients."""
    was_training = model.training
    model.eval()
    metrics = Metrics()
    try:
        for batch in batches:
            metrics.add(objective(model, batch)[1])
    finally:
        model.train(was_training)
    return metrics.summary()


def train_loop(model: nn.Module, objective: Objective, batches: Iterator[list[Batch]],
               optimizer: torch.optim.Optimizer, schedule: Schedule | None, end_step: int, *,
               state: LoopState | None = None, clip_grad_norm: float | None = 1.0,
               log_every: int = 10, time_budget_s: float | None = None,
               callbacks: Sequence[Callable[[LoopState], None]] = (),
               on_log: Callable[[dict[str, Any]], None] | None = None,
               scaler: torch.amp.GradScaler | None = None, dist: DistInfo | None = None,
               progress: bool = False, desc: str = "training") -> LoopState:
    """Optimizer steps until step ``end_step`` (or ``time_budget_s`` of training time).

    Each step takes the next item of ``batches``, a list of micro-batches whose losses add up to
    the step's loss (gradient accumulation), then clips, steps the optimizer and the schedule
    (``None``: a constant learning rate). Every ``log_every`` steps the reports become a "train"
    record of ``state.history`` (a report named ``tokens`` becomes ``tokens_per_s``, over training
    time); after every step each callback gets the state (to evaluate or save a checkpoint).

    A NaN or infinite loss stops the run with :class:`TrainingDiverged`, naming the first bad
    step: on the CPU before the optimizer takes that step, elsewhere at the next log step (reading
    the loss back every step would make the host wait for the device every step)."""
    state, dist = state or LoopState(), dist or DistInfo()
    metrics, logged_at, nonfinite = Metrics(), state.elapsed, _FirstNonFinite()
    state.check_finite = lambda: nonfinite.check(optimizer, dist, state.step)
    bar = tqdm(total=end_step, initial=state.step, disable=not (progress and dist.is_main),
               desc=desc, dynamic_ncols=True)
    model.train()
    try:
        while state.step < end_step and not _out_of_time(state, time_budget_s, dist):
            t0 = time.perf_counter()
            step_loss = _accumulate(model, objective, next(batches), metrics, scaler, dist)
            nonfinite.note(step_loss, state.step + 1)
            if step_loss.device.type == "cpu":  # free to read: stop before the optimizer steps
                nonfinite.check(optimizer, dist, state.step + 1)
            _optimizer_step(model, optimizer, clip_grad_norm, scaler)
            state.step += 1
            state.elapsed += time.perf_counter() - t0
            if schedule is not None:
                schedule.step(state.elapsed)
            bar.update(1)
            if state.step % log_every == 0 or state.step == end_step:
                nonfinite.check(optimizer, dist, state.step)
                reports = metrics.summary(dist)
                if "tokens" in reports:
                    reports["tokens_per_s"] = reports.pop("tokens") / max(state.elapsed - logged_at, 1e-9)
                record = {"step": state.step, "lr": optimizer.param_groups[0]["lr"], **reports,
                          "elapsed": state.elapsed}
                state.history.append("train", **record)
                bar.set_postfix({k: f"{v:.3g}" for k, v in list(reports.items())[:2]})
                if on_log and dist.is_main:
                    on_log(state.history.records[-1])
                logged_at = state.elapsed
            for callback in callbacks:
                callback(state)
        nonfinite.check(optimizer, dist, state.step)  # a time budget may end between log steps
    finally:
        bar.close()
    return state


def _out_of_time(state: LoopState, time_budget_s: float | None, dist: DistInfo) -> bool:
    """Whether the training time is spent; under several processes the slowest one's clock
    decides, so that all of them stop at the same step."""
    if time_budget_s is None:
        return False
    elapsed = all_reduce_(torch.tensor([state.elapsed], dtype=torch.float64), dist, op="max")
    return float(elapsed) >= time_budget_s


def _accumulate(model: nn.Module, objective: Objective, micro_batches: list[Batch],
               metrics: Metrics, scaler: torch.amp.GradScaler | None, dist: DistInfo
               ) -> torch.Tensor:
    """Forward and backward over one step's micro-batches; DDP averages gradients on the last."""
    step_loss: torch.Tensor | None = None
    for i, batch in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with contextlib.nullcontext() if last or not dist.enabled else model.no_sync():
            loss, sums = objective(model, batch)
            (scaler.scale(loss) if scaler is not None else loss).backward()
        step_loss = loss.detach() if step_loss is None else step_loss + loss.detach()
        metrics.add(sums)
    if step_loss is None:
        raise ValueError("a step needs at least one micro-batch")
    return step_loss


def _optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                   clip_grad_norm: float | None, scaler: torch.amp.GradScaler | None) -> None:
    """Clip the gradient's norm, step (through the fp16 scaler when there is one), clear."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    if clip_grad_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
