"""The pretraining loop: masked LM (+ optional next sentence prediction) on a small corpus.

One step, in the book's terms:

1. take a global batch of ``[CLS] A [SEP] B [SEP]`` examples (the data order is a seeded
   permutation per epoch, so a run can stop and resume exactly where it was);
2. choose the set M and corrupt it (80/10/10) with a seeded ``torch.Generator``;
3. predict only the positions in M (``masked_positions``): the vocabulary projection, the most
   expensive matrix of a small BERT, runs on 15-40% of the tokens instead of all of them;
4. L = -sum_{i in M} log P(x_i | x_\\M), divided by |M| of the *whole* global batch, so that
   gradient accumulation and several processes give the same gradient as one big batch;
5. AdamW (no weight decay on biases and LayerNorm), clipping, linear warm-up then linear decay.

Everything else (metrics, evaluation, checkpoints, NaN guard, DDP, AMP, ``torch.compile``) is a
flag on :class:`TrainConfig`. No framework: read it top to bottom.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from mlm_lib.checkpoint import (Checkpoint, CheckpointError, latest_checkpoint, load_checkpoint,
                                restore_rng, save_checkpoint)


# ---------------------------------------------------------------- configuration

@dataclass
class TrainConfig:
    """Everything a pretraining run needs besides the data. Batch sizes are *global*: one
    optimizer step sees ``batch_size * grad_accum`` examples however many processes share them."""

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
    # masking (training); evaluation always masks eval_rate with [MASK] only
    mask_rate: float = 0.15
    mask_prob: float = 0.8
    random_prob: float = 0.1
    keep_prob: float = 0.1
    eval_rate: float = 0.15
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
    fused_loss: bool = True  # mlm_lib.loss.masked_nll instead of logits + log-softmax (same numbers)
    threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.batch_size > 0, f"batch_size must be positive, got {self.batch_size}"),
            (self.grad_accum > 0, f"grad_accum must be positive, got {self.grad_accum}"),
            (self.max_steps > 0, f"max_steps must be positive, got {self.max_steps}"),
            (self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}"),
            (self.lr > 0, f"lr must be positive, got {self.lr}"),
            (0.0 <= self.min_lr_ratio <= 1.0, f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}"),
            (0.0 < self.mask_rate <= 1.0, f"mask_rate must be in (0, 1], got {self.mask_rate}"),
            (0.0 < self.eval_rate <= 1.0, f"eval_rate must be in (0, 1], got {self.eval_rate}"),
            (self.max_seq_length >= 8, f"max_seq_length must be at least 8, got {self.max_seq_length}"),
            (self.position_init in ("normal", "sinusoidal"),
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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown training option(s): {', '.join(unknown)}")
        return cls(**d)


# ---------------------------------------------------------------- history the chapters plot

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


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint."""


# ---------------------------------------------------------------- optimizer and schedule

def build_optimizer(model: torch.nn.Module, lr: float, weight_decay: float = 0.01,
                    betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-6
                    ) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices only: decaying biases and LayerNorm gains
    pulls them towards 0, which is not a prior anyone wants (BERT excludes them too)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or name.endswith("bias") or "norm" in name.lower():
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas, eps=eps)


class WarmupLinearSchedule:
    """Linear warm-up over ``warmup_steps``, then linear decay to ``min_ratio * lr`` at the end.

    The end is ``total_steps`` or, when a ``time_budget_s`` is given, the clock: the decay
    follows ``max(step / total_steps, elapsed / time_budget_s)``, so a 5-minute run reaches the
    low learning rate exactly when time runs out, whatever this machine's speed."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int,
                 min_ratio: float = 0.0, time_budget_s: float | None = None) -> None:
        self.optimizer = optimizer
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.min_ratio = min_ratio
        self.time_budget_s = time_budget_s
        self.base_lrs = [g.setdefault("initial_lr", g["lr"]) for g in optimizer.param_groups]
        self.step_count = 0
        self.elapsed = 0.0
        self._apply()

    def factor(self) -> float:
        warm = min(1.0, (self.step_count + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        progress = self.step_count / self.total_steps
        if self.time_budget_s:
            progress = max(progress, self.elapsed / self.time_budget_s)
        decay = self.min_ratio + (1.0 - self.min_ratio) * max(0.0, 1.0 - progress)
        return warm * decay

    def _apply(self) -> None:
        f = self.factor()
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = base * f

    def step(self, elapsed: float | None = None) -> None:
        self.step_count += 1
        if elapsed is not None:
            self.elapsed = elapsed
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "elapsed": self.elapsed, "base_lrs": self.base_lrs,
                "warmup_steps": self.warmup_steps, "total_steps": self.total_steps,
                "min_ratio": self.min_ratio, "time_budget_s": self.time_budget_s}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step_count"])
        self.elapsed = float(state.get("elapsed", 0.0))
        self.base_lrs = list(state["base_lrs"])
        self._apply()


# ---------------------------------------------------------------- data: order, batches, masks

def epoch_order(num_examples: int, seed: int, epoch: int) -> list[int]:
    """A permutation that depends only on (seed, epoch): resuming needs no saved RNG for it."""
    order = list(range(num_examples))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


class BatchStream:
    """Global batches of example indices, epoch after epoch; its position is two integers."""

    def __init__(self, num_examples: int, batch_size: int, seed: int) -> None:
        if num_examples < batch_size:
            raise ValueError(f"need at least one batch of examples: {num_examples} examples, "
                             f"batch_size {batch_size}")
        self.n, self.batch_size, self.seed = num_examples, batch_size, seed
        self.epoch, self.cursor = 0, 0
        self._order = epoch_order(self.n, seed, 0)

    def next(self) -> list[int]:
        if self.cursor + self.batch_size > self.n:  # drop the ragged tail, reshuffle
            self.epoch, self.cursor = self.epoch + 1, 0
            self._order = epoch_order(self.n, self.seed, self.epoch)
        idx = self._order[self.cursor:self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return idx

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self._order = epoch_order(self.n, self.seed, self.epoch)


def make_batch(examples: Sequence[Any], tokenizer: Any, rate: float, generator: torch.Generator,
               mask_prob: float = 0.8, random_prob: float = 0.1, keep_prob: float = 0.1
               ) -> dict[str, torch.Tensor]:
    """Collate examples and choose M: input_ids (x_\\M), labels, masked, token_type_ids,
    attention_mask, is_next."""
    from mlm_lib.masking import mask_tokens
    from mlm_lib.pretraining import collate

    batch = collate(list(examples), tokenizer.pad_id)
    mb = mask_tokens(batch["input_ids"], mask_token_id=tokenizer.mask_id,
                     vocab_size=tokenizer.vocab_size, special_ids=tokenizer.special_ids,
                     attention_mask=batch["attention_mask"], rate=rate, mask_prob=mask_prob,
                     random_prob=random_prob, keep_prob=keep_prob, generator=generator)
    return {"input_ids": mb.input_ids, "labels": mb.labels, "masked": mb.masked,
            "token_type_ids": batch["token_type_ids"], "attention_mask": batch["attention_mask"],
            "is_next": batch["is_next"]}


def make_eval_batches(examples: Sequence[Any], tokenizer: Any, batch_size: int = 64,
                      rate: float = 0.15, seed: int = 1234, max_examples: int | None = None
                      ) -> list[dict[str, torch.Tensor]]:
    """Fixed held-out batches: M drawn once with its own seed, every chosen token replaced by
    [MASK] (no 10% kept tokens that a model could copy), so every model and every count baseline
    is scored on exactly the same blanks."""
    g = torch.Generator().manual_seed(seed)
    ex = list(examples)[:max_examples] if max_examples else list(examples)
    return [make_batch(ex[i:i + batch_size], tokenizer, rate, g, 1.0, 0.0, 0.0)
            for i in range(0, len(ex), batch_size)]


# ---------------------------------------------------------------- distributed helpers

@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device | None = None) -> DistInfo:
    """Join the process group that ``torchrun`` describes in the environment (RANK, WORLD_SIZE,
    MASTER_ADDR...); gloo on CPU, nccl on CUDA. Without those variables: one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    import torch.distributed as dist
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if (device is not None and device.type == "cuda") else "gloo"
        dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def _all_reduce_(t: torch.Tensor, dist_info: DistInfo) -> torch.Tensor:
    if dist_info.enabled:
        import torch.distributed as dist
        dist.all_reduce(t)
    return t


# ---------------------------------------------------------------- model helpers

def build_model(cfg: TrainConfig, vocab_size: int) -> torch.nn.Module:
    """A fresh ``BertForPreTraining`` from the preset, sized for the tokenizer and sequence."""
    from mlm_lib.model import BertConfig, BertForPreTraining

    overrides = {"vocab_size": vocab_size, "max_position_embeddings": cfg.max_seq_length,
                 **cfg.model}
    model = BertForPreTraining(BertConfig.preset(cfg.preset, **overrides), seed=cfg.seed)
    if cfg.position_init == "sinusoidal":
        table = model.bert.embeddings.position_embeddings.weight
        with torch.no_grad():
            table.copy_(sinusoidal_positions(*table.shape) * model.config.initializer_range / math.sqrt(0.5))
    if cfg.init_from:
        load_initial_weights(model, cfg.init_from)
    return model


POSITIONS_KEY = "bert.embeddings.position_embeddings.weight"


def load_initial_weights(model: torch.nn.Module, path: str | os.PathLike) -> None:
    """Start ``model`` from a checkpoint's weights (continued pretraining), in place.

    The checkpoint may have a *shorter* position table than the model: its rows fill the first
    positions and the model's own initial rows stay for the rest. That is how BERT was trained:
    90% of the steps on sequences of 128 tokens, which are cheap, then 10% on 512 to learn the
    remaining positions. Any other difference in shape or names is a ValueError that lists it.
    """
    from mlm_lib.checkpoint import load_checkpoint

    ck = load_checkpoint(path, weights_only=True)
    own = model.state_dict()
    sd = {k: v.to(own[k].dtype) if k in own and v.is_floating_point() else v
          for k, v in ck.state_dict.items()}
    if POSITIONS_KEY in sd and POSITIONS_KEY in own:
        old, table = sd[POSITIONS_KEY], own[POSITIONS_KEY].clone()
        if old.shape[0] > table.shape[0] or old.shape[1:] != table.shape[1:]:
            raise ValueError(f"{path}: position table {tuple(old.shape)} does not fit the model's "
                             f"{tuple(table.shape)}")
        table[: old.shape[0]] = old
        sd[POSITIONS_KEY] = table
    wrong = [f"{k} {tuple(v.shape)} (model {tuple(own[k].shape)})" for k, v in sd.items()
             if k in own and v.shape != own[k].shape]
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    if wrong or missing or unexpected:
        raise ValueError(f"{path} does not fit the model: shapes {wrong[:5]}, missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    model.load_state_dict(sd)


def init_unigram_bias(model: torch.nn.Module, examples: Sequence[Any], tokenizer: Any) -> None:
    """Set the MLM output bias to log P(token) counted on the training examples (add-one smoothed).

    A fresh BERT spends its first steps learning the unigram distribution, which is a constant:
    it can be written down. Starting there, the gradient goes to the context from step one."""
    net = unwrap(model)
    counts = torch.ones(net.config.vocab_size, dtype=torch.float64)
    ids = torch.tensor([t for e in examples for t in e.input_ids], dtype=torch.long)
    counts += torch.bincount(ids, minlength=net.config.vocab_size)[: net.config.vocab_size].double()
    counts[list(tokenizer.special_ids)] = 1.0
    logp = (counts / counts.sum()).log()
    with torch.no_grad():
        net.cls.predictions_bias.copy_((logp - logp.mean()).float())


def sinusoidal_positions(num_positions: int, dim: int) -> torch.Tensor:
    """The Transformer's sin/cos position table: the dot product of two rows depends only on
    their offset, so "look at my left neighbour" is one linear map away from the start. BERT
    learns its table from random; starting here (scaled to the token embeddings' size, and still
    learned) saves a short run the steps it would spend discovering word order."""
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : dim // 2]
    return table.float()


def model_config_dict(model: torch.nn.Module) -> dict[str, Any]:
    model = unwrap(model)
    return model.config.to_dict()


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module under DDP and ``torch.compile`` wrappers (for saving and evaluation)."""
    while True:
        if hasattr(model, "module"):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        from mlm_lib.device import pick_device
        return pick_device()
    return torch.device(name)


def _autocast(device: torch.device, enabled: bool):
    if not enabled or device.type == "cpu":
        return contextlib.nullcontext()
    from mlm_lib.device import autocast
    return autocast(device, enabled=True)


def _grad_scaler(device: torch.device, enabled: bool):
    if not enabled or device.type == "cpu":
        return None
    from mlm_lib.device import make_grad_scaler
    return make_grad_scaler(device)


# ---------------------------------------------------------------- evaluation

def nsp_class(is_next: torch.Tensor) -> torch.Tensor:
    """NSP logits put IsNext in column 0 (Google's order), so the class index is 1 - is_next."""
    return 1 - is_next.long()


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Sequence[dict[str, torch.Tensor]],
             device: torch.device | str = "cpu", baselines: Any | None = None,
             amp: bool = False) -> dict[str, float]:
    """Held-out masked-token loss and accuracy (and NSP), plus count baselines when given, all
    on the same positions. Accuracy = argmax prediction equals the original token."""
    from mlm_lib.loss import nsp_loss as nsp_loss_fn

    device = torch.device(device)
    net = unwrap(model)
    was_training = net.training
    net.eval()
    loss_sum, correct, n = 0.0, 0, 0
    nsp_loss, nsp_correct, nsp_n = 0.0, 0, 0
    base = {}
    for b in batches:
        masked = b["masked"]
        with _autocast(device, amp):
            out = net(b["input_ids"].to(device), token_type_ids=b["token_type_ids"].to(device),
                      attention_mask=b["attention_mask"].to(device),
                      masked_positions=masked.to(device))
        logits = out.mlm_logits.float()
        target = b["labels"][masked].to(device)
        if target.numel():
            loss_sum += F.cross_entropy(logits, target, reduction="sum").item()
            correct += int((logits.argmax(-1) == target).sum())
            n += target.numel()
        nl = out.nsp_logits.float()
        is_next = b["is_next"].to(device)
        nsp_loss += nsp_loss_fn(nl, is_next).item() * is_next.numel()
        nsp_correct += int((nl.argmax(-1) == nsp_class(is_next)).sum())
        nsp_n += is_next.numel()
        if baselines is not None:
            for k, (c, t) in baselines.accuracy(b["input_ids"], masked, b["labels"],
                                                b["attention_mask"]).items():
                bc, bt = base.get(k, (0, 0))
                base[k] = (bc + c, bt + t)
    if was_training:
        net.train()
    result = {"mlm_loss": loss_sum / max(n, 1), "mlm_acc": correct / max(n, 1),
              "nsp_loss": nsp_loss / max(nsp_n, 1), "nsp_acc": nsp_correct / max(nsp_n, 1),
              "num_masked": n}
    for k, (c, t) in base.items():
        result[f"{k}_acc"] = c / max(t, 1)
    return result


# ---------------------------------------------------------------- the loop

@dataclass
class TrainResult:
    model: torch.nn.Module
    history: History
    step: int
    eval: dict[str, float] | None
    checkpoint: Path | None
    elapsed: float = 0.0  # training seconds (evaluation and saving not counted)


def _prune(out_dir: Path, keep_last: int) -> None:
    found = sorted(p for p in out_dir.glob("step-*") if p.is_dir() and ".tmp-" not in p.name)
    for p in found[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(p, ignore_errors=True)


def train(model: torch.nn.Module, tokenizer: Any, train_examples: Sequence[Any],
          cfg: TrainConfig, valid_examples: Sequence[Any] | None = None,
          out_dir: str | os.PathLike | None = None, resume: bool | str | os.PathLike = False,
          baselines: Any | None = None, dist_info: DistInfo | None = None,
          on_log: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Pretrain ``model`` (a ``BertForPreTraining``) on ``train_examples``.

    ``out_dir``: where ``step-XXXXXXXX`` checkpoints go (rank 0 only). ``resume``: True to
    continue from the newest checkpoint in ``out_dir`` (if any), or a checkpoint path.
    Under ``torchrun`` pass ``dist_info=init_distributed(device)``; each rank computes its own
    rows of every global batch and DDP averages the gradients.
    """
    from mlm_lib.loss import mlm_loss_sum, nsp_loss

    dist_info = dist_info or DistInfo()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    if device.type == "cuda" and dist_info.enabled:
        device = torch.device("cuda", dist_info.local_rank)
        torch.cuda.set_device(device)
    micro = cfg.batch_size // cfg.grad_accum
    if micro * cfg.grad_accum != cfg.batch_size:
        raise ValueError(f"batch_size {cfg.batch_size} is not divisible by grad_accum {cfg.grad_accum}")
    if micro % dist_info.world_size:
        raise ValueError(f"micro-batch {micro} is not divisible by the {dist_info.world_size} processes")
    per_rank = micro // dist_info.world_size
    out_path = Path(out_dir) if out_dir is not None else None

    net = unwrap(model).to(device)
    optimizer = build_optimizer(net, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2), cfg.eps)
    schedule = WarmupLinearSchedule(optimizer, cfg.warmup_steps, cfg.max_steps, cfg.min_lr_ratio,
                                    cfg.time_budget_s)
    stream = BatchStream(len(train_examples), cfg.batch_size, cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    torch.manual_seed(cfg.seed + 2)  # dropout
    history = History()
    step, elapsed = 0, 0.0

    # ---- resume
    ckpt_path: Path | None = None
    if resume:
        ckpt_path = Path(resume) if not isinstance(resume, bool) else (
            latest_checkpoint(out_path) if out_path is not None else None)
    if cfg.unigram_bias_init and ckpt_path is None:
        init_unigram_bias(net, train_examples, tokenizer)
    if ckpt_path is not None:
        ck = load_checkpoint(ckpt_path)
        net.load_state_dict(ck.state_dict)
        if ck.optimizer is None:
            raise CheckpointError(f"{ckpt_path} has no optimizer state: it cannot be resumed")
        optimizer.load_state_dict(ck.optimizer)
        if ck.scheduler:
            schedule.load_state_dict(ck.scheduler)
        stream.load_state_dict(ck.extra["data"])
        restore_rng(ck, gen)
        history = History(ck.extra.get("history", []))
        step, elapsed = ck.step, float(ck.extra.get("elapsed", 0.0))

    train_net: torch.nn.Module = net
    if cfg.compile:
        train_net = torch.compile(train_net, dynamic=True)
    if dist_info.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP
        train_net = DDP(train_net, device_ids=[device.index] if device.type == "cuda" else None,
                        find_unused_parameters=not cfg.nsp)
    scaler = _grad_scaler(device, cfg.amp)
    eval_batches = (make_eval_batches(valid_examples, tokenizer, 64, cfg.eval_rate,
                                      max_examples=cfg.eval_examples)
                    if valid_examples else None)
    last_good: Path | None = ckpt_path

    def save(at_step: int) -> Path | None:
        if out_path is None or not dist_info.is_main:
            return None
        path = save_checkpoint(
            out_path / f"step-{at_step:08d}", net, model_config_dict(net), at_step,
            optimizer=optimizer, scheduler=schedule, generator=gen,
            extra={"data": stream.state_dict(), "history": history.records, "elapsed": elapsed,
                   "train_config": cfg.to_dict()})
        _prune(out_path, cfg.keep_last)
        return path

    def run_eval(at_step: int) -> dict[str, float] | None:
        if not eval_batches:
            return None
        res = evaluate(net, eval_batches, device, baselines, cfg.amp)
        history.append("eval", step=at_step, **res)
        if on_log and dist_info.is_main:
            on_log(history.records[-1])
        return res

    from tqdm.auto import tqdm
    end_step = min(cfg.max_steps, cfg.stop_at_step or cfg.max_steps)
    bar = tqdm(total=end_step, initial=step, disable=not (cfg.progress and dist_info.is_main),
               desc="pretraining", dynamic_ncols=True)
    net.train()
    acc = {"loss": 0.0, "correct": 0, "masked": 0, "nsp_loss": 0.0, "nsp_correct": 0, "nsp_n": 0,
           "tokens": 0, "steps": 0}
    t_log = time.perf_counter()
    final_eval = None
    while step < end_step:
        if cfg.time_budget_s is not None and elapsed >= cfg.time_budget_s:
            break
        t0 = time.perf_counter()
        # every rank builds (and masks) the whole global batch with the same generator, then keeps
        # its own rows: the masks, and so the result, do not depend on the number of processes.
        idx = stream.next()
        full = make_batch([train_examples[i] for i in idx], tokenizer, cfg.mask_rate, gen,
                          cfg.mask_prob, cfg.random_prob, cfg.keep_prob)
        total_masked = int(full["masked"].sum())
        # DDP averages gradients over ranks, so each rank's sum is scaled by world / global count
        mlm_norm = dist_info.world_size / max(total_masked, 1)
        nsp_norm = dist_info.world_size / cfg.batch_size
        step_loss = torch.zeros((), device=device)
        for m in range(cfg.grad_accum):
            lo = m * micro + dist_info.rank * per_rank
            rows = {k: v[lo:lo + per_rank] for k, v in full.items()}
            width = max(int(rows["attention_mask"].sum(1).max()), 1)  # drop all-padding columns
            b = {k: (v[:, :width] if v.dim() == 2 else v).to(device, non_blocking=True)
                 for k, v in rows.items()}
            sync = (m == cfg.grad_accum - 1) or not dist_info.enabled
            ctx = contextlib.nullcontext() if sync else train_net.no_sync()
            target = b["labels"][b["masked"]]
            with ctx:
                with _autocast(device, cfg.amp):
                    # fast paths: the last layer computes only the rows of M and [CLS], and the
                    # loss comes from the fused masked_nll (same numbers, no [|M|, V] logits kept)
                    out = train_net(b["input_ids"], token_type_ids=b["token_type_ids"],
                                    attention_mask=b["attention_mask"],
                                    masked_positions=b["masked"], last_layer_rows_only=True,
                                    mlm_targets=target if cfg.fused_loss else None)
                if cfg.fused_loss:
                    mlm_sum, predictions = out.mlm_nll.sum(), out.mlm_predictions
                else:
                    logits = out.mlm_logits.float()
                    mlm_sum, predictions = mlm_loss_sum(logits, target), logits.argmax(-1)
                loss = mlm_sum * mlm_norm
                if cfg.nsp:
                    nsp_sum = nsp_loss(out.nsp_logits, b["is_next"]) * b["is_next"].numel()
                    loss = loss + nsp_sum * nsp_norm
                if scaler is not None:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
            step_loss += loss.detach()
            with torch.no_grad():
                acc["loss"] += float(mlm_sum)
                acc["correct"] += int((predictions == target).sum())
                acc["masked"] += target.numel()
                acc["tokens"] += int(b["attention_mask"].sum())
                if cfg.nsp:
                    acc["nsp_loss"] += float(nsp_sum)
                    acc["nsp_correct"] += int((out.nsp_logits.argmax(-1) == nsp_class(b["is_next"])).sum())
                    acc["nsp_n"] += b["is_next"].numel()
        # ---- NaN guard: every rank agrees before anyone steps
        bad = torch.tensor([0.0 if torch.isfinite(step_loss) else 1.0])
        if float(_all_reduce_(bad, dist_info)) > 0:
            optimizer.zero_grad(set_to_none=True)
            bar.close()
            where = f"the last good checkpoint is {last_good}" if last_good else "no checkpoint was saved"
            raise TrainingDiverged(f"loss became {float(step_loss)} at step {step + 1}; "
                                   f"stopping ({where})")
        if scaler is not None:
            scaler.unscale_(optimizer)
        if cfg.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.clip_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        elapsed += time.perf_counter() - t0
        schedule.step(elapsed)
        acc["steps"] += 1
        bar.update(1)

        if step % cfg.log_every == 0 or step == end_step:
            for k in ("loss", "correct", "masked", "nsp_loss", "nsp_correct", "nsp_n", "tokens"):
                t = _all_reduce_(torch.tensor([float(acc[k])], dtype=torch.float64), dist_info)
                acc[k] = float(t)
            now = time.perf_counter()
            rec = {"step": step, "lr": schedule.get_last_lr()[0],
                   "mlm_loss": acc["loss"] / max(acc["masked"], 1),
                   "mlm_acc": acc["correct"] / max(acc["masked"], 1),
                   "tokens_per_s": acc["tokens"] / max(now - t_log, 1e-9), "elapsed": elapsed}
            if cfg.nsp:
                rec["nsp_loss"] = acc["nsp_loss"] / max(acc["nsp_n"], 1)
                rec["nsp_acc"] = acc["nsp_correct"] / max(acc["nsp_n"], 1)
            history.append("train", **rec)
            bar.set_postfix(loss=f"{rec['mlm_loss']:.3f}", acc=f"{rec['mlm_acc']:.3f}",
                            lr=f"{rec['lr']:.2e}")
            if on_log and dist_info.is_main:
                on_log(history.records[-1])
            acc = dict.fromkeys(acc, 0)
            acc["loss"] = acc["nsp_loss"] = 0.0
            t_log = time.perf_counter()
        if cfg.eval_every and step % cfg.eval_every == 0 and step < end_step:
            final_eval = run_eval(step)
            t_log = time.perf_counter()
        if cfg.save_every and step % cfg.save_every == 0 and step < end_step:
            last_good = save(step) or last_good
    bar.close()
    final_eval = run_eval(step) if eval_batches else final_eval
    saved = save(step)
    return TrainResult(model=net, history=history, step=step, eval=final_eval,
                       checkpoint=saved or last_good, elapsed=elapsed)


# ---------------------------------------------------------------- from a corpus, in one call

@dataclass
class PreparedData:
    tokenizer: Any
    train_examples: list[Any]
    valid_examples: list[Any]
    train_documents: list[Any]


def prepare_data(cfg: TrainConfig, corpus: str | Sequence[str] = "wikipedia",
                 tokenizer: Any | None = None, valid_fraction: float = 0.05) -> PreparedData:
    """Documents -> train/valid split -> tokenizer (the book's, unless given) -> examples."""
    from mlm_lib.corpus import load_corpus, train_valid_split
    from mlm_lib.pretraining import create_pretraining_examples

    docs = load_corpus(corpus)
    train_docs, valid_docs = train_valid_split(docs, valid_fraction=valid_fraction, seed=0)
    if tokenizer is None:
        from mlm_lib.tokenizer import book_tokenizer
        tokenizer = book_tokenizer()
    kw = dict(max_seq_length=cfg.max_seq_length, short_seq_prob=cfg.short_seq_prob, nsp=cfg.nsp)
    train_ex = create_pretraining_examples(train_docs, tokenizer, seed=cfg.seed, **kw)
    valid_ex = create_pretraining_examples(valid_docs, tokenizer, seed=cfg.seed + 7, **kw)
    return PreparedData(tokenizer, list(train_ex), list(valid_ex), list(train_docs))


def fit_baselines(data: PreparedData) -> Any:
    """Count baselines on the training split's examples (the same pieces the BERT sees)."""
    from mlm_lib.baselines import CountBaselines

    tok = data.tokenizer
    return CountBaselines.fit((e.input_ids for e in data.train_examples), tok.vocab_size,
                              tok.special_ids)


def default_log(rec: dict[str, Any]) -> None:
    """One line per record, through tqdm so that progress bars stay intact."""
    from tqdm.auto import tqdm
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in rec.items()]
    tqdm.write(" ".join(parts))
