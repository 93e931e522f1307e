"""Chapter 8's next-token step: the library's objective (``masked_nll`` over every next token)
against the plain one (full [B, n-1, V] logits, then the summed log-loss).

One forward and backward of GPT's objective on the book's model, 32 windows of 32 tokens (the
chapter's batch): 992 targets, each scored over the 8,000-piece vocabulary. Both compute the same
loss (the script checks it to 1e-5, and ``tests/lib/test_causal.py`` checks values and gradients to
rounding); the library's keeps no logits and makes two passes over the scores instead of six or so.

Usage: python benchmarks/bench_next_token.py [--rounds 15] [--threads 1]
The last line printed is ``speedup: X.XX`` (the plain time over the library's).

Measured on a 2-core AMD EPYC, medians of 15 alternating steps: one thread, plain 225.2 ms against
the library's 177.7 ms (1.27x); two threads, 132.6 against 97.8 ms (1.36x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mlm_lib.book.book_model import book_model
from mlm_lib.causal import next_token_objective
from mlm_lib.loss import mlm_loss_sum
from mlm_lib.model import BertForPreTraining, attention_bias

BATCH, SEQ_LEN = 32, 32  # chapter 8's train_next_token defaults


def plain_objective(bias: torch.Tensor):
    """The reference: logits for every position, then -sum log P(x_{i+1}) / n."""
    def objective(model: BertForPreTraining, rows: torch.Tensor) -> torch.Tensor:
        h = model.bert(rows, attn_bias=bias).last_hidden_state
        logits = model.cls.mlm_logits(h[:, :-1], model.bert.embeddings.word_embeddings.weight)
        return mlm_loss_sum(logits, rows[:, 1:]) / rows[:, 1:].numel()
    return objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed steps per objective")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = book_model().train()
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(5, model.config.vocab_size, (BATCH, SEQ_LEN), generator=g)
    bias = attention_bias(SEQ_LEN, causal=True)
    library = next_token_objective(bias)
    steps = {"plain": lambda: plain_objective(bias)(model, rows),
             "library": lambda: library(model, rows)[0]}
    with torch.no_grad():
        plain, fused = (float(step()) for step in steps.values())
    if abs(plain - fused) > 1e-5 * abs(plain):
        raise SystemExit(f"the objectives disagree: {plain} against {fused}")
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):  # alternating, so that a change in load hits both
        for name, step in steps.items():
            model.zero_grad(set_to_none=True)
            start = time.perf_counter()
            step().backward()
            times[name].append(time.perf_counter() - start)
    old, new = (statistics.median(t) * 1e3 for t in times.values())
    print(f"{BATCH} x {SEQ_LEN} tokens, V {model.config.vocab_size:,}: plain {old:.1f} ms, "
          f"library {new:.1f} ms a step, forward and backward")
    print(f"speedup: {old / new:.2f}")


if __name__ == "__main__":
    main()
