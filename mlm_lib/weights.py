"""BERT's initial weights: every weight drawn from a normal cut at two standard deviations, as
Google's TensorFlow BERT drew them, biases at zero, LayerNorm gains at one. ``mlm_lib.model``
builds every module through :func:`init_bert_weights`; the new heads of fine-tuning and ELECTRA
start the same way."""

from __future__ import annotations

import torch
from torch import nn

# A weight is drawn from a normal cut at this many standard deviations, as TensorFlow's
# truncated_normal_initializer (used by Google's BERT) does.
TRUNCATE_AT_STD = 2.0


def seeded_generator(seed: int | None) -> torch.Generator | None:
    """A CPU generator seeded with ``seed``, or None (the global RNG) when no seed is given."""
    return torch.Generator().manual_seed(seed) if seed is not None else None


def init_bert_weights(module: nn.Module, std: float, generator: torch.Generator | None = None) -> None:
    """BERT's initialisation: weights ~ truncated normal(0, std) cut at +-2 std, biases 0, LayerNorm 1/0.

    Google's TensorFlow BERT used ``tf.truncated_normal_initializer(0.02)``, which is what we do;
    Hugging Face uses a plain (untruncated) normal. The padding row of the token embedding starts
    at zero, as in ``nn.Embedding(padding_idx=...)``.
    """
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            truncated_normal_(m.weight, std, generator)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for name, p in module.named_parameters():
        if name.endswith("predictions_bias"):
            nn.init.zeros_(p)


def truncated_normal_(t: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill ``t`` with normal(0, std) values cut at +-2 std, redrawing those outside (as TensorFlow
    does). Faster on CPU than ``nn.init.trunc_normal_``, whose inverse-CDF method is slow there."""
    if t.is_meta:  # shapes only (e.g. counting parameters): nothing to fill
        return t
    if generator is not None and generator.device != t.device:  # e.g. built under a cuda device
        with torch.no_grad():
            return t.copy_(truncated_normal_(torch.empty(t.shape, dtype=t.dtype), std, generator))
    limit = TRUNCATE_AT_STD * std
    with torch.no_grad():
        t.normal_(0.0, std, generator=generator)
        bad = t.abs() > limit
        values = torch.empty(int(bad.sum()), dtype=t.dtype, device=t.device)
        redo = torch.ones_like(values, dtype=torch.bool)
        while redo.any():
            values[redo] = std * torch.randn(int(redo.sum()), generator=generator, dtype=t.dtype,
                                             device=t.device)
            redo = values.abs() > limit
        t[bad] = values
    return t
