"""ELECTRA's replaced token detection: the discriminator loss against a hand computation, the
corruption step, the combined objective, the unigram generator, the AUC, a discriminator that
learns, and bad input named."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mlm_lib.config import BertConfig
from mlm_lib.electra import (DISC_WEIGHT, Electra, ElectraDiscriminator, UnigramGenerator, corrupt,
                             discriminator_loss, discriminator_loss_sum, original_tokens, roc_auc,
                             sample_replacements)
from mlm_lib.loss import IGNORE_INDEX, mlm_loss
from mlm_lib.model import BertForPreTraining
from mlm_lib.optim import build_optimizer

VOCAB, MASK = 24, 3  # ids 0-3 are special ([PAD], [CLS], [SEP], [MASK]) in these toys


def tiny_config() -> BertConfig:
    return BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, initializer_range=0.2)


def mlm_batch(seed: int = 0, rows: int = 4, length: int = 8) -> dict[str, torch.Tensor]:
    """Rows of real tokens (ids 4-13), the last row padded by two, a third of positions in M."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(4, 14, (rows, length), generator=g)
    attention_mask = torch.ones_like(x)
    attention_mask[-1, -2:] = 0
    x[-1, -2:] = 0
    masked = (torch.rand(rows, length, generator=g) < 0.35) & attention_mask.bool()
    masked[0, 1] = True
    return {"input_ids": torch.where(masked, torch.full_like(x, MASK), x),
            "labels": torch.where(masked, x, torch.full_like(x, IGNORE_INDEX)),
            "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(x)}


def test_the_discriminator_loss_has_one_term_per_real_position():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, generator=g)
    is_original = torch.tensor([[1, 0, 1, 1, 1], [1, 1, 0, 1, 1]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    hand = 0.0
    for b, t in itertools.product(range(2), range(5)):
        if attention_mask[b, t]:
            d = 1 / (1 + math.exp(-float(logits[b, t])))  # D(x, t) = P(original)
            hand -= math.log(d) if is_original[b, t] else math.log(1 - d)
    total = discriminator_loss_sum(logits, is_original, attention_mask)
    assert math.isclose(float(total), hand, rel_tol=1e-5)
    assert math.isclose(float(discriminator_loss(logits, is_original, attention_mask)), hand / 8,
                        rel_tol=1e-5)
    # Padding is not a position: whatever its logits, the loss does not move.
    moved = logits.clone()
    moved[1, 3:] = 50.0
    assert float(discriminator_loss_sum(moved, is_original, attention_mask)) == float(total)


def test_corrupt_replaces_m_only_and_a_lucky_sample_is_original():
    x = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    masked = torch.tensor([[False, True, False, True], [True, False, False, False]])
    x_corrupt, is_original = corrupt(x, masked, torch.tensor([20, 8, 9]))
    assert x_corrupt.tolist() == [[5, 20, 7, 8], [9, 10, 11, 12]]
    # position (0, 3) was masked, but the sample equals the original: labelled original
    assert is_original.tolist() == [[1, 0, 1, 1], [1, 1, 1, 1]]
    with pytest.raises(ValueError, match="one sample per masked position"):
        corrupt(x, masked, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="bool tensor"):
        corrupt(x, masked.long(), torch.tensor([1, 2, 3]))


def test_samples_follow_the_softmax_and_are_reproducible():
    logits = torch.full((3, VOCAB), -1e4)
    logits[0, 7], logits[1, 9], logits[2, 11] = 0.0, 0.0, 0.0  # all the mass on one token per row
    assert sample_replacements(logits).tolist() == [7, 9, 11]
    flat = torch.zeros(2000, VOCAB)
    draws = [sample_replacements(flat, torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(draws[0], draws[1])
    share = torch.bincount(draws[0], minlength=VOCAB).float() / 2000
    assert float((share - 1 / VOCAB).abs().max()) < 0.03  # uniform logits, uniform samples


def test_a_fixed_generator_gets_no_gradient_and_the_objective_is_l_disc():
    torch.manual_seed(0)
    gen = BertForPreTraining(tiny_config(), seed=0)
    disc = ElectraDiscriminator.from_scratch(tiny_config(), seed=1)
    electra = Electra(gen, disc, train_generator=False, sample_seed=3).train()
    b = mlm_batch()
    loss, sums = electra.objective(b)
    loss.backward()
    assert all(p.grad is None for p in gen.parameters())
    # every weight the discriminator uses learns (the pooler reads [CLS] for tasks, not for D)
    assert all(p.grad is not None for n, p in disc.named_parameters() if "pooler" not in n)
    assert not gen.training  # a fixed generator samples without dropout
    # The same samples again (same sample seed): the loss is L_Disc of those samples.
    again = Electra(gen, disc, train_generator=False, sample_seed=3)
    x_corrupt, is_original, mlm = again.corrupt_batch(b)
    assert mlm is None
    logits = disc(x_corrupt, b["token_type_ids"], b["attention_mask"])
    by_hand = discriminator_loss(logits, is_original, b["attention_mask"])
    assert math.isclose(float(loss.detach()), float(by_hand.detach()), rel_tol=1e-5)
    masked = b["labels"] != IGNORE_INDEX
    assert torch.equal(x_corrupt[~masked], original_tokens(b)[~masked])  # only M changes
    n = int(b["attention_mask"].sum())
    assert sums["disc_loss"][1] == n and int(sums["replaced"][0]) == int((1 - is_original)[b["attention_mask"].bool()].sum())


def test_joint_training_adds_lambda_times_l_disc_to_the_mlm_loss():
    gen = BertForPreTraining(tiny_config(), seed=0)
    disc = ElectraDiscriminator.from_scratch(tiny_config(), seed=1)
    b = mlm_batch(seed=2)
    loss, sums = Electra(gen, disc, sample_seed=4).objective(b)
    masked = b["labels"] != IGNORE_INDEX
    gen_logits = gen(b["input_ids"], b["token_type_ids"], b["attention_mask"],
                     masked_positions=masked).mlm_logits
    x_corrupt, is_original, _ = Electra(gen, disc, train_generator=False, sample_seed=4).corrupt_batch(b)
    d_logits = disc(x_corrupt, b["token_type_ids"], b["attention_mask"])
    expected = (mlm_loss(gen_logits, b["labels"][masked])
                + DISC_WEIGHT * discriminator_loss(d_logits, is_original, b["attention_mask"]))
    assert math.isclose(float(loss.detach()), float(expected.detach()), rel_tol=1e-5)
    assert "mlm_loss" in sums
    loss.backward()
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in gen.parameters())


def test_the_unigram_generator_samples_by_frequency_and_never_a_special_token():
    gen = UnigramGenerator.from_sequences([[1, 4, 4, 4, 5, 2], [1, 4, 5, 2]], VOCAB, [0, 1, 2, 3])
    samples = sample_replacements(gen(4000), torch.Generator().manual_seed(0))
    assert set(samples.tolist()) == {4, 5}
    assert abs(float((samples == 4).float().mean()) - 4 / 6) < 0.03
    with pytest.raises(ValueError, match="not all 0"):
        UnigramGenerator(torch.zeros(VOCAB))
    with pytest.raises(ValueError, match="nothing to train"):
        Electra(gen, ElectraDiscriminator.from_scratch(tiny_config()))


def test_auc_against_every_pair():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (60,), generator=g).float()  # many ties
    positive = torch.rand(60, generator=g) < 0.3
    pos, neg = scores[positive], scores[~positive]
    pairs = (pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()
    assert math.isclose(roc_auc(scores, positive), float(pairs.mean()), rel_tol=1e-9)
    assert roc_auc(torch.tensor([0.1, 0.9]), torch.tensor([False, True])) == 1.0
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(torch.tensor([0.1, 0.9]), torch.tensor([True, True]))


def test_a_discriminator_learns_to_spot_out_of_place_tokens():
    """Sentences of ids 4-13 in a fixed cycle; the generator samples ids 14-23, which never occur
    in the data: a discriminator must learn to call them replaced, and it does."""
    gen = UnigramGenerator(torch.cat([torch.zeros(14), torch.ones(10)]))
    torch.manual_seed(0)
    disc = ElectraDiscriminator.from_scratch(tiny_config(), seed=0)
    electra = Electra(gen, disc, train_generator=False, sample_seed=0).train()
    optimizer = build_optimizer(disc, 3e-3)
    for step in range(60):
        loss, _ = electra.objective(mlm_batch(seed=step))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    b = mlm_batch(seed=999)
    with torch.no_grad():
        x_corrupt, is_original, _ = electra.corrupt_batch(b)
        logits = disc.eval()(x_corrupt, b["token_type_ids"], b["attention_mask"])
    real = b["attention_mask"].bool()
    assert roc_auc(-logits[real], is_original[real] == 0) == 1.0


def test_bad_input_is_named():
    gen = BertForPreTraining(tiny_config(), seed=0)
    other = BertConfig(**{**tiny_config().to_dict(), "vocab_size": VOCAB + 1})
    with pytest.raises(ValueError, match="different vocabularies"):
        Electra(gen, ElectraDiscriminator.from_scratch(other))
    with pytest.raises(ValueError, match="must be a BertForPreTraining or a UnigramGenerator"):
        Electra(gen.bert, ElectraDiscriminator.from_scratch(tiny_config()))
    with pytest.raises(ValueError, match="ElectraDiscriminator"):
        Electra(gen, gen)
    with pytest.raises(ValueError, match="disc_weight"):
        Electra(gen, ElectraDiscriminator.from_scratch(tiny_config()), disc_weight=0.0)
    with pytest.raises(ValueError, match="BertModel"):
        ElectraDiscriminator(gen)
    with pytest.raises(ValueError, match="BertForPreTraining"):
        ElectraDiscriminator.from_generator(gen.bert)
    with pytest.raises(ValueError, match="same shape"):
        discriminator_loss(torch.zeros(2, 3), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        discriminator_loss(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long),
                           torch.ones(2, 4, dtype=torch.long))
