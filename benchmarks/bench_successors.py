"""Seconds per training step of chapter 15's three encoders (BERT, ModernBERT, DeBERTa-v3), side by side.

One step = the book's objective on one batch of the recipe (128 x 32 pieces of the Wikipedia
split, 15% masked), backward, clipping and AdamW: exactly what the successors experiment's runs do
each step. The three models are built as the experiment builds them (``mlm_lib.book.successors``),
and their steps alternate in one process, one thread, so that a busy moment slows all three alike;
the figure is each encoder's median over the rounds.

Usage: python benchmarks/bench_successors.py [--rounds 30]
The last line printed is ``steps_in_bert_time: ModernBERT N, DeBERTa-v3 N``: how many steps each
successor takes in the time BERT takes for the experiment's 800 (what chapter 15 compares "per second").
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mlm_lib.batches import BatchStream
from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.book.successors import (BERT, ENCODERS, STEPS, build_successor,
                                     successor_train_config)
from mlm_lib.init import build_model, init_unigram_bias
from mlm_lib.loop import _accumulate, _optimizer_step, Metrics
from mlm_lib.optim import build_optimizer
from mlm_lib.train import _step_batches, pretraining_objective
from mlm_lib.device import DistInfo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="timed steps per encoder")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = successor_train_config(seed=0, steps=STEPS)
    data = chapter_data(cfg.max_seq_length)
    tok = data.tokenizer
    models = {}
    for name in ENCODERS:
        if name == BERT:
            model = build_model(**cfg.model_options(tok.vocab_size))
            init_unigram_bias(model, data.train_examples, tok.special_ids)
        else:
            model = build_successor(name, tok, data.train_examples, seed=0)
        models[name] = model.train()
    optimizers = {name: build_optimizer(m, cfg.lr, cfg.weight_decay) for name, m in models.items()}
    stream = BatchStream(len(data.train_examples), cfg.batch_size, cfg.seed)
    batches = _step_batches(cfg, data.train_examples, tok, stream, torch.Generator().manual_seed(0),
                            DistInfo(), torch.device("cpu"))
    objective, dist = pretraining_objective(nsp=False), DistInfo()
    times: dict[str, list[float]] = {name: [] for name in ENCODERS}
    for r in range(args.rounds + 2):  # two warm-up rounds, not timed
        step = next(batches)
        for name, model in models.items():
            t0 = time.perf_counter()
            _accumulate(model, objective, step, Metrics(), None, dist)
            _optimizer_step(model, optimizers[name], cfg.clip_grad_norm, None)
            if r >= 2:
                times[name].append(time.perf_counter() - t0)
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, s in median.items():
        print(f"{name:<11} {s * 1000:7.1f} ms per step ({median[BERT] / s:.2f}x BERT's steps per second)")
    same = {name: int(STEPS * median[BERT] / s) for name, s in median.items() if name != BERT}
    print("steps_in_bert_time: " + ", ".join(f"{name} {n}" for name, n in same.items()))


if __name__ == "__main__":
    main()
