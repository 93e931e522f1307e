"""The loss functions against the formula L = -sum_{i in M} log P(x_i | x_\\M), written out by hand."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mlm_lib.loss import (IGNORE_INDEX, log_probs, masked_nll, mlm_loss, mlm_loss_sum, nsp_class,
                          nsp_loss, target_log_probs)
from mlm_lib.numerics import assert_same_function, tolerance


def full_layout(seed=0, B=2, T=6, V=11, p=0.4):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 3
    targets = torch.randint(0, V, (B, T), generator=g)
    masked = torch.rand(B, T, generator=g) < p
    masked[0, 0] = True
    labels = torch.where(masked, targets, torch.full_like(targets, IGNORE_INDEX))
    return logits, labels, masked


def test_log_probs_is_a_distribution_over_the_vocabulary():
    logits, _, _ = full_layout()
    lp = log_probs(logits)
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(2, 6))
    # Adding a constant to every score does not change P.
    torch.testing.assert_close(log_probs(logits + 5.0), lp)


def test_loss_sum_is_the_formula():
    logits, labels, masked = full_layout()
    by_hand = 0.0
    for b, t in masked.nonzero().tolist():
        scores = logits[b, t].tolist()
        log_z = math.log(sum(math.exp(s) for s in scores))
        by_hand -= scores[labels[b, t]] - log_z
    assert mlm_loss_sum(logits, labels).item() == pytest.approx(by_hand, rel=1e-5)
    assert target_log_probs(logits, labels).shape == (int(masked.sum()),)


def test_two_layouts_and_normalisation_agree():
    logits, labels, masked = full_layout(seed=1)
    only, targets = logits[masked], labels[masked]
    torch.testing.assert_close(mlm_loss_sum(only, targets), mlm_loss_sum(logits, labels))
    torch.testing.assert_close(mlm_loss(logits, labels), mlm_loss_sum(logits, labels) / masked.sum())
    # The normalised loss is what F.cross_entropy's mean (and Hugging Face) computes.
    torch.testing.assert_close(mlm_loss(logits, labels),
                               F.cross_entropy(logits.view(-1, 11), labels.view(-1)))


def test_positions_outside_m_never_contribute():
    logits, labels, masked = full_layout(seed=2)
    changed = logits.clone()
    changed[~masked] = torch.randn(int((~masked).sum()), 11) * 100
    assert mlm_loss_sum(changed, labels).item() == mlm_loss_sum(logits, labels).item()
    logits.requires_grad_(True)
    mlm_loss(logits, labels).backward()
    assert logits.grad[~masked].abs().max() == 0 and logits.grad[masked].abs().max() > 0


@pytest.mark.parametrize("layout", ["full", "masked_only"])
def test_empty_m_is_exactly_zero_with_zero_grads(layout):
    logits = torch.randn(2, 6, 11, requires_grad=True)
    for fn in (mlm_loss_sum, mlm_loss):
        if layout == "full":
            x, labels = logits, torch.full((2, 6), IGNORE_INDEX)
        else:
            x, labels = logits[torch.zeros(2, 6, dtype=torch.bool)], torch.zeros(0, dtype=torch.long)
        loss = fn(x, labels)
        assert loss.item() == 0.0 and not torch.isnan(loss)
        (grad,) = torch.autograd.grad(loss, logits)
        assert grad.abs().max() == 0
    # What mlm_loss avoids: a plain mean over all-ignored labels is 0/0.
    assert torch.isnan(F.cross_entropy(logits.view(-1, 11), torch.full((12,), IGNORE_INDEX)))


def test_nsp_loss_and_sum():
    nsp_logits = torch.tensor([[2.0, -1.0], [0.5, 1.5], [0.0, 0.0]])
    is_next = torch.tensor([1, 0, 1])
    # Column 0 is IsNext: the class index is 1 - is_next.
    torch.testing.assert_close(nsp_loss(nsp_logits, is_next),
                               F.cross_entropy(nsp_logits, torch.tensor([0, 1, 0])))
    assert nsp_loss(torch.tensor([[10.0, -10.0]]), torch.tensor([True])).item() < 1e-6
    assert nsp_class(is_next).tolist() == [0, 1, 0]


def test_bad_shapes_and_targets_raise():
    logits, labels, _ = full_layout()
    with pytest.raises(ValueError, match="labels shape"):
        mlm_loss(logits, labels[:, :3])
    with pytest.raises(ValueError, match="targets"):
        mlm_loss(logits, torch.full_like(labels, 11))
    with pytest.raises(ValueError, match="nsp_logits"):
        nsp_loss(torch.zeros(3, 3), torch.zeros(3, dtype=torch.long))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 8), v=st.integers(2, 20), seed=st.integers(0, 2**16))
def test_matches_cross_entropy_sum(n, v, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, v, generator=g) * 4
    targets = torch.randint(0, v, (n,), generator=g)
    expected = F.cross_entropy(logits, targets, reduction="sum")
    assert_same_function(mlm_loss_sum(logits, targets), expected)
    assert_same_function(mlm_loss(logits, targets), expected / max(n, 1))


def _plain_nll(h, W, b, targets):
    return -target_log_probs(F.linear(h, W, b), targets)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_nll_gives_the_plain_numbers_and_gradients(dtype):
    g = torch.Generator().manual_seed(0)
    h = (torch.randn(9, 16, generator=g, dtype=dtype) * 2).requires_grad_()
    W = torch.randn(50, 16, generator=g, dtype=dtype).requires_grad_()
    b = torch.randn(50, generator=g, dtype=dtype).requires_grad_()
    targets = torch.randint(0, 50, (9,), generator=g)
    weights = torch.rand(9, generator=g, dtype=dtype)  # a non-uniform upstream gradient
    grads = []
    for fn in (_plain_nll, lambda *a: masked_nll(*a)[0]):
        nll = fn(h, W, b, targets)
        (nll * weights).sum().backward()
        grads.append((nll.detach(), h.grad.clone(), W.grad.clone(), b.grad.clone()))
        h.grad = W.grad = b.grad = None
    for plain, fused in zip(*grads):
        assert fused.dtype == dtype
        # log_probs computes in fp32 whatever the input dtype, so fp32 rounding bounds both cases
        assert_same_function(fused.float(), plain.float())
    _, pred = masked_nll(h, W, b, targets)
    scores = F.linear(h, W, b).detach()
    top2 = scores.topk(2, dim=-1).values
    decided = (top2[:, 0] - top2[:, 1]) > 2 * tolerance(scores)  # a near tie may go either way
    assert torch.equal(pred[decided], scores.argmax(-1)[decided])


def test_masked_nll_is_stable_and_handles_an_empty_m():
    h = torch.zeros(2, 4)
    W = torch.zeros(6, 4)
    b = torch.tensor([1000.0, 0, 0, 0, 0, -1000.0])  # would overflow a naive exp
    nll, pred = masked_nll(h, W, b, torch.tensor([0, 5]))
    assert torch.isfinite(nll).all() and nll[0].item() == pytest.approx(0.0, abs=1e-6)
    assert nll[1].item() == pytest.approx(2000.0, rel=1e-6)
    assert pred.tolist() == [0, 0]
    h0 = torch.zeros(0, 4, requires_grad=True)
    W0 = torch.randn(6, 4, requires_grad=True)
    nll, _ = masked_nll(h0, W0, torch.zeros(6, requires_grad=True), torch.zeros(0, dtype=torch.long))
    nll.sum().backward()
    assert nll.shape == (0,) and W0.grad.abs().sum().item() == 0.0


def test_masked_nll_rejects_bad_shapes_and_ids():
    h, W, b = torch.zeros(3, 4), torch.zeros(6, 4), torch.zeros(6)
    with pytest.raises(ValueError, match="targets must be token ids"):
        masked_nll(h, W, b, torch.tensor([0, 1, 6]))
    with pytest.raises(ValueError, match="hidden must be"):
        masked_nll(h, W, b, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="weight must be"):
        masked_nll(h, torch.zeros(6, 5), b, torch.tensor([0, 1, 2]))
