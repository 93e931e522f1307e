"""The chapters' experiments: tiny, seeded, and behaving as the chapters say they do."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.batches import masked_batches
from mlm_lib.book.experiments import (generate_left_to_right, plot_attention, position_similarity,
                                 score, token_windows, train_next_token, train_micro)
from mlm_lib.masking import Corruption
from mlm_lib.model import BertConfig, BertForPreTraining, attention_bias
from mlm_lib.pretraining import PreparedData, PretrainingExample
from mlm_lib.book.book_model import book_tokenizer

torch.set_num_threads(2)

SENTENCES = [
    "the cat sat on the mat and looked at the door",
    "a dog ran across the park to find the ball",
    "the river flows into the sea near the old town",
    "she wrote a letter to her brother in the city",
    "the king of the country lived in a large castle",
    "many people visit the museum during the summer",
]


@pytest.fixture(scope="module")
def data() -> PreparedData:
    """A few dozen short examples with the book's tokenizer: fast, and enough to overfit."""
    tok = book_tokenizer()
    examples = []
    for k in range(8):
        for s in SENTENCES:
            ids = tok.encode(s).input_ids
            examples.append(PretrainingExample(ids, [0] * len(ids), 1))
    return PreparedData(tok, examples[:40], examples[40:], [])


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


def test_attention_bias_causal_and_bidirectional():
    causal, both = attention_bias(4, causal=True), attention_bias(4, causal=False)
    assert causal.shape == both.shape == (1, 1, 4, 4)
    assert bool((both == 0).all())
    upper = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert bool((causal[0, 0][upper] < -1e30).all()) and bool((causal[0, 0][~upper] == 0).all())
    with pytest.raises(ValueError, match="seq_len"):
        attention_bias(0, causal=True)


def test_next_token_training_learns_and_logs_every_ten_steps(data):
    run = train_next_token(causal=True, steps=35, seq_len=8, batch_size=8, lr=1e-2, data=data)
    assert run.steps == [10, 20, 30, 35] and len(run.train_loss) == 4
    assert run.train_loss[-1] < run.train_loss[0] - 1.0
    assert 0.0 <= run.valid_accuracy <= 1.0 and run.valid_loss > 0
    again = train_next_token(causal=True, steps=35, seq_len=8, batch_size=8, lr=1e-2, data=data)
    assert again.train_loss == run.train_loss


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


def test_position_similarity_and_plot():
    table = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    sim = position_similarity(table)
    assert torch.allclose(sim.diagonal(), torch.ones(5), atol=1e-6)
    assert torch.allclose(sim, sim.T)
    with pytest.raises(ValueError, match="position table"):
        position_similarity(torch.zeros(3))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    plot_attention(ax, torch.full((3, 3), 1 / 3), ["a", "b", "c"], "t", highlight=[1])
    with pytest.raises(ValueError, match="attention"):
        plot_attention(ax, torch.zeros(2, 2), ["a", "b", "c"])
    plt.close(fig)


def test_bad_steps_are_value_errors(data):
    with pytest.raises(ValueError, match="steps"):
        train_micro(steps=0, data=data)
    with pytest.raises(ValueError, match="steps"):
        train_next_token(causal=True, steps=0, data=data)
