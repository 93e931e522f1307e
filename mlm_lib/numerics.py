"""One tolerance for "these two computations are the same function", derived from the arithmetic.

The tests use it, and so does chapter 7, which checks its hand-built layer against the library's.

Two code paths that compute the same mathematical function (transformers against `mlm_lib`, SDPA
against the explicit softmax, the fused masked loss against the plain one) differ only by rounding:
they add the same products in a different order. Which order is used depends on the CPU (AVX2 or
AVX-512 kernels), on the BLAS library and on the thread count, so a tolerance read off one machine
("the difference was 8e-6 here, allow 1e-5") fails on the next one.

Reordering a sum of K terms changes it by at most K * eps * sum|terms|; with rounding errors that
behave like random signs, by about sqrt(K) * eps * scale, where eps is the dtype's machine epsilon
and scale is the size of the numbers involved. The largest sums here have K = 1,536 terms
(sqrt(K) ~ 39) and pass through up to 6 layers, so we allow

    |actual - expected| <= ULPS * eps * max(1, max|expected|),   ULPS = 256 (~ 39 * 6, rounded up).

That is 3.1e-5 relative in fp32 and 5.7e-14 relative in fp64. Observed on AVX-512 and AVX2 kernels,
1 and 2 threads: 7-15 ulps of the scale in fp32 (MiniLM, 6 layers), up to 31 in fp64. A real
mistake is far larger: a LayerNorm epsilon of 1e-5 instead of 1e-12 moves hidden states by ~1e-6
relative, 10^7 ulps in fp64, which is why the exact-agreement claims are also checked in float64.
"""

from __future__ import annotations

import torch

ULPS = 256


def tolerance(expected: torch.Tensor, ulps: int = ULPS) -> float:
    """The largest rounding difference allowed between two computations of `expected`."""
    eps = torch.finfo(expected.dtype if expected.is_floating_point() else torch.float32).eps
    scale = max(1.0, expected.detach().abs().max().item()) if expected.numel() else 1.0
    return ulps * eps * scale


def max_diff(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return (actual.detach().double() - expected.detach().double()).abs().max().item() \
        if expected.numel() else 0.0


def assert_same_function(actual: torch.Tensor, expected: torch.Tensor, what: str = "",
                         ulps: int = ULPS) -> None:
    """Assert equal shapes and agreement to rounding (see the module docstring)."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    diff, tol = max_diff(actual, expected), tolerance(expected, ulps)
    assert diff <= tol, f"{what}: max |difference| {diff:.3e} > tolerance {tol:.3e}"

