"""A padded batch of two-segment sequences with a set M, for the model tests: each row has its own
length (the rest is padding, id 0), its second half is segment B, and about 30% of its real
positions are in M."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def padded_batch(g: torch.Generator, T: int, V: int, lengths: Sequence[int]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, token_type_ids, attention_mask, masked), each [len(lengths), T]."""
    B = len(lengths)
    ids = torch.randint(5, V, (B, T), generator=g)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    for b, n in enumerate(lengths):
        attention_mask[b, :n] = 1
        token_type_ids[b, n // 2:n] = 1
        ids[b, n:] = 0
    masked = (torch.rand(B, T, generator=g) < 0.3) & attention_mask.bool()
    return ids, token_type_ids, attention_mask, masked
