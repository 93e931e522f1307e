"""GPT's objective on BERT's encoder: causal and bidirectional attention, and BERT as a generator."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.causal import (generate_by_refilling, generate_left_to_right, next_token_objective,
                           token_windows, train_next_token)
from mlm_lib.config import BertConfig
from mlm_lib.loss import mlm_loss_sum
from mlm_lib.model import BertForPreTraining, attention_bias, check_model_fits
from mlm_lib.numerics import assert_same_function
from mlm_lib.pretraining import PreparedData
from toy_data import toy_data

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


@pytest.fixture(scope="module")
def data() -> PreparedData:
    return toy_data()


def small_model(vocab_size: int, positions: int = 8) -> BertForPreTraining:
    return BertForPreTraining(BertConfig.preset("micro", vocab_size=vocab_size,
                                                max_position_embeddings=positions, **NO_DROPOUT),
                              seed=0)


def test_attention_bias_causal_and_bidirectional():
    causal, both = attention_bias(4, causal=True), attention_bias(4, causal=False)
    assert causal.shape == both.shape == (1, 1, 4, 4)
    assert bool((both == 0).all())
    upper = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert bool((causal[0, 0][upper] < -1e30).all()) and bool((causal[0, 0][~upper] == 0).all())
    with pytest.raises(ValueError, match="seq_len"):
        attention_bias(0, causal=True)


@pytest.mark.parametrize("causal", [True, False])
def test_next_token_objective_is_the_loss_of_every_next_token(data, causal):
    """The fused objective against the plain one: full [B, n-1, V] logits, the summed log-loss of
    each next token, the arg-max; the same values and gradients to rounding."""
    model = small_model(data.tokenizer.vocab_size)
    rows = token_windows(data.train_examples, data.tokenizer.special_ids, 8)[:6]
    bias = attention_bias(8, causal)
    loss, sums = next_token_objective(bias)(model, rows)
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    h = model.bert(rows, attn_bias=bias).last_hidden_state[:, :-1]
    logits = model.cls.mlm_logits(h, model.bert.embeddings.word_embeddings.weight)
    targets = rows[:, 1:]
    plain = mlm_loss_sum(logits, targets) / targets.numel()
    plain_grads = torch.autograd.grad(plain, list(model.parameters()), allow_unused=True)
    assert_same_function(loss, plain, "loss")
    assert sums["loss"][1] == sums["accuracy"][1] == targets.numel()
    assert int(sums["accuracy"][0]) == int((logits.argmax(-1) == targets).sum())
    for (name, _), g, expected in zip(model.named_parameters(), grads, plain_grads):
        assert (g is None) == (expected is None), name
        if g is not None:
            assert_same_function(g, expected, name)


def test_next_token_training_learns_logs_every_ten_steps_and_leaves_the_model(data):
    model = small_model(data.tokenizer.vocab_size)
    before = {n: p.clone() for n, p in model.named_parameters()}
    run = train_next_token(model, data, causal=True, steps=35, seq_len=8, batch_size=8, lr=1e-2)
    assert run.steps == [10, 20, 30, 35] and len(run.train_loss) == 4
    assert run.train_loss[-1] < run.train_loss[0] - 1.0
    assert 0.0 <= run.valid_accuracy <= 1.0 and run.valid_loss > 0
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    again = train_next_token(model, data, causal=True, steps=35, seq_len=8, batch_size=8, lr=1e-2)
    assert again.train_loss == run.train_loss


def test_a_model_must_fit_the_data(data):
    vocab = data.tokenizer.vocab_size
    with pytest.raises(ValueError, match="vocabulary"):
        check_model_fits(small_model(vocab + 1), vocab, 8)
    with pytest.raises(ValueError, match="positions"):
        train_next_token(small_model(vocab, positions=4), data, causal=True, seq_len=8)
    with pytest.raises(ValueError, match="steps"):
        train_next_token(small_model(vocab), data, causal=True, steps=0)


def test_token_windows_drop_specials(data):
    rows = token_windows(data.train_examples, data.tokenizer.special_ids, 5)
    assert rows.shape[1] == 5
    assert not bool(torch.isin(rows, torch.tensor(sorted(data.tokenizer.special_ids))).any())
    with pytest.raises(ValueError, match="window"):
        token_windows(data.train_examples[:1], data.tokenizer.special_ids, 10_000)


def test_generate_left_to_right_returns_pieces(data):
    tok = data.tokenizer
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=tok.vocab_size,
                                                 max_position_embeddings=32), seed=0)
    out = generate_left_to_right(model, tok, "the cat sat", num_tokens=4)
    assert len(out) == 4
    assert not set(tok.convert_tokens_to_ids(out)) & set(tok.special_ids)
    with pytest.raises(ValueError, match="num_tokens"):
        generate_left_to_right(model, tok, "the cat", num_tokens=0)


def _refill_by_hand(model, tok, prompt, n, iterations):
    """Mask-predict written out with the full forward (every position's logits) and Python lists."""
    ids = tok.encode(prompt).input_ids[:-1]
    start, draft, sure = len(ids), [tok.mask_id] * n, [0.0] * n
    for t in range(iterations):
        k = n * (iterations - t) // iterations
        if k == 0:
            break
        if t > 0:
            for j in sorted(range(n), key=lambda j: (sure[j], j))[:k]:
                draft[j] = tok.mask_id
        with torch.no_grad():
            logits = model(torch.tensor([ids + draft + [tok.sep_id]])).mlm_logits[0]
        probs = logits.softmax(-1)
        logits[:, sorted(tok.special_ids)] = float("-inf")
        for j in [j for j in range(n) if draft[j] == tok.mask_id]:
            best = int(logits[start + j].argmax())
            draft[j], sure[j] = best, float(probs[start + j, best])
    return tok.convert_ids_to_tokens(draft)


def test_generate_by_refilling_is_mask_predict(data):
    tok = data.tokenizer
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=tok.vocab_size,
                                                 max_position_embeddings=32), seed=0).eval()
    for iterations in (1, 3, 6):
        out = generate_by_refilling(model, tok, "the cat sat", num_tokens=6, iterations=iterations)
        assert out == _refill_by_hand(model, tok, "the cat sat", 6, iterations)
        assert len(out) == 6 and not set(tok.convert_tokens_to_ids(out)) & set(tok.special_ids)
    with pytest.raises(ValueError, match="iterations"):
        generate_by_refilling(model, tok, "the cat", num_tokens=3, iterations=0)
    with pytest.raises(ValueError, match="num_tokens"):
        generate_by_refilling(model, tok, "the cat", num_tokens=0)
