"""The chapters' runs and the multi-seed registry: tiny, seeded, and behaving as the chapters say."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.batches import masked_batches
from mlm_lib.book.chapter_runs import score, train_micro
from mlm_lib.book.experiments import EXPERIMENTS, Experiment
from mlm_lib.book.results import TOLERANCE
from mlm_lib.config import BertConfig
from mlm_lib.masking import Corruption
from mlm_lib.model import BertForPreTraining
from mlm_lib.pretraining import PreparedData
from toy_data import toy_data


@pytest.fixture(scope="module")
def data() -> PreparedData:
    return toy_data()


def test_keeping_the_chosen_tokens_leaks_the_answer(data):
    # the same seed and steps; only the corruption differs
    leak = train_micro(Corruption(mask=0.0, random=0.0, keep=1.0), steps=40,
                       data=data, max_seq_length=16, batch_size=8)
    honest = train_micro(Corruption(mask=1.0, random=0.0, keep=0.0), steps=40,
                         data=data, max_seq_length=16, batch_size=8)
    assert leak.train_curve()[1][-1] < 0.8 * honest.train_curve()[1][-1]
    # the copying model fills visible tokens well, real blanks badly
    copy = score(leak.model, data, Corruption(select=0.5, mask=0.0, random=0.0, keep=1.0))
    blank = score(leak.model, data, Corruption(select=0.5, mask=1.0, random=0.0, keep=0.0))
    assert copy["mlm_acc"] > blank["mlm_acc"] + 0.25


def test_runs_are_reproducible(data):
    a = train_micro(steps=5, data=data, max_seq_length=16, batch_size=8)
    b = train_micro(steps=5, data=data, max_seq_length=16, batch_size=8)
    assert a.train_curve() == b.train_curve()
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)


def test_start_from_continues_a_copy_of_a_trained_model(data):
    base = train_micro(steps=30, data=data, max_seq_length=16, batch_size=8)
    before = {n: p.clone() for n, p in base.model.named_parameters()}
    more = train_micro(steps=5, data=data, start_from=base.model, batch_size=8, lr=1e-3)
    # the original is untouched, the copy has moved on from it (not from a fresh init)
    for n, p in base.model.named_parameters():
        assert torch.equal(p, before[n]), n
    assert more.config.max_seq_length == 16 and more.config.model["hidden_size"] == 64
    moved = max((p - before[n]).abs().max().item() for n, p in more.model.named_parameters())
    assert 0 < moved < 0.05
    wide = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=64,
                                         max_position_embeddings=16))
    with pytest.raises(ValueError, match="vocabulary"):
        train_micro(steps=2, data=data, start_from=wide)


def test_masked_batches_follow_the_recipe(data):
    tok = data.tokenizer
    kept = masked_batches(data.valid_examples, tok, Corruption(select=0.5, mask=0.0, random=0.0, keep=1.0))
    for b in kept:
        assert not bool((b["input_ids"] == tok.mask_id).any())  # no [MASK] anywhere
        assert torch.equal(b["input_ids"][b["masked"]], b["labels"][b["masked"]])
    masked = masked_batches(data.valid_examples, tok, Corruption(select=0.5, mask=1.0, random=0.0, keep=0.0))
    assert all(bool((b["input_ids"][b["masked"]] == tok.mask_id).all()) for b in masked)
    with pytest.raises(ValueError, match="no examples"):
        masked_batches([], tok)


def test_bad_steps_are_value_errors(data):
    with pytest.raises(ValueError, match="steps"):
        train_micro(steps=0, data=data)


def test_every_experiment_is_named_by_keyword_and_consistent():
    with pytest.raises(TypeError):
        Experiment("x", "q?", ("a",), lambda arm, seed: {}, {}, "a")  # type: ignore[misc]
    for name, experiment in EXPERIMENTS.items():
        assert experiment.name == name and experiment.question.endswith(")")
        assert experiment.cheapest_arm in experiment.arms
        assert TOLERANCE[name] and all(t > 0 for t in TOLERANCE[name].values())
