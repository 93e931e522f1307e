"""Where the model runs and in which precision.

Nothing in the library assumes a GPU: these helpers pick the best device present and turn mixed
precision on only where it helps (bf16 on CUDA GPUs that support it, fp16 with a gradient scaler
on the others, plain fp32 on CPU and MPS).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn


def pick_device() -> torch.device:
    """cuda if present, then Apple's mps, then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


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


def make_grad_scaler(device: torch.device | str) -> "torch.amp.GradScaler | None":
    """A gradient scaler when autocast runs in fp16 (small gradients would underflow), else None."""
    if autocast_dtype(device) is torch.float16:
        return torch.amp.GradScaler("cuda")
    return None


def maybe_compile(model: nn.Module, enabled: bool = False) -> nn.Module:
    """``torch.compile(model)`` when asked for; the model itself otherwise.

    Off by default: compiling takes minutes on a small CPU and pays off only on long GPU runs.
    """
    return torch.compile(model) if enabled else model
