"""Training fast paths: the numbers of the plain model and loss, with less work.

:class:`~mlm_lib.model.BertForPreTraining` followed by :func:`~mlm_lib.loss.mlm_loss_sum` is the
plain path, the one the chapters print. Training calls :class:`FastPretraining` instead, which
gives the same per-token losses and gradients (``tests/test_model.py`` checks both to rounding)
through two shortcuts:

1. *The last layer on the rows the heads read.* The MLM head reads only the rows of M and the NSP
   head only [CLS], so the last layer computes its queries, and everything after attention, for
   those rows only; its keys and values still come from every position.
2. *The fused masked NLL* (:func:`~mlm_lib.loss.masked_nll`): -log P(x_i | x_\\M) straight from the
   hidden vectors, without keeping the [|M|, V] logits for autograd.

``benchmarks/bench_model.py`` measures what they buy, side by side with the plain path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mlm_lib.loss import masked_nll, target_log_probs
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


def layer_on_rows(layer: BertLayer, x: torch.Tensor, bias: torch.Tensor | None,
                  index: torch.Tensor) -> torch.Tensor:
    """``layer(x, bias)`` computed only for the query rows ``index`` [B, Q]: [B, Q, H]."""
    attn = layer.attention
    B, T, H = x.shape
    xq = x.gather(1, index[..., None].expand(-1, -1, H))
    W, b = attn.qkv.weight, attn.qkv.bias
    q = F.linear(xq, W[:H], b[:H]).view(B, -1, attn.num_heads, attn.head_dim).transpose(1, 2)
    k, v = F.linear(x, W[H:], b[H:]).view(B, T, 2, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    a, _ = attn.attend(q, k, v, bias)
    return layer.after_attention(xq, a)


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
        rows = layer_on_rows(bert.layers[-1], x, bias, index)  # [B, Q, H], [CLS] first
        h = rows[in_m]  # [|M|, H], still in the row-major order of M
        decoder = bert.embeddings.word_embeddings.weight
        if self.fused_loss:
            nll, predictions = masked_nll(heads.transform_hidden(h), decoder,
                                          heads.predictions_bias, targets)
        else:
            logits = heads.mlm_logits(h, decoder).float()
            nll, predictions = -target_log_probs(logits, targets), logits.argmax(-1)
        return FastOutput(nll, predictions, heads.seq_relationship(bert.pool(rows)))
