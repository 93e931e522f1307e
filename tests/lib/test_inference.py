"""The inference API on a small random model (the book's model has its own test)."""

from __future__ import annotations

import math

import pytest
import torch

from mlm_lib.checkpoint import save_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.inference import attention_probs, fill_mask, hidden_states, load_model, sentence_loss
from mlm_lib.model import BertForPreTraining


@pytest.fixture(scope="module")
def model(tok):
    cfg = BertConfig.preset("tiny", vocab_size=tok.vocab_size, hidden_size=32, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64)
    return BertForPreTraining(cfg, seed=0).eval()


def test_fill_mask_several_masks_sorted_probabilities(model, tok):
    preds = fill_mask(model, tok, "The [MASK] was steep and the [MASK] was cold.", top_k=4)
    assert len(preds) == 2
    tokens = tok.encode("The [MASK] was steep and the [MASK] was cold.").tokens
    assert [tokens[p.position] for p in preds] == ["[MASK]", "[MASK]"]
    for p in preds:
        assert len(p.tokens) == 4 and p.probs == sorted(p.probs, reverse=True)
        assert 0 < sum(p.probs) <= 1.0 + 1e-6


def test_whole_words_excludes_pieces_and_specials(model, tok):
    (p,) = fill_mask(model, tok, "The [MASK] was steep.", top_k=50, whole_words=True)
    assert not any(t.startswith("##") or t.startswith("[") for t in p.tokens)
    (every,) = fill_mask(model, tok, "The [MASK] was steep.", top_k=tok.vocab_size, whole_words=True)
    assert sum(every.probs) == pytest.approx(1.0, abs=1e-4)  # renormalised over the whole words


def test_fill_mask_needs_a_mask(model, tok):
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        fill_mask(model, tok, "Nothing to fill here.")
    with pytest.raises(ValueError, match="top_k"):
        fill_mask(model, tok, "The [MASK].", top_k=0)


def test_attention_and_hidden_states_shapes(model, tok):
    tokens, att = attention_probs(model, tok, "the hill was steep", pair="we walked up")
    L, A = model.config.num_hidden_layers, model.config.num_attention_heads
    assert att.shape == (L, A, len(tokens), len(tokens))
    assert torch.allclose(att.sum(-1), torch.ones(L, A, len(tokens)), atol=1e-5)
    tokens2, hs = hidden_states(model, tok, "the hill was steep")
    assert hs.shape == (L + 1, len(tokens2), model.config.hidden_size)


def test_sentence_loss_is_the_formula(model, tok):
    text = "the hill was steep"
    r = sentence_loss(model, tok, text, words=["hill", "steep"])
    assert [r.tokens[i] for i in r.positions] == tok.tokenize("hill") + tok.tokenize("steep")
    # recompute by hand: put [MASK] at M, log-softmax over V, pick the original ids
    enc = tok.encode(text)
    ids = torch.tensor([enc.input_ids])
    corrupted = ids.clone()
    corrupted[0, r.positions] = tok.mask_id
    with torch.no_grad():
        logits = model(corrupted).mlm_logits[0]
    lp = torch.log_softmax(logits, -1)[r.positions, ids[0, r.positions]]
    assert r.loss == pytest.approx(float(-lp.sum()), rel=1e-5)
    assert math.isfinite(r.loss) and r.loss > 0
    with pytest.raises(ValueError, match="special"):
        sentence_loss(model, tok, text, positions=[0])
    with pytest.raises(ValueError, match="not in"):
        sentence_loss(model, tok, text, words=["valley"])


def test_load_model_round_trip(model, tok, tmp_path):
    path = save_checkpoint(tmp_path / "m", model, model.config.to_dict(), dtype=torch.float16)
    loaded = load_model(path)
    assert loaded.config == model.config
    a = fill_mask(model, tok, "The [MASK] was steep.", top_k=3)[0]
    b = fill_mask(loaded, tok, "The [MASK] was steep.", top_k=3)[0]
    assert a.probs == pytest.approx(b.probs, abs=1e-2)  # fp16 storage: close, not equal
