"""The book's committed model: small, loads fast, matches its recipe, and has learned something."""

from __future__ import annotations

import time

import pytest
import torch

from mlm_lib.book_model import BOOK_MODEL_DIR, book_model, book_model_tokenizer, book_train_config
from mlm_lib.checkpoint import load_checkpoint

torch.set_num_threads(2)


def test_size_and_config_match_the_recipe():
    size = sum(p.stat().st_size for p in BOOK_MODEL_DIR.iterdir())
    assert size <= 10 * 1024 * 1024, f"{size / 1e6:.1f} MB"
    ck = load_checkpoint(BOOK_MODEL_DIR, weights_only=True)
    cfg = book_train_config()
    for key, value in cfg.model.items():
        assert ck.config[key] == value, key
    assert ck.config["vocab_size"] == 8000
    assert ck.config["max_position_embeddings"] == cfg.max_seq_length
    assert ck.extra["train_config"] == cfg.to_dict()
    assert ck.step == cfg.max_steps


def test_loads_in_seconds_and_fills_a_blank():
    from mlm_lib.inference import fill_mask

    t0 = time.perf_counter()
    model, tok = book_model(), book_model_tokenizer()
    assert time.perf_counter() - t0 < 5.0
    assert tok.vocab_size == model.config.vocab_size == 8000
    (pred,) = fill_mask(model, tok, "He was born in [MASK] and died in 1865.", top_k=5, whole_words=True)
    assert len(pred.tokens) == 5


def test_beats_the_unigram_baseline_on_held_out_text():
    from mlm_lib.train import evaluate, fit_baselines, make_eval_batches, prepare_data

    model, tok = book_model(), book_model_tokenizer()
    cfg = book_train_config()
    data = prepare_data(cfg, tokenizer=tok)
    batches = make_eval_batches(data.valid_examples, tok, 64, rate=0.15, seed=1234)
    r = evaluate(model, batches, "cpu", fit_baselines(data))
    assert r["mlm_acc"] > r["unigram_acc"], r
    assert 0.0 < r["nsp_loss"] < 5.0, r
