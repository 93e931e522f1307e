"""Chapter 15's successors: the configs are their papers', the counts are the models', the drawing
reads them, the wrapper scores M as transformers' own models do, and span corruption is T5's."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.book.results import TOLERANCE, load_results
from mlm_lib.book.span_corruption import SENTINEL, choose_spans, span_corrupt
from mlm_lib.book.successor_diagram import successors_diagram
from mlm_lib.book.successors import (BERT, DEBERTA, ENCODERS, MODERNBERT, MaskedLM, anatomy,
                                     build_successor, check_arm, successor_config,
                                     successor_train_config)
from mlm_lib.book.viz import COLUMN_WIDTH_PX
from mlm_lib.init import build_model, unigram_log_probs


@pytest.fixture(scope="module")
def data():
    return chapter_data(32)


@pytest.fixture(scope="module")
def models(data):
    cfg = successor_train_config(seed=0, steps=10)
    tok = data.tokenizer
    return {BERT: build_model(**cfg.model_options(tok.vocab_size)),
            **{n: build_successor(n, tok, data.train_examples[:50], seed=0) for n in (MODERNBERT, DEBERTA)}}


def test_each_arm_is_its_papers_encoder(models):
    cfg = successor_train_config(seed=0, steps=10)
    parts = {n: check_arm(m, cfg) for n, m in models.items()}
    assert [parts[n].positions for n in ENCODERS] == ["learned", "rotary", "relative"]
    assert [parts[n].norm for n in ENCODERS] == ["post-LN", "pre-norm", "post-LN"]
    assert parts[MODERNBERT].feed_forward == "GeGLU" and parts[MODERNBERT].biases == 0
    assert {(a.layers, a.hidden, a.heads) for a in parts.values()} == {(2, 128, 2)}


def test_a_planted_position_type_fails(data):
    cfg = successor_train_config(seed=0, steps=10)
    special = {"pad": 0, "cls": 2, "sep": 3}
    wrong = successor_config(DEBERTA, 8000, special)
    wrong.position_biased_input = True  # DeBERTa v1's learned positions added to the input
    from transformers import DebertaV2ForMaskedLM
    with pytest.raises(ValueError, match="positions"):
        check_arm(MaskedLM(DebertaV2ForMaskedLM(wrong)), cfg)


def test_planted_biases_fail(data):
    cfg = successor_train_config(seed=0, steps=10)
    wrong = successor_config(MODERNBERT, 8000, {"pad": 0, "cls": 2, "sep": 3})
    wrong.attention_bias = True
    from transformers import ModernBertForMaskedLM
    with pytest.raises(ValueError, match="biases"):
        check_arm(MaskedLM(ModernBertForMaskedLM(wrong)), cfg)


def test_a_planted_mask_rate_fails(models):
    planted = successor_train_config(seed=0, steps=10, mask_rate=0.3)
    with pytest.raises(ValueError, match="30%"):
        check_arm(models[MODERNBERT], planted)  # the 15% arm trained at 30%
    assert check_arm(models[MODERNBERT], planted, mask_rate=0.3).name == MODERNBERT


def test_counts_are_the_models(models):
    for name, model in models.items():
        a = anatomy(model)
        every = sum(p.numel() for p in model.parameters())
        if name == BERT:  # the pooler and NSP head, which MLM never trains, are left out
            left_out = sum(p.numel() for k, p in model.named_parameters()
                           if k.startswith("bert.pooler") or "seq_relationship" in k)
            assert left_out > 0 and a.parameters == every - left_out
        else:
            assert a.parameters == every


def test_the_wrapper_scores_m_as_transformers_does(models, data):
    tok = data.tokenizer
    batch = tok.encode_batch(["the river flows through the old town .", "a short one ."])
    masked = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
    masked[0, 2], masked[0, 5], masked[1, 2] = True, True, True
    targets = batch["input_ids"][masked]
    for name in (MODERNBERT, DEBERTA):
        model = models[name].eval()
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                    masked_positions=masked, targets=targets)
        full = model.hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        expected = F.cross_entropy(full[masked], targets, reduction="none")
        torch.testing.assert_close(out.mlm_nll, expected, atol=1e-5, rtol=1e-5)


def test_the_output_bias_starts_at_the_unigram_log_probabilities(models, data):
    tok = data.tokenizer
    expected = unigram_log_probs(data.train_examples[:50], tok.vocab_size, tok.special_ids)
    for name in (MODERNBERT, DEBERTA):
        torch.testing.assert_close(models[name].output_bias.detach(), expected)


def test_the_drawing_reads_the_models(models):
    parts = [anatomy(models[n]) for n in ENCODERS]
    svg = successors_diagram(parts, "planted title")
    label = re.search(r"aria-label='([^']*)'", svg).group(1)
    for a in parts:
        assert a.name in label and f"{a.parameters:,} parameters" in svg
    assert "rotary" in label and "relative" in label and "pre-norm" in label
    assert "GeGLU: 128 → 2×340 → 128" in svg
    width = int(re.search(r"viewBox='0 0 (\d+)", svg).group(1))
    assert width <= COLUMN_WIDTH_PX
    with pytest.raises(ValueError, match="BERT"):
        successors_diagram(parts[1:], "no BERT column")


def test_span_corruption_is_t5s_figure():
    words = "Thank you for inviting me to your party last week .".split()
    source, target = span_corrupt(words, [(2, 4), (8, 9)])
    x, y, z = (SENTINEL.format(k) for k in range(3))
    assert source == ["Thank", "you", x, "me", "to", "your", "party", y, "week", "."]
    assert target == [x, "for", "inviting", y, "last", z]
    with pytest.raises(ValueError, match="overlap"):
        span_corrupt(words, [(2, 5), (4, 6)])


@pytest.mark.parametrize("n", [10, 33, 100, 512])
def test_spans_hide_t5s_share_in_separate_runs(n):
    spans = choose_spans(n, seed=1)
    hidden = sum(b - a for a, b in spans)
    assert hidden == max(1, round(0.15 * n)) and len(spans) == max(1, round(hidden / 3))
    assert spans[0][0] > 0 and spans[-1][1] < n
    assert all(b < c for (_, b), (c, _) in zip(spans, spans[1:]))  # a kept piece between spans


def test_the_bert_arm_is_chapter_10s_recipe_run():
    """The successors' BERT runs are the warm-up experiment's "warm-up, 30 steps" runs (the same
    recipe, seeds and evaluation), so the two results files must agree seed by seed."""
    ours, theirs = load_results("successors"), load_results("warmup")
    for metric in ("mlm_acc", "mlm_loss"):
        a = ours.values(BERT, metric)
        b = theirs.values("warm-up, 30 steps", metric)[:len(a)]
        assert max(abs(x - y) for x, y in zip(a, b)) <= TOLERANCE["successors"][metric]


def test_a_score_between_scored_steps_is_read_linearly():
    from mlm_lib.book.successors import score_at
    results = load_results("successors")
    at_520 = results.values(MODERNBERT, "mlm_acc_520")
    at_560 = results.values(MODERNBERT, "mlm_acc_560")
    assert score_at(results, MODERNBERT, "mlm_acc", 520) == pytest.approx(at_520)
    assert score_at(results, MODERNBERT, "mlm_acc", 530) == pytest.approx(
        [a + 0.25 * (b - a) for a, b in zip(at_520, at_560)])
    assert score_at(results, BERT, "mlm_acc", 800) == pytest.approx(results.values(BERT, "mlm_acc_800"))
    with pytest.raises(ValueError, match="outside"):
        score_at(results, BERT, "mlm_acc", 10)
