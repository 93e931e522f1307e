"""The optimiser and the learning-rate schedule that every loop of the book uses."""

from __future__ import annotations

from typing import Any

import torch


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
    groups = [g for g in groups if g["params"]]
    try:  # one fused pass over all parameters instead of a dozen small ops per tensor
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except RuntimeError:  # no fused kernel for this device in this torch (CPU before 2.4)
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


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
        return warm * (self.min_ratio + (1.0 - self.min_ratio) * max(0.0, 1.0 - progress))

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
