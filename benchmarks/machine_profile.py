"""What this machine does per second, in the few kinds of work `make test` is made of.

Two 2-core machines can differ by 1.7x on `make test`. The suite's time goes to four kinds of work:
plain Python (tokenizing, JSON, the notebooks' bookkeeping), small torch ops on one thread (the
book's model is 2 layers of width 128), starting Python processes that import torch (every pytest
worker, every chapter's kernel) and a browser. This script times the first three, each alone, so
that two machines' `make test` times can be put down to the kind of work that differs. `make test`
prints its table after the stage times.

Usage: python benchmarks/machine_profile.py
Each figure is the best of ``ROUNDS`` tries (the least disturbed by other work on the machine).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from mlm_lib.config import BertConfig
from mlm_lib.model import BertForPreTraining
from mlm_lib.packaged import default_tokenizer, recipe_file

ROUNDS = 3
# A paragraph of plain English, tokenized again and again: the library's pure-Python WordPiece.
PARAGRAPH = ("The capital of France is Paris, and the river that runs through it is the Seine. "
             "Masked language modelling hides some of the words and asks the model to fill them in. ") * 8
TOKENIZE_REPEATS = 40
# A square matrix product on one thread: the arithmetic of the book's small models.
MATMUL_SIZE = 256
MATMUL_REPEATS = 200
# One training step of the book's model (its recipe's sizes), one thread: what chapters do most.
STEP_BATCH, STEP_LENGTH, STEP_MASK_RATE = 64, 64, 0.15
STEPS = 5
# A fresh Python that imports the library and torch: the start of every test worker and kernel.
IMPORT_CODE = "import torch, mlm_lib.model"


def best_of(work: Callable[[], None]) -> float:
    """The fastest of ``ROUNDS`` runs of ``work``, in seconds."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def tokenize_rate() -> float:
    """Words tokenized per second by the library's WordPiece tokenizer."""
    tok = default_tokenizer()
    words = len(PARAGRAPH.split()) * TOKENIZE_REPEATS
    return words / best_of(lambda: [tok.tokenize(PARAGRAPH) for _ in range(TOKENIZE_REPEATS)])


def matmul_gflops() -> float:
    """Billions of multiply-adds (times two) per second in a float32 matrix product."""
    a, b = torch.randn(MATMUL_SIZE, MATMUL_SIZE), torch.randn(MATMUL_SIZE, MATMUL_SIZE)
    flops = 2 * MATMUL_SIZE ** 3 * MATMUL_REPEATS
    return flops / best_of(lambda: [a @ b for _ in range(MATMUL_REPEATS)]) / 1e9


def training_steps_per_second() -> float:
    """Forward, backward and AdamW steps per second of the book's model on one batch."""
    recipe = json.loads(recipe_file("book").read_text(encoding="utf-8"))
    config = BertConfig(vocab_size=len(default_tokenizer().vocab), **recipe["model"])
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(5, config.vocab_size, (STEP_BATCH, STEP_LENGTH))
    masked = torch.rand(STEP_BATCH, STEP_LENGTH) < STEP_MASK_RATE

    def steps() -> None:
        for _ in range(STEPS):
            out = model(ids, masked_positions=masked, targets=ids[masked])
            out.mlm_nll.mean().backward()
            optimizer.step()
            optimizer.zero_grad()

    steps()  # the first step allocates
    return STEPS / best_of(steps)


def import_seconds() -> float:
    """Seconds for a fresh Python to import torch and the model (bytecode already cached)."""
    run = [sys.executable, "-c", IMPORT_CODE]
    subprocess.run(run, check=True)  # the first run may compile and fill the disk cache
    return best_of(lambda: subprocess.run(run, check=True))


def cpu_name() -> str:
    """The CPU's model name, and whether it has AVX-512 and AMX (torch's kernels differ by them)."""
    name, flags = platform.processor() or platform.machine(), set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    extras = [f for f, present in (("AVX-512", "avx512f" in flags), ("AMX", "amx_tile" in flags)) if present]
    return f"{name}{' (' + ', '.join(extras) + ')' if extras else ''}"


def main() -> None:
    torch.set_num_threads(1)
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"Python {platform.python_version()}")
    print(f"  plain Python: tokenize       {tokenize_rate():10,.0f} words/s")
    print(f"  torch, 1 thread: matmul      {matmul_gflops():10.1f} GFLOP/s")
    print(f"  torch, 1 thread: book step   {training_steps_per_second():10.1f} steps/s")
    print(f"  start: import torch, mlm_lib {import_seconds():10.2f} s")


if __name__ == "__main__":
    main()
