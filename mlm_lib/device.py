"""Where the model runs: the device, its precision, and the processes that share a run.

Nothing in the library assumes a GPU: these helpers pick the best device present and turn mixed
precision on only where it helps (bf16 on CUDA GPUs that support it, fp16 with a gradient scaler
on the others, plain fp32 on CPU and MPS). Under ``torchrun`` several processes share one run;
:func:`init_distributed` joins them, and the loop sums its reports over all of them.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
from torch import nn


def pick_device() -> torch.device:
    """cuda if present, then Apple's mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_device(name: str) -> torch.device:
    """``"auto"`` -> :func:`pick_device`; anything else (``"cpu"``, ``"cuda:1"``) as it is."""
    return pick_device() if name == "auto" else torch.device(name)


def autocast_dtype(device: torch.device | str) -> torch.dtype | None:
    """bf16 on CUDA where supported (no loss scaling needed), else fp16 on CUDA; None elsewhere."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@contextlib.contextmanager
def autocast(device: torch.device | str, enabled: bool = True) -> Iterator[None]:
    """Mixed precision for the forward pass on CUDA; a no-op on CPU and MPS (fp32 there)."""
    dtype = autocast_dtype(device)
    if not enabled or dtype is None:
        yield
        return
    with torch.autocast(device_type="cuda", dtype=dtype):
        yield


def make_grad_scaler(device: torch.device | str, enabled: bool = True) -> torch.amp.GradScaler | None:
    """A gradient scaler when autocast runs in fp16 (small gradients would underflow), else None."""
    if enabled and autocast_dtype(device) is torch.float16:
        return torch.amp.GradScaler("cuda")
    return None


@dataclass
class DistInfo:
    """This process's place in a run: one process unless ``torchrun`` started several."""

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
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        # The loop's small reductions (reports, the NaN guard, the clock) are CPU tensors: gloo
        # carries those, nccl the GPUs' gradients.
        cuda = device is not None and device.type == "cuda"
        dist.init_process_group(backend="cpu:gloo,cuda:nccl" if cuda else "gloo")
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def all_reduce_(t: torch.Tensor, info: DistInfo, op: str = "sum") -> torch.Tensor:
    """Sum (or ``op="max"``) ``t`` over all processes, in place (nothing to do for one process)."""
    if info.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return t


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under DDP and ``torch.compile`` wrappers (for saving and evaluation)."""
    while True:
        if hasattr(model, "module"):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model
