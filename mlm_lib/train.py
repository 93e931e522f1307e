"""Pretraining: masked LM (+ optional next sentence prediction) on a corpus, in the book's terms.

One step:

1. take a global batch of ``[CLS] A [SEP] B [SEP]`` examples (the data order is a seeded
   permutation per epoch, so a run can stop and resume exactly where it was);
2. choose the set M and corrupt it (80/10/10) with a seeded ``torch.Generator``;
3. L = -sum_{i in M} log P(x_i | x_\\M), divided by |M| of the *whole* global batch, so that
   gradient accumulation and several processes give the same gradient as one big batch;
4. AdamW (no weight decay on biases and LayerNorm), clipping, linear warm-up then linear decay.

The loop itself is :func:`mlm_lib.loop.train_loop`; this module gives it the pretraining
objective and batches, and adds checkpoints, evaluation, DDP and mixed precision around it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from mlm_lib.baselines import CountBaselines
from mlm_lib.batches import BatchStream, make_batch, masked_batches
from mlm_lib.checkpoint import (CheckpointError, latest_checkpoint, load_checkpoint, restore_rng,
                                save_checkpoint, step_folder, step_folders)
from mlm_lib.config import BertConfig
from mlm_lib.device import DistInfo, autocast, make_grad_scaler, resolve_device, unwrap
from mlm_lib.init import POSITION_INITS, init_unigram_bias
from mlm_lib.loop import (Batch, History, LoopState, Objective, Sums, TrainingDiverged, evaluate,
                          train_loop)
from mlm_lib.loss import nsp_class, nsp_loss
from mlm_lib.masking import BERT_CORRUPTION, EVAL_CORRUPTION, Corruption
from mlm_lib.model import BertForPreTraining
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer
from mlm_lib.pretraining import PretrainingExample

# Offsets from TrainConfig.seed, one per source of randomness, so that they never share a stream.
MASKING_SEED_OFFSET = 1  # the generator that chooses and corrupts M
DROPOUT_SEED_OFFSET = 2  # torch's global RNG, which dropout draws from
PROGRESS_DESC = "pretraining"
# A time-budgeted run's bar counts training seconds (evaluation and saving not counted), e.g.
# "pretraining:  45%|████▌     | 270/600 s [04:41<05:43, step=812]".
TIME_BAR_FORMAT = ("{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s "
                   "[{elapsed}<{remaining}{postfix}]")


@dataclass
class TrainConfig:
    """Everything a pretraining run needs besides the data. Batch sizes are *global*: one
    optimizer step sees ``batch_size`` examples, in ``grad_accum`` micro-batches, however many
    processes share them."""

    # model: a BertConfig preset plus overrides (e.g. {"num_hidden_layers": 2})
    preset: str = "mini"
    model: dict[str, Any] = field(default_factory=dict)
    position_init: str = "normal"  # or "sinusoidal": relative offsets are visible from step 0
    unigram_bias_init: bool = False  # start the MLM output bias at log P(token) of the train split
    init_from: str | None = None  # start from this checkpoint's weights (continued pretraining)
    # data
    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    nsp: bool = True
    # M and its corruption in training; evaluation shows every token of M as [MASK]
    corruption: Corruption = BERT_CORRUPTION
    eval_corruption: Corruption = EVAL_CORRUPTION
    # optimisation
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr_ratio: float = 0.0
    warmup_steps: int = 100
    max_steps: int = 1000
    time_budget_s: float | None = None  # decay and stop by the clock instead of max_steps
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-6
    clip_grad_norm: float | None = 1.0
    # bookkeeping
    log_every: int = 50
    eval_every: int = 0  # 0: evaluate only at the end
    eval_examples: int = 2000
    save_every: int = 0  # 0: save only at the end (when out_dir is given)
    keep_last: int = 2
    stop_at_step: int | None = None  # stop early with the schedule of max_steps (resume tests)
    seed: int = 0
    # speed
    device: str = "auto"
    amp: bool = True
    compile: bool = False
    fused_loss: bool = True  # loss.masked_nll instead of logits + log-softmax (same numbers)
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("corruption", "eval_corruption"):
            if isinstance(getattr(self, name), dict):
                setattr(self, name, Corruption(**getattr(self, name)))
        checks = [
            (self.batch_size > 0, f"batch_size must be positive, got {self.batch_size}"),
            (self.grad_accum > 0, f"grad_accum must be positive, got {self.grad_accum}"),
            (self.max_steps > 0, f"max_steps must be positive, got {self.max_steps}"),
            (self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}"),
            (self.lr > 0, f"lr must be positive, got {self.lr}"),
            (0.0 <= self.min_lr_ratio <= 1.0, f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}"),
            (self.max_seq_length >= 8, f"max_seq_length must be at least 8, got {self.max_seq_length}"),
            (self.position_init in POSITION_INITS,
             f"position_init must be 'normal' or 'sinusoidal', got {self.position_init!r}"),
            (self.log_every > 0, f"log_every must be positive, got {self.log_every}"),
            (self.time_budget_s is None or self.time_budget_s > 0,
             f"time_budget_s must be positive, got {self.time_budget_s}"),
            (self.batch_size % self.grad_accum == 0,
             f"batch_size {self.batch_size} is not divisible by grad_accum {self.grad_accum}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def data_options(self) -> dict[str, Any]:
        """The arguments of :func:`~mlm_lib.pretraining.prepare_data` that cut the corpus into
        this run's examples: sequence length, share of short sequences, NSP pairs, seed."""
        return {"max_seq_length": self.max_seq_length, "short_seq_prob": self.short_seq_prob,
                "nsp": self.nsp, "seed": self.seed}

    def model_options(self, vocab_size: int) -> dict[str, Any]:
        """The arguments of :func:`~mlm_lib.init.build_model` for this run: the preset's
        ``BertConfig`` (plus ``model`` overrides) sized for the tokenizer and the sequence
        length, the seed, and how the model starts."""
        config = BertConfig.preset(self.preset, **{"vocab_size": vocab_size,
                                                   "max_position_embeddings": self.max_seq_length,
                                                   **self.model})
        return {"config": config, "seed": self.seed, "position_init": self.position_init,
                "init_from": self.init_from}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown training option(s): {', '.join(unknown)}")
        return cls(**d)


@dataclass
class TrainResult:
    model: torch.nn.Module
    history: History
    step: int
    eval: dict[str, float] | None
    checkpoint: Path | None
    elapsed: float = 0.0  # training seconds (evaluation and saving not counted)


# ---------------------------------------------------------------- the objective

def pretraining_objective(nsp: bool, fused_loss: bool = True) -> Objective:
    """The loss of one micro-batch (MLM, plus NSP when ``nsp``) and its reports.

    A batch carries ``mlm_norm`` and ``nsp_norm``: 1 / |M| and 1 / B of the whole global batch
    (times the number of processes, since DDP averages their gradients). The model takes its
    training path (``targets``); ``fused_loss`` picks how it computes the loss."""
    def objective(model: torch.nn.Module, b: Batch) -> tuple[torch.Tensor, Sums]:
        targets = b["labels"][b["masked"]]
        out = model(b["input_ids"], b["token_type_ids"], b["attention_mask"],
                    masked_positions=b["masked"], targets=targets, fused_loss=fused_loss)
        mlm_sum, n = out.mlm_nll.sum(), targets.numel()
        loss = mlm_sum * b.get("mlm_norm", 1.0 / max(n, 1))  # 1 / |M| of the global batch
        sums: Sums = {"mlm_loss": (mlm_sum, n), "mlm_acc": ((out.mlm_predictions == targets).sum(), n),
                      "num_masked": (n, None), "tokens": (b["attention_mask"].sum(), None)}
        if nsp:
            B = b["is_next"].numel()
            nsp_sum = nsp_loss(out.nsp_logits, b["is_next"]) * B
            loss = loss + nsp_sum * b.get("nsp_norm", 1.0 / B)
            sums["nsp_loss"] = (nsp_sum, B)
            sums["nsp_acc"] = ((out.nsp_logits.argmax(-1) == nsp_class(b["is_next"])).sum(), B)
        return loss, sums
    return objective


def evaluate_mlm(model: BertForPreTraining, batches: Sequence[Batch], nsp: bool = True,
                 baselines: CountBaselines | None = None, amp: bool = False) -> dict[str, float]:
    """Held-out masked-token loss and accuracy (and NSP), plus the count baselines' accuracy on
    the same blanks when given. Accuracy: the arg-max prediction is the original token. The loss
    is computed the plain way (logits, log-softmax), under mixed precision when ``amp``."""
    net = unwrap(model)
    device = next(net.parameters()).device
    on_device = [{k: v.to(device) for k, v in b.items()} for b in batches]
    objective = pretraining_objective(nsp, fused_loss=False)
    result = evaluate(net, _autocast_objective(objective, device, amp), on_device)
    result.pop("tokens", None)
    if baselines is not None:
        result.update(_baseline_accuracy(baselines, batches))
    return result


def _baseline_accuracy(baselines: CountBaselines, batches: Sequence[Batch]) -> dict[str, float]:
    """Each count baseline's share of the blanks of ``batches`` it fills correctly."""
    totals: dict[str, tuple[int, int]] = {}
    for b in batches:
        for name, (c, t) in baselines.accuracy(b["input_ids"], b["masked"], b["labels"],
                                               b["attention_mask"]).items():
            correct, total = totals.get(name, (0, 0))
            totals[name] = (correct + c, total + t)
    return {f"{name}_acc": c / max(t, 1) for name, (c, t) in totals.items()}


# ---------------------------------------------------------------- batches of a global step

def _step_batches(cfg: TrainConfig, examples: Sequence[PretrainingExample], tokenizer: Any,
                 stream: BatchStream, generator: torch.Generator, dist: DistInfo,
                 device: torch.device) -> Iterator[list[Batch]]:
    """Each step's micro-batches for this process. Every process builds (and masks) the whole
    global batch with the same generator, then keeps its own rows: the masks, and so the result,
    do not depend on the number of processes."""
    micro = cfg.batch_size // cfg.grad_accum
    if micro % dist.world_size:
        raise ValueError(f"micro-batch {micro} is not divisible by the {dist.world_size} processes")
    per_rank = micro // dist.world_size
    while True:
        full = make_batch([examples[i] for i in stream.next()], tokenizer, cfg.corruption, generator)
        norms = {"mlm_norm": dist.world_size / max(int(full["masked"].sum()), 1),
                 "nsp_norm": dist.world_size / cfg.batch_size}
        parts = []
        for m in range(cfg.grad_accum):
            lo = m * micro + dist.rank * per_rank
            rows = {k: v[lo:lo + per_rank] for k, v in full.items()}
            width = max(int(rows["attention_mask"].sum(1).max()), 1)  # drop all-padding columns
            part = {k: (v[:, :width] if v.dim() == 2 else v).to(device, non_blocking=True)
                    for k, v in rows.items()}
            parts.append({**part, **norms})
        yield parts


# ---------------------------------------------------------------- the run

class _PretrainingRun:
    """The state of one run: model, optimiser, schedule, data position, RNG, history. It knows
    how to resume from a checkpoint, save one, and evaluate; :func:`train` drives it."""

    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, num_examples: int,
                 out_dir: Path | None, dist: DistInfo, eval_batches: list[Batch] | None = None,
                 baselines: CountBaselines | None = None,
                 on_log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg, self.out_dir, self.dist = cfg, out_dir, dist
        self.eval_batches, self.baselines, self.on_log = eval_batches, baselines, on_log
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and dist.enabled:
            self.device = torch.device("cuda", dist.local_rank)
            torch.cuda.set_device(self.device)
        self.net = unwrap(model).to(self.device)
        self.optimizer = build_optimizer(self.net, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2),
                                         cfg.eps)
        self.schedule = WarmupLinearSchedule(self.optimizer, cfg.warmup_steps, cfg.max_steps,
                                             cfg.min_lr_ratio, cfg.time_budget_s)
        self.stream = BatchStream(num_examples, cfg.batch_size, cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed + MASKING_SEED_OFFSET)
        torch.manual_seed(cfg.seed + DROPOUT_SEED_OFFSET)
        self.scaler = make_grad_scaler(self.device, cfg.amp)
        self.state = LoopState()
        self.last_good: Path | None = None
        self.last_eval: dict[str, float] | None = None

    def resume(self, path: Path) -> None:
        ck = load_checkpoint(path)
        self.net.load_state_dict(ck.state_dict)
        if ck.optimizer is None:
            raise CheckpointError(f"{path} has no optimizer state: it cannot be resumed")
        self.optimizer.load_state_dict(ck.optimizer)
        if ck.scheduler:
            self.schedule.load_state_dict(ck.scheduler)
        self.stream.load_state_dict(ck.extra["data"])
        restore_rng(ck, self.generator)
        if self.scaler is not None and "grad_scaler" in ck.extra:
            self.scaler.load_state_dict(ck.extra["grad_scaler"])
        self.state = LoopState(ck.step, float(ck.extra.get("elapsed", 0.0)),
                               History(ck.extra.get("history", [])))
        self.last_good = path

    def save(self) -> Path | None:
        if self.out_dir is None or not self.dist.is_main:
            return None
        path = save_checkpoint(
            step_folder(self.out_dir, self.state.step), self.net, self.net.config.to_dict(),
            self.state.step, optimizer=self.optimizer, scheduler=self.schedule,
            generator=self.generator,
            extra={"data": self.stream.state_dict(), "history": self.state.history.records,
                   "elapsed": self.state.elapsed, "train_config": self.cfg.to_dict(),
                   **({"grad_scaler": self.scaler.state_dict()} if self.scaler else {})})
        _prune_checkpoints(self.out_dir, self.cfg.keep_last)
        self.last_good = path
        return path

    def run_eval(self) -> None:
        if self.eval_batches:
            # NSP is scored even when it is not trained: chapter 11 shows an untrained head at chance
            self.last_eval = evaluate_mlm(self.net, self.eval_batches, nsp=True,
                                          baselines=self.baselines, amp=self.cfg.amp)
            self.state.history.append("eval", step=self.state.step, **self.last_eval)
            if self.on_log and self.dist.is_main:
                self.on_log(self.state.history.records[-1])

    def callback(self, end_step: int) -> Callable[[LoopState], None]:
        """Evaluate and save every ``eval_every`` / ``save_every`` steps (the end is handled apart)."""
        def after_step(state: LoopState) -> None:
            if state.step < end_step and self.cfg.eval_every and state.step % self.cfg.eval_every == 0:
                self.run_eval()
            if state.step < end_step and self.cfg.save_every and state.step % self.cfg.save_every == 0:
                state.check_finite()  # never save a diverged model (a GPU loop reads at log steps)
                self.save()
        return after_step


def _prune_checkpoints(out_dir: Path, keep_last: int) -> None:
    """Delete all but the newest ``keep_last`` step folders (0 keeps them all)."""
    found = step_folders(out_dir)
    for p in found[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(p, ignore_errors=True)


def train(model: torch.nn.Module, tokenizer: Any, train_examples: Sequence[PretrainingExample],
          cfg: TrainConfig, valid_examples: Sequence[PretrainingExample] | None = None,
          out_dir: str | os.PathLike | None = None, resume: bool | str | os.PathLike = False,
          baselines: CountBaselines | None = None, dist_info: DistInfo | None = None,
          on_log: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Pretrain ``model`` (a ``BertForPreTraining``) on ``train_examples``.

    ``out_dir``: where ``step-XXXXXXXX`` checkpoints go (rank 0 only). ``resume``: True to
    continue from the newest checkpoint in ``out_dir`` (if any), or a checkpoint path.
    Under ``torchrun`` pass ``dist_info=init_distributed(device)``; each rank computes its own
    rows of every global batch and DDP averages the gradients.
    """
    dist = dist_info or DistInfo()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out_path = Path(out_dir) if out_dir is not None else None
    eval_batches = masked_batches(valid_examples, tokenizer, cfg.eval_corruption,
                                  max_examples=cfg.eval_examples) if valid_examples else None
    run = _PretrainingRun(model, cfg, len(train_examples), out_path, dist, eval_batches, baselines,
                         on_log)
    path = _resume_path(resume, out_path)
    if path is not None:
        run.resume(path)
    elif cfg.unigram_bias_init:
        init_unigram_bias(run.net, train_examples, tokenizer.special_ids)
    step_model = _step_model(run.net, cfg, dist, run.device)
    end_step = min(cfg.max_steps, cfg.stop_at_step or cfg.max_steps)
    objective = pretraining_objective(cfg.nsp, cfg.fused_loss)
    show = cfg.progress and dist.is_main
    # a run budgeted in seconds shows them instead of the loop's bar over steps
    time_bar = (_TimeBar(cfg.time_budget_s, run.state, PROGRESS_DESC)
                if show and cfg.time_budget_s else None)
    try:
        train_loop(step_model, _autocast_objective(objective, run.device, cfg.amp),
                   _step_batches(cfg, train_examples, tokenizer, run.stream, run.generator, dist,
                                run.device),
                   run.optimizer, run.schedule, end_step, state=run.state,
                   clip_grad_norm=cfg.clip_grad_norm, log_every=cfg.log_every,
                   time_budget_s=cfg.time_budget_s,
                   callbacks=[run.callback(end_step), *([time_bar] if time_bar else [])],
                   on_log=on_log, scaler=run.scaler, dist=dist,
                   progress=show and time_bar is None, desc=PROGRESS_DESC)
    except TrainingDiverged as err:
        where = f"the last good checkpoint is {run.last_good}" if run.last_good else "no checkpoint was saved"
        raise TrainingDiverged(f"{err}; stopping ({where})") from None
    finally:
        if time_bar is not None:
            time_bar.close()
    run.run_eval()
    saved = run.save()
    return TrainResult(model=run.net, history=run.state.history, step=run.state.step,
                       eval=run.last_eval, checkpoint=saved or run.last_good,
                       elapsed=run.state.elapsed)


class _TimeBar:
    """The progress bar of a run that stops by the clock: seconds of training out of the budget,
    with the step reached beside them. Its step total would be a placeholder (a budgeted run's
    ``max_steps`` may be 10**9), so a bar over steps would show 0% and an ETA of years."""

    def __init__(self, budget_s: float, state: LoopState, desc: str) -> None:
        self.budget_s = budget_s
        self.bar = tqdm(total=budget_s, initial=min(state.elapsed, budget_s), desc=desc,
                        bar_format=TIME_BAR_FORMAT, dynamic_ncols=True)

    def __call__(self, state: LoopState) -> None:
        """A loop callback: move to the training seconds spent so far (tqdm throttles redraws)."""
        self.bar.set_postfix(step=state.step, refresh=False)
        self.bar.update(min(state.elapsed, self.budget_s) - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _step_model(net: torch.nn.Module, cfg: TrainConfig, dist: DistInfo,
                device: torch.device) -> torch.nn.Module:
    """The module the loop steps: ``net``, compiled when asked, wrapped in DDP under torchrun."""
    step_model = net
    if cfg.compile:
        step_model = torch.compile(step_model, dynamic=True)
    if dist.enabled:
        step_model = DistributedDataParallel(
            step_model, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=not cfg.nsp)
    return step_model


def _resume_path(resume: bool | str | os.PathLike, out_dir: Path | None) -> Path | None:
    """The checkpoint to resume from: a given path, or with ``True`` the newest in ``out_dir``."""
    if not resume:
        return None
    if not isinstance(resume, bool):
        return Path(resume)
    return latest_checkpoint(out_dir) if out_dir is not None else None


def _autocast_objective(objective: Objective, device: torch.device, enabled: bool) -> Objective:
    """The objective with its forward under mixed precision (a no-op on CPU and MPS)."""
    def wrapped(model: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, Sums]:
        with autocast(device, enabled):
            return objective(model, batch)
    return wrapped


def default_log(rec: dict[str, Any]) -> None:
    """One line per record, through tqdm so that progress bars stay intact."""
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()]
    tqdm.write(" ".join(parts))
