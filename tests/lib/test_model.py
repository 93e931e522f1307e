"""The model on its own: config checks, shapes, the two attention paths, masked-only prediction,
the training path against the plain one, padding, initialisation, and the device helpers."""

import pytest
import torch

from mlm_lib.config import BertConfig
from mlm_lib.device import autocast, make_grad_scaler, pick_device
from mlm_lib.loss import IGNORE_INDEX, mlm_loss, mlm_loss_sum, target_log_probs
from mlm_lib.model import BertForPreTraining, BertModel, attention_bias
from mlm_lib.numerics import assert_same_function
from mlm_lib.sizes import count_parameters, parameter_counts
from padded import padded_batch


SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=24)


def small(**overrides) -> BertConfig:
    return BertConfig(**{**SMALL, **overrides})


def batch(seed=0, B=3, T=12, V=97):
    """Ids, two segments, padding of different lengths (row 0 unpadded), and a set M."""
    g = torch.Generator().manual_seed(seed)
    ids, token_type_ids, attention_mask, masked = padded_batch(g, T, V, [T, T - 4, 5][:B])
    masked[0, 1] = True
    return ids, token_type_ids, attention_mask, masked


@pytest.mark.parametrize("field, value", [
    ("hidden_size", 30), ("num_attention_heads", 0), ("vocab_size", -1), ("intermediate_size", 0),
    ("num_hidden_layers", 0), ("hidden_dropout_prob", 1.0), ("attention_probs_dropout_prob", -0.1),
    ("max_position_embeddings", 0), ("hidden_act", "swish"), ("layer_norm_eps", 0.0),
])
def test_invalid_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        small(**{field: value})


def test_presets_and_dict_round_trip():
    base = BertConfig.preset("base")
    assert (base.num_hidden_layers, base.hidden_size, base.num_attention_heads) == (12, 768, 12)
    assert base == BertConfig()
    tiny = BertConfig.preset("tiny", vocab_size=8000)
    assert (tiny.hidden_size, tiny.intermediate_size, tiny.vocab_size) == (128, 512, 8000)
    assert BertConfig.from_dict({**tiny.to_dict(), "model_type": "bert"}) == tiny
    with pytest.raises(ValueError, match="preset"):
        BertConfig.preset("huge")
    # BERT-base has 110M parameters (the tied decoder counted once).
    with torch.device("meta"):  # shapes only, no memory
        base_model = BertForPreTraining(BertConfig.preset("base"))
    assert 109e6 < count_parameters(base_model) < 111e6


def test_shapes_and_outputs():
    cfg = small()
    model = BertForPreTraining(cfg, seed=0).eval()
    ids, tt, am, masked = batch()
    out = model(ids, tt, am, output_attentions=True, output_hidden_states=True)
    assert out.mlm_logits.shape == (3, 12, cfg.vocab_size)
    assert out.nsp_logits.shape == (3, 2)
    assert out.pooled_output.shape == (3, cfg.hidden_size)
    assert len(out.hidden_states) == cfg.num_hidden_layers + 1
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert len(out.attentions) == cfg.num_hidden_layers
    probs = out.attentions[0]
    assert probs.shape == (3, cfg.num_attention_heads, 12, 12)
    torch.testing.assert_close(probs.sum(-1), torch.ones(3, cfg.num_attention_heads, 12))
    # Padded keys get no attention.
    assert probs[2, :, :, 5:].abs().max() == 0
    assert out.hidden_states is not None and model(ids).hidden_states is None


def test_sdpa_and_explicit_paths_agree():
    ids, tt, am, _ = batch()
    fast = BertModel(small(use_sdpa=True), seed=1).eval()
    slow = BertModel(small(use_sdpa=False), seed=1).eval()
    a, b = fast(ids, tt, am), slow(ids, tt, am)
    assert_same_function(a.last_hidden_state, b.last_hidden_state, "SDPA vs explicit")
    # Asking for attentions uses the explicit path, whatever the flag says.
    c = fast(ids, tt, am, output_attentions=True)
    assert_same_function(c.last_hidden_state, a.last_hidden_state, "with attentions")


@pytest.mark.parametrize("use_sdpa", [True, False])
def test_all_padding_row_gives_no_nan(use_sdpa):
    model = BertForPreTraining(small(use_sdpa=use_sdpa), seed=0).eval()
    ids, tt, am, _ = batch()
    am[1] = 0
    out = model(ids, tt, am, output_attentions=not use_sdpa)
    assert torch.isfinite(out.mlm_logits).all() and torch.isfinite(out.nsp_logits).all()


def test_padding_does_not_change_real_tokens():
    model = BertModel(small(), seed=0).eval()
    ids, tt, am, _ = batch()
    short = model(ids[1:2, :8], tt[1:2, :8], am[1:2, :8]).last_hidden_state
    padded = model(ids[1:2], tt[1:2], am[1:2]).last_hidden_state[:, :8]
    assert_same_function(short, padded, "padding")


def test_masked_only_equals_full_position():
    model = BertForPreTraining(small(), seed=0).eval()
    ids, tt, am, masked = batch()
    full = model(ids, tt, am).mlm_logits
    only = model(ids, tt, am, masked_positions=masked).mlm_logits
    assert only.shape == (int(masked.sum()), 97)
    assert_same_function(only, full[masked], "masked rows")
    targets = torch.randint(0, 97, ids.shape, generator=torch.Generator().manual_seed(3))
    labels = torch.where(masked, targets, torch.full_like(targets, IGNORE_INDEX))
    assert_same_function(mlm_loss_sum(only, targets[masked]), mlm_loss_sum(full, labels))
    assert_same_function(mlm_loss(only, targets[masked]), mlm_loss(full, labels))


def test_empty_m_gives_zero_loss_and_zero_grads():
    model = BertForPreTraining(small(), seed=0)
    ids, tt, am, masked = batch()
    none = torch.zeros_like(masked)
    out = model(ids, tt, am, masked_positions=none)
    assert out.mlm_logits.shape == (0, 97)
    loss = mlm_loss(out.mlm_logits, ids[none])
    assert loss.item() == 0.0
    loss.backward()
    for p in model.parameters():
        assert p.grad is None or (torch.isfinite(p.grad).all() and p.grad.abs().max() == 0)


def test_tied_decoder_trains_the_embeddings():
    model = BertForPreTraining(small(hidden_dropout_prob=0.0), seed=0).train()
    ids, tt, am, masked = batch()
    out = model(ids, tt, am, masked_positions=masked)
    mlm_loss(out.mlm_logits, ids[masked]).backward()
    grad = model.bert.embeddings.word_embeddings.weight.grad
    # Rows of words that never appear in the input still get a gradient, through the decoder.
    unseen = torch.ones(97, dtype=torch.bool)
    unseen[ids.unique()] = False
    assert grad[unseen].abs().sum() > 0
    assert "cls.decoder.weight" not in model.state_dict()


def test_dropout_only_in_training_and_seeded():
    ids, tt, am, masked = batch()
    model = BertForPreTraining(small(), seed=0)
    model.eval()
    assert torch.equal(model(ids, tt, am).mlm_logits, model(ids, tt, am).mlm_logits)
    model.train()
    assert not torch.equal(model(ids, tt, am).mlm_logits, model(ids, tt, am).mlm_logits)


def test_initialisation_is_truncated_normal_and_reproducible():
    cfg = small(vocab_size=2000, hidden_size=64)
    a, b = BertForPreTraining(cfg, seed=7), BertForPreTraining(cfg, seed=7)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name
    w = a.bert.embeddings.word_embeddings.weight.detach()
    assert w.abs().max() <= 2 * cfg.initializer_range
    assert w[cfg.pad_token_id].abs().max() == 0
    assert 0.015 < w[1:].std() < 0.02  # a normal(0, 0.02) cut at 2 std has std 0.0176
    assert a.bert.layers[0].output_norm.weight.eq(1).all()
    assert a.cls.predictions_bias.eq(0).all() and a.bert.layers[0].attention.qkv.bias.eq(0).all()
    assert not torch.equal(w, BertForPreTraining(cfg, seed=8).bert.embeddings.word_embeddings.weight)


def test_bad_inputs_raise_clear_errors():
    model = BertForPreTraining(small(), seed=0)
    ids, tt, am, masked = batch()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.ones(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.full((1, 4), 97))
    with pytest.raises(ValueError, match="2-D"):
        model(ids[0])
    with pytest.raises(ValueError, match="token_type_ids"):
        model(ids, torch.full_like(ids, 2))
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids, tt, am[:, :5])
    with pytest.raises(ValueError, match="masked_positions"):
        model(ids, tt, am, masked_positions=masked[:, :4])
    with pytest.raises(ValueError, match="masked_positions"):
        model(ids, tt, am, masked_positions=masked.long())


def test_device_helpers_on_this_machine():
    device = pick_device()
    assert device.type in {"cuda", "mps", "cpu"}
    model = BertForPreTraining(small(), seed=0).to(device)
    ids, tt, am, masked = (t.to(device) for t in batch())
    with autocast(device):
        out = model(ids, tt, am, masked_positions=masked)
    assert torch.isfinite(mlm_loss(out.mlm_logits, ids[masked])).item()
    if device.type == "cpu":
        assert out.mlm_logits.dtype == torch.float32  # no autocast on CPU
        assert make_grad_scaler(device) is None
    

def plain_terms(model, ids, tt, am, masked):
    """The plain path the chapters print: logits of M, then -log P(x_i | x_\\M) per token."""
    out = model(ids, tt, am, masked_positions=masked)
    return -target_log_probs(out.mlm_logits, ids[masked]), out.mlm_logits.argmax(-1), out.nsp_logits


def training_terms(model, ids, tt, am, masked, fused_loss):
    """The training path: the same terms from ``targets``, with the last layer on [CLS] and M."""
    out = model(ids, tt, am, masked_positions=masked, targets=ids[masked], fused_loss=fused_loss)
    assert out.last_hidden_state is None and (out.mlm_logits is None) == fused_loss
    return out.mlm_nll, out.mlm_predictions, out.nsp_logits


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("fused_loss", [False, True])
def test_training_path_gives_the_plain_numbers_and_gradients(train, fused_loss):
    model = BertForPreTraining(small(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                               seed=0).train(train)
    ids, tt, am, masked = batch()
    masked[1, 0] = True  # a masked [CLS] position is both an MLM row and the NSP row
    masked[2] = False  # a sequence with nothing masked: the last layer reads only its [CLS]
    results = []
    for forward in (lambda: plain_terms(model, ids, tt, am, masked),
                    lambda: training_terms(model, ids, tt, am, masked, fused_loss)):
        model.zero_grad()
        nll, predictions, nsp_logits = forward()
        (nll.mean() + nsp_logits.square().mean()).backward()
        results.append((nll, predictions, nsp_logits,
                        {n: p.grad.clone() for n, p in model.named_parameters()}))
    (nll, pred, nsp, grads), (fast_nll, fast_pred, fast_nsp, fast_grads) = results
    assert_same_function(fast_nll, nll, "-log P(x_i | x_\\M)")
    assert_same_function(fast_nsp, nsp, "nsp logits")
    assert (fast_pred == pred).float().mean() > 0.9  # arg-max may flip only on near ties
    for name, g in grads.items():
        assert_same_function(fast_grads[name], g, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # float64: to the last bits
@pytest.mark.parametrize("causal", [False, True])
def test_last_layer_rows_are_the_full_encoder_at_those_rows(causal, dtype):
    model = BertModel(small(use_sdpa=not causal), seed=0).to(dtype).eval()
    ids, tt, am, _ = batch()
    bias = attention_bias(ids.size(1), causal=True) if causal else None
    rows = torch.tensor([[0, 3, 4], [0, 1, 7], [0, 2, 2]])  # [CLS] first; a repeat is filler
    full = model(ids, tt, am, attn_bias=bias, output_attentions=causal)
    part = model(ids, tt, am, attn_bias=bias, output_attentions=causal, last_layer_rows=rows)
    h = full.last_hidden_state
    assert_same_function(part.last_hidden_state, h.gather(1, rows[..., None].expand(-1, -1, h.size(-1))),
                         "last layer at rows")
    assert_same_function(part.pooled_output, full.pooled_output, "pooled [CLS]")
    if causal:  # the last layer's attention map has the rows of its queries, under the causal bias
        probs = full.attentions[-1]
        at_rows = probs.gather(2, rows[:, None, :, None].expand(-1, probs.size(1), -1, probs.size(-1)))
        assert_same_function(part.attentions[-1], at_rows, "attention at rows")


def test_training_path_needs_masked_positions_and_keeps_no_states():
    model = BertForPreTraining(small(), seed=0)
    ids, tt, am, masked = batch()
    with pytest.raises(ValueError, match="masked_positions"):
        model(ids, tt, am, targets=ids[masked])
    with pytest.raises(ValueError, match="hidden states"):
        model(ids, tt, am, masked_positions=masked, targets=ids[masked], output_hidden_states=True)


def test_causal_attention_bias_hides_the_future():
    model = BertModel(small(), seed=0).eval()
    ids, tt, am, _ = batch()
    am = torch.ones_like(am)
    causal = attention_bias(ids.size(1), causal=True)
    full = model(ids, tt, am, attn_bias=causal).last_hidden_state
    cut = model(ids[:, :5], tt[:, :5], am[:, :5], attn_bias=causal[..., :5, :5]).last_hidden_state
    assert_same_function(full[:, :5], cut, "a prefix read causally")
    probs = model(ids, tt, am, attn_bias=causal, output_attentions=True).attentions[0]
    assert probs.triu(1).abs().max() == 0


@pytest.mark.parametrize("overrides", [
    dict(vocab_size=97, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=40,
         max_position_embeddings=24, type_vocab_size=3),
    dict(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8),
])
def test_parameter_counts_from_the_config_equal_the_built_model(overrides):
    config = BertConfig(**overrides)
    assert sum(parameter_counts(config).values()) == count_parameters(BertForPreTraining(config, seed=0))


# Devlin et al. (2019), section 3: "BERT_BASE (L=12, H=768, A=12, Total Parameters=110M) and
# BERT_LARGE (L=24, H=1024, A=16, Total Parameters=340M)".
@pytest.mark.parametrize("preset, paper", [("base", 110e6), ("large", 340e6)])
def test_the_presets_have_the_papers_parameter_counts(preset, paper):
    total = sum(parameter_counts(BertConfig.preset(preset)).values())
    assert abs(total - paper) <= 0.02 * paper, f"BERT-{preset}: {total:,} parameters, the paper says {paper:,.0f}"
