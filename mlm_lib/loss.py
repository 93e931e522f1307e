"""The masked language modelling loss, one function per piece of the formula

    L = -sum_{i in M} log P(x_i | x_\\M),    P(. | x_\\M) = softmax over the whole vocabulary V

where M is the set of masked positions and x_\\M the corrupted input the model sees.

Labels come in two layouts, matching the two modes of ``BertForPreTraining``:
- 1-D ``[|M|]`` aligned with masked-only logits ``[|M|, V]``;
- ``[B, T]`` with ``IGNORE_INDEX`` (-100) outside M, aligned with full-position logits ``[B, T, V]``.
Positions labelled ``IGNORE_INDEX`` (everything outside M, padding included) never contribute.

Training computes the same -log P(x_i | x_\\M) without keeping the logits: :func:`masked_nll`,
last in this file, fuses the decoder, the log-softmax and the gather into one step (tested equal
to the plain functions above).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

IGNORE_INDEX = -100  # the label of a position outside M: the value PyTorch's cross-entropy skips


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """log P(w | x_\\M) for every word w of V: a log-softmax over the last dimension."""
    return torch.log_softmax(logits.float(), dim=-1)


def _in_m(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the rows of ``logits`` whose label is in M: ([|M|, V], [|M|])."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"labels shape {tuple(labels.shape)} does not match logits "
                         f"{tuple(logits.shape)} without its vocabulary dimension")
    in_m = labels != IGNORE_INDEX
    if labels.dim() == 1 and bool(in_m.all()):  # masked-only logits: already just M, skip the copy
        return logits, labels
    return logits[in_m], labels[in_m]


def target_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log P(x_i | x_\\M) for each i in M: the log-probability of the original token x_i.

    Returns a 1-D tensor with one entry per position in M (IGNORE_INDEX positions are dropped).
    """
    logits, targets = _in_m(logits, targets)
    if targets.numel() and (targets.min() < 0 or targets.max() >= logits.size(-1)):
        raise ValueError(f"targets must be token ids in [0, {logits.size(-1)}) or {IGNORE_INDEX}")
    return log_probs(logits).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def mlm_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L = -sum_{i in M} log P(x_i | x_\\M), exactly. An empty M gives 0 (an empty sum)."""
    return -target_log_probs(logits, labels).sum()


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L / |M|: the mean over the masked tokens of the batch, the loss we train on.

    Dividing by |M| makes the loss (and the gradient's scale, hence the learning rate) independent
    of batch size and sequence length; it is what BERT and Hugging Face report. Unlike
    ``F.cross_entropy(reduction="mean")``, which gives 0/0 = NaN when every label is ignored, an
    empty M gives exactly 0 with zero gradients: we divide by max(|M|, 1).
    """
    num_masked = (labels != IGNORE_INDEX).sum().clamp(min=1)
    return mlm_loss_sum(logits, labels) / num_masked


def nsp_loss(nsp_logits: torch.Tensor, is_next: torch.Tensor) -> torch.Tensor:
    """-mean log P(IsNext or NotNext | [CLS]), the next sentence prediction loss.

    ``is_next`` is 1 (True) when sentence B really follows A. Column 0 of ``nsp_logits`` is IsNext,
    as in Google's checkpoints, so the class index is ``1 - is_next``.
    """
    if nsp_logits.dim() != 2 or nsp_logits.size(-1) != 2 or is_next.shape != nsp_logits.shape[:1]:
        raise ValueError(f"nsp_logits must be [B, 2] and is_next [B], got {tuple(nsp_logits.shape)} "
                         f"and {tuple(is_next.shape)}")
    return F.cross_entropy(nsp_logits.float(), nsp_class(is_next))


def nsp_class(is_next: torch.Tensor) -> torch.Tensor:
    """NSP logits put IsNext in column 0 (Google's order), so the class index is 1 - is_next."""
    return 1 - is_next.long()


# ---------------------------------------------------------------- the fused masked NLL

class _MaskedNLL(torch.autograd.Function):
    """-log P(x_i | x_\\M) for each row of M straight from the hidden vectors (see
    :func:`masked_nll`). Forward: logits z = h W^T + b, one row of V scores per masked token; one
    max pass over each row gives the stabiliser *and* the prediction; the softmax is computed once,
    in place, and turned into dL/dz = softmax - one-hot right away. Backward is then just the two
    matrix products."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            dt = torch.promote_types(hidden.dtype, torch.float32)  # at least fp32 under AMP
            h, W, b = hidden.to(dt), weight.to(dt), bias.to(dt)
            z = torch.addmm(b, h, W.t())  # [|M|, V]
            top, predictions = z.max(dim=1)
            rows = torch.arange(h.size(0), device=h.device)
            target_logit = z[rows, targets]
            p = z.sub_(top[:, None]).exp_()
            total = p.sum(dim=1)
            nll = total.log() + top - target_logit  # logsumexp(z) - z[x_i]
            p.div_(total[:, None])
            p[rows, targets] -= 1.0  # d nll_i / d z_i
        ctx.save_for_backward(h, W, p)
        ctx.dtypes = (hidden.dtype, weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(predictions)
        return nll, predictions

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor, _grad_predictions: torch.Tensor | None):
        h, W, dz = ctx.saved_tensors
        g = grad_nll.to(dz.dtype)
        with torch.autocast(device_type=h.device.type, enabled=False):
            grad_h = (dz @ W) * g[:, None]  # scale the small matrices, never dz itself
            grad_W = dz.t() @ (h * g[:, None])
            grad_b = g @ dz
        dh, dw, db = ctx.dtypes
        return grad_h.to(dh), grad_W.to(dw), grad_b.to(db), None


def masked_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-log P(x_i | x_\\M) for each i in M, and the arg-max prediction, without keeping logits.

    ``hidden`` is [|M|, H] (the MLM head's transformed vectors at the masked positions),
    ``weight`` [V, H] the decoder (BERT's tied word embeddings), ``bias`` [V], ``targets`` [|M|].
    The numbers are those of ``-target_log_probs(F.linear(hidden, weight, bias), targets)``; the
    fused version makes two passes over the [|M|, V] scores instead of the six or so of linear +
    log-softmax + gather and their backward (``test_loss`` checks the values and gradients
    against the plain functions).
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be [|M|, H] and targets [|M|], got {tuple(hidden.shape)} "
                         f"and {tuple(targets.shape)}")
    if weight.dim() != 2 or weight.size(1) != hidden.size(1) or bias.shape != weight.shape[:1]:
        raise ValueError(f"weight must be [V, {hidden.size(1)}] and bias [V], got "
                         f"{tuple(weight.shape)} and {tuple(bias.shape)}")
    if targets.device.type == "cpu" and targets.numel() and (
            targets.min() < 0 or targets.max() >= weight.size(0)):  # free on a CPU only
        raise ValueError(f"targets must be token ids in [0, {weight.size(0)})")
    return _MaskedNLL.apply(hidden, weight, bias, targets.long())
