"""The fused masked NLL (``mlm_lib.loss.masked_nll``): scores laid out [|M|, V] against [V, |M|].

Forward and backward of -log P(x_i | x_\\M) over the rows of M, at the shapes the book trains:
the chapters' small model (H 64, about 300 blanks a batch), the book's model in chapter 10 (H 128,
about 600 blanks) and a BERT-sized vocabulary. ``[|M|, V]`` is the library's layout (one row of V
scores per masked token); ``[V, |M|]`` is the one it used before, kept here as the reference. Both
compute the same numbers (the script checks them to 1e-5); they differ in how the reductions over
V walk memory: a max or a sum along rows reads contiguous floats, one along columns strides.

Usage: python benchmarks/bench_masked_nll.py [--rounds 15] [--threads 1]
The last line printed is ``speedup: X.XX`` (the [V, |M|] time over the [|M|, V] time, at the
chapter 10 shape).

Measured on a 2-core AMD EPYC, nearly idle, medians of 15 alternating calls ([V, |M|] against
[|M|, V]; the library's side also pays for autograd): one thread, |M| 300, V 8,000, H 64: 52.1
against 46.4 ms (1.12x); |M| 600, V 8,000, H 128: 148.0 against 111.3 ms (1.33x); |M| 300,
V 30,522, H 128: 258.9 against 217.6 ms (1.19x). Two threads: 1.35x, 1.27x, 1.20x. Most of the
difference is the max over each blank's V scores, which along the columns of [V, |M|] took 11 to
32 ms a call in a profile of the chapters' runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mlm_lib.loss import masked_nll

# (|M|, V, H): the chapters' micro model, chapter 10's live run, a BERT vocabulary.
SHAPES = [(300, 8000, 64), (600, 8000, 128), (300, 30522, 128)]
HEADLINE = (600, 8000, 128)


def columns_layout(h: torch.Tensor, W: torch.Tensor, b: torch.Tensor, targets: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reference: scores as [V, |M|], then the same softmax - one-hot and products; returns
    nll and the gradients for a loss of mean(nll)."""
    cols = torch.arange(h.size(0))
    z = torch.addmm(b[:, None], W, h.t())
    top, _ = z.max(dim=0)
    target_logit = z[targets, cols]
    p = z.sub_(top).exp_()
    total = p.sum(dim=0)
    nll = total.log() + top - target_logit
    p.div_(total)
    p[targets, cols] -= 1.0
    g = torch.full((h.size(0),), 1.0 / h.size(0))
    return nll, (p.t() @ W) * g[:, None], p @ (h * g[:, None]), p @ g


def rows_layout(h: torch.Tensor, W: torch.Tensor, b: torch.Tensor, targets: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The library's ``masked_nll``, forward and backward of mean(nll)."""
    h, W, b = (t.detach().requires_grad_() for t in (h, W, b))
    nll, _ = masked_nll(h, W, b, targets)
    nll.mean().backward()
    return nll.detach(), h.grad, W.grad, b.grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed calls per layout and shape")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    speedup = None
    for m, v, hidden in SHAPES:
        h = torch.randn(m, hidden, generator=g) * 0.5
        W = torch.randn(v, hidden, generator=g) * 0.1
        b = torch.randn(v, generator=g) * 0.01
        targets = torch.randint(0, v, (m,), generator=g)
        for a, c in zip(columns_layout(h, W, b, targets), rows_layout(h, W, b, targets)):
            if not torch.allclose(a, c, rtol=1e-5, atol=1e-7):
                raise SystemExit(f"the layouts disagree at |M| {m}, V {v}, H {hidden}")
        times: dict[str, list[float]] = {"[V, |M|]": [], "[|M|, V]": []}
        for _ in range(args.rounds):  # alternating, so that a change in load hits both
            for name, fn in (("[V, |M|]", columns_layout), ("[|M|, V]", rows_layout)):
                start = time.perf_counter()
                fn(h, W, b, targets)
                times[name].append(time.perf_counter() - start)
        old, new = (statistics.median(t) * 1e3 for t in times.values())
        print(f"|M| {m}, V {v:,}, H {hidden}: [V, |M|] {old:.1f} ms, [|M|, V] {new:.1f} ms "
              f"({old / new:.2f}x)")
        if (m, v, hidden) == HEADLINE:
            speedup = old / new
    print(f"speedup: {speedup:.2f}")


if __name__ == "__main__":
    main()
