"""The book's committed model: small, loads fast, matches its recipe, and has learned something."""

from __future__ import annotations

import time

from mlm_lib.baselines import fit_baselines
from mlm_lib.batches import masked_batches
from mlm_lib.book.book_model import BOOK_MODEL_DIR, BOOK_RECIPE_32, book_model, book_model_tokenizer
from mlm_lib.book.recipes import book_train_config
from mlm_lib.checkpoint import load_checkpoint
from mlm_lib.pretraining import prepare_data
from mlm_lib.train import TrainConfig, evaluate_mlm


def test_size_and_config_match_the_recipe():
    size = sum(p.stat().st_size for p in BOOK_MODEL_DIR.iterdir())
    assert size <= 10 * 1024 * 1024, f"{size / 1e6:.1f} MB"
    ck = load_checkpoint(BOOK_MODEL_DIR, weights_only=True)
    cfg = book_train_config()
    for key, value in cfg.model.items():
        assert ck.config[key] == value, key
    assert ck.config["vocab_size"] == 8000
    assert ck.config["max_position_embeddings"] == cfg.max_seq_length
    # everything that shapes the weights (the progress bar does not), read as the library reads a
    # stored config: options added since (e.g. span masking) take their defaults, which change nothing
    display = {"progress"}
    stored = TrainConfig.from_dict(ck.extra["train_config"]).to_dict()
    assert ({k: v for k, v in stored.items() if k not in display}
            == {k: v for k, v in cfg.to_dict().items() if k not in display})
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
    model, tok = book_model(), book_model_tokenizer()
    cfg = book_train_config()
    data = prepare_data("wikipedia", tok, **cfg.data_options())
    batches = masked_batches(data.valid_examples, tok)
    r = evaluate_mlm(model, batches, nsp=False, baselines=fit_baselines(data))
    # the recipe's point: more than frequencies (unigram) and more than one side (left bigram);
    # it also beats the count of every (left, right) neighbour pair
    assert r["mlm_acc"] > 3 * r["unigram_acc"], r
    assert r["mlm_acc"] > r["left_bigram_acc"] and r["mlm_acc"] > r["both_neighbours_acc"], r


def test_carries_its_training_history():
    ck = load_checkpoint(BOOK_MODEL_DIR, weights_only=True)
    steps = [rec["step"] for rec in ck.extra["history"] if rec["kind"] == "train"]
    assert steps[0] > 0 and steps[-1] == book_train_config().max_steps
    earlier = [rec["step"] for rec in ck.extra["earlier_history"] if rec["kind"] == "train"]
    assert earlier[-1] == BOOK_RECIPE_32["max_steps"]
    assert ck.extra["eval"]["mlm_acc"] > ck.extra["eval"]["both_neighbours_acc"]
