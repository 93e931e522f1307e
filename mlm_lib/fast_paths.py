"""Training fast paths: the numbers of the plain model and loss, with less work.

:class:`~mlm_lib.model.BertForPreTraining` followed by :func:`~mlm_lib.loss.mlm_loss_sum` is the
plain path, the one the chapters print. Training calls :class:`FastPretraining` instead, which
gives the same per-token losses and gradients (``tests/test_model.py`` checks both to rounding;
with dropout the two paths draw different masks, as the last layer computes fewer rows) through
two shortcuts:

1. *The last layer on the rows the heads read.* The MLM head reads only the rows of M and the NSP
   head only [CLS], so the last layer computes its queries, and everything after attention, for
   those rows only; its keys and values still come from every position.
2. *The fused masked NLL* (:func:`masked_nll`): -log P(x_i | x_\\M) straight from the hidden
   vectors, without keeping the [|M|, V] logits for autograd.

``benchmarks/bench_model.py`` measures what they buy, side by side with the plain path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from mlm_lib.loss import target_log_probs
from mlm_lib.model import BertForPreTraining, BertLayer


@dataclass
class FastOutput:
    mlm_nll: torch.Tensor  # [|M|], -log P(x_i | x_\M) in the row-major order of M
    mlm_predictions: torch.Tensor  # [|M|], the arg-max token ids
    nsp_logits: torch.Tensor  # [B, 2]


def rows_the_heads_read(masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions the heads need, per sequence: [CLS] (position 0) then M in order, padded to the
    longest. Returns the index [B, Q] and a bool [B, Q] marking the entries that are in M."""
    needed = masked.clone()
    needed[:, 0] = True
    Q = int(needed.sum(1).max())
    # A stable sort puts the needed positions first, in increasing order; the tail is filler.
    index = torch.sort((~needed).to(torch.uint8), dim=1, stable=True).indices[:, :Q]
    real = torch.arange(Q, device=masked.device) < needed.sum(1, keepdim=True)
    return index, masked.gather(1, index) & real


def _layer_on_rows(layer: BertLayer, x: torch.Tensor, bias: torch.Tensor | None,
                   index: torch.Tensor) -> torch.Tensor:
    """``layer(x, bias)`` computed only for the query rows ``index`` [B, Q]: [B, Q, H]."""
    attn = layer.attention
    B, T, H = x.shape
    rows = index[..., None].expand(-1, -1, H)
    W, b = attn.qkv.weight, attn.qkv.bias
    q = F.linear(x.gather(1, rows), W[:H], b[:H]).view(B, -1, attn.num_heads, attn.head_dim)
    k, v = F.linear(x, W[H:], b[H:]).view(B, T, 2, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    a, _ = attn.attend(q.transpose(1, 2), k, v, bias)
    # The residual gathers its rows separately from the queries, so that the two gradients reach
    # x as two sums, in the order mlm_lib has always added them (the same numbers to the last bit).
    return layer.after_attention(x.gather(1, rows), a)


class FastPretraining(nn.Module):
    """The training forward of a :class:`BertForPreTraining` together with its MLM loss terms.

    It is a module so that DDP and ``torch.compile`` can wrap it like the model itself; it owns no
    parameters of its own. ``fused_loss=False`` keeps shortcut 1 and computes the loss the plain
    way (logits, log-softmax, gather)."""

    def __init__(self, model: BertForPreTraining, fused_loss: bool = True) -> None:
        super().__init__()
        self.model = model
        self.fused_loss = fused_loss

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                attention_mask: torch.Tensor, masked: torch.Tensor, targets: torch.Tensor
                ) -> FastOutput:
        """``targets`` [|M|] are the original tokens of M (``labels[masked]`` of the batch)."""
        bert, heads = self.model.bert, self.model.cls
        index, in_m = rows_the_heads_read(masked)
        x, bias = bert.embed(input_ids, token_type_ids, attention_mask)
        for layer in bert.layers[:-1]:
            x, _ = layer(x, bias)
        rows = _layer_on_rows(bert.layers[-1], x, bias, index)  # [B, Q, H], [CLS] first
        h = rows[in_m]  # [|M|, H], still in the row-major order of M
        decoder = bert.embeddings.word_embeddings.weight
        if self.fused_loss:
            nll, predictions = masked_nll(heads.transform_hidden(h), decoder,
                                          heads.predictions_bias, targets)
        else:
            logits = heads.mlm_logits(h, decoder).float()
            nll, predictions = -target_log_probs(logits, targets), logits.argmax(-1)
        return FastOutput(nll, predictions, heads.seq_relationship(bert.pool(rows)))


# ---------------------------------------------------------------- 2. the fused masked NLL

class _MaskedNLL(torch.autograd.Function):
    """-log P(x_i | x_\\M) for each row of M straight from the hidden vectors (see
    :func:`masked_nll`). Forward: logits z = W h + b, laid out [V, |M|] (one column per masked
    token, the faster layout for this product on CPU); one max pass gives the stabiliser *and* the
    prediction; the softmax is computed once, in place, and turned into dL/dz = softmax - one-hot
    right away. Backward is then just the two matrix products."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            dt = torch.promote_types(hidden.dtype, torch.float32)  # at least fp32 under AMP
            h, W, b = hidden.to(dt), weight.to(dt), bias.to(dt)
            z = torch.addmm(b[:, None], W, h.t())  # [V, |M|]
            top, predictions = z.max(dim=0)
            cols = torch.arange(h.size(0), device=h.device)
            target_logit = z[targets, cols]
            p = z.sub_(top).exp_()
            total = p.sum(dim=0)
            nll = total.log() + top - target_logit  # logsumexp(z) - z[x_i]
            p.div_(total)
            p[targets, cols] -= 1.0  # d nll_i / d z_i
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
            grad_h = (dz.t() @ W) * g[:, None]  # scale the small matrices, never dz itself
            grad_W = dz @ (h * g[:, None])
            grad_b = dz @ g
        dh, dw, db = ctx.dtypes
        return grad_h.to(dh), grad_W.to(dw), grad_b.to(db), None


def masked_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-log P(x_i | x_\\M) for each i in M, and the arg-max prediction, without keeping logits.

    ``hidden`` is [|M|, H] (the MLM head's transformed vectors at the masked positions),
    ``weight`` [V, H] the decoder (BERT's tied word embeddings), ``bias`` [V], ``targets`` [|M|].
    The numbers are those of ``-target_log_probs(F.linear(hidden, weight, bias), targets)``; the
    fused version is a training fast path: it makes two passes over the [|M|, V] scores instead
    of the six or so of linear + log-softmax + gather and their backward (``test_loss`` checks the
    values and gradients against the plain functions).
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
