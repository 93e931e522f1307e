"""Choosing the set M and corrupting it, BERT's way (80% [MASK], 10% random, 10% unchanged).

Every position of every sequence is decided at once with tensor operations; the only Python
loop is over rows, and only for static masking. All randomness comes from an explicit
``torch.Generator`` so a chapter can redraw exactly the same picture.

Selection is per token with probability ``rate`` (as in Hugging Face's collator): the number
of masked tokens in a row is Binomial(real tokens, rate). With ``whole_word_starts`` a word's
pieces share one draw, so a word is masked entirely or not at all. ``max_predictions`` keeps,
in a random order, only as many chosen words as fit the cap; ``at_least_one`` masks one
candidate word in any row where the draw chose nothing (short sentences would otherwise give
no training signal).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

import torch

IGNORE_INDEX = -100  # label outside M, the value PyTorch's cross-entropy skips


@dataclass
class MaskedBatch:
    """What the loss needs (``input_ids``, ``labels``) and what a figure needs (the masks)."""

    input_ids: torch.Tensor   # the corrupted sequence x_\M, [B, T]
    labels: torch.Tensor      # original ids on M, IGNORE_INDEX elsewhere, [B, T]
    masked: torch.Tensor      # bool [B, T]: the set M
    replaced: torch.Tensor    # bool: in M and now [MASK]
    randomized: torch.Tensor  # bool: in M and now a random token
    kept: torch.Tensor        # bool: in M and left unchanged

    @property
    def num_masked(self) -> int:
        return int(self.masked.sum())


def _check(input_ids: torch.Tensor, vocab_size: int, rate, mask_prob: float, random_prob: float,
           keep_prob: float, max_predictions: int | None) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int32, torch.int64):
        raise ValueError("input_ids must be an integer torch.Tensor")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq_len], got shape {tuple(input_ids.shape)}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size):
        raise ValueError(f"input_ids must lie in [0, {vocab_size})")
    r = torch.as_tensor(rate, dtype=torch.float64)
    if r.numel() == 0 or bool((r <= 0).any()) or bool((r > 1).any()) or bool(torch.isnan(r).any()):
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    if r.dim() > 1 or (r.dim() == 1 and r.numel() != input_ids.shape[0]):
        raise ValueError("a per-row rate must be a 1-D tensor with one value per row")
    probs = (mask_prob, random_prob, keep_prob)
    if any(p < 0 or p > 1 for p in probs):
        raise ValueError(f"mask/random/keep proportions must each be in [0, 1], got {probs}")
    if abs(sum(probs) - 1.0) > 1e-6:
        raise ValueError(f"mask_prob + random_prob + keep_prob must sum to 1, got {sum(probs):.6g}")
    if max_predictions is not None and max_predictions < 1:
        raise ValueError(f"max_predictions must be at least 1, got {max_predictions}")


def mask_tokens(input_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int, special_ids: Iterable[int],
                attention_mask: torch.Tensor | None = None, rate: float | torch.Tensor = 0.15,
                mask_prob: float = 0.8, random_prob: float = 0.1, keep_prob: float = 0.1,
                whole_word_starts: torch.Tensor | None = None, at_least_one: bool = False,
                max_predictions: int | None = None, generator: torch.Generator | None = None) -> MaskedBatch:
    """Pick M among real, non-special tokens and corrupt it; see the module docstring.

    ``rate`` may be a float or a tensor with one rate per row. ``whole_word_starts`` is a bool
    [B, T] tensor, True where a word begins (False on ``##`` pieces). Random replacements are
    drawn uniformly from the non-special vocabulary.
    """
    _check(input_ids, vocab_size, rate, mask_prob, random_prob, keep_prob, max_predictions)
    ids = input_ids.long()
    B, T = ids.shape
    dev = ids.device
    special = torch.tensor(sorted({int(s) for s in special_ids}), dtype=torch.long, device=dev)
    cand = ~torch.isin(ids, special)
    if attention_mask is not None:
        if attention_mask.shape != ids.shape:
            raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape {tuple(ids.shape)}")
        cand &= attention_mask.bool()

    # Word groups: each position's word index; without whole-word masking every token is a word.
    if whole_word_starts is not None:
        if whole_word_starts.shape != ids.shape:
            raise ValueError("whole_word_starts must have the shape of input_ids")
        starts = whole_word_starts.bool() | ~cand  # a special token or padding always ends a word
        group = torch.cumsum(starts.long(), dim=1)  # 0 .. T
    else:
        group = torch.arange(1, T + 1, device=dev).expand(B, T)
    # Draw on the generator's device (a CPU generator can mask a GPU batch), then move over.
    gdev = generator.device if generator is not None else dev
    u_word = torch.rand((B, T + 1), generator=generator, device=gdev, dtype=torch.float64).to(dev)
    u = torch.gather(u_word, 1, group)  # one uniform per word, shared by its pieces

    r = torch.as_tensor(rate, dtype=torch.float64, device=dev)
    r = r.view(-1, 1) if r.dim() == 1 else r
    masked = cand & (u < r)

    if max_predictions is not None and T > 0:
        # Visit chosen words in random order (ascending u) and keep the prefix that fits the cap.
        key = torch.where(masked, u, torch.full_like(u, 2.0))
        order = torch.argsort(key, dim=1, stable=True)
        count_sorted = torch.cumsum(torch.gather(masked.long(), 1, order), dim=1)
        count = torch.empty_like(count_sorted).scatter_(1, order, count_sorted)
        word_total = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
        word_total.scatter_reduce_(1, group, torch.where(masked, count, torch.zeros_like(count)), reduce="amax")
        masked &= torch.gather(word_total, 1, group) <= max_predictions

    if at_least_one and T > 0:
        empty = ~masked.any(dim=1) & cand.any(dim=1)
        if bool(empty.any()):
            first = torch.where(cand, u, torch.full_like(u, 2.0)).argmin(dim=1, keepdim=True)
            pick = cand & (group == torch.gather(group, 1, first)) & empty.view(-1, 1)
            masked |= pick

    v = torch.rand((B, T), generator=generator, device=gdev).to(dev)
    replaced = masked & (v < mask_prob)
    randomized = masked & (v >= mask_prob) & (v < mask_prob + random_prob)
    kept = masked & ~replaced & ~randomized

    allowed = torch.ones(vocab_size, dtype=torch.bool, device=dev)
    allowed[special[special < vocab_size]] = False
    allowed_ids = allowed.nonzero().squeeze(1)
    if allowed_ids.numel() == 0:
        raise ValueError("every vocabulary id is special; there is no token to draw at random")
    rand_tok = allowed_ids[torch.randint(len(allowed_ids), (B, T), generator=generator, device=gdev).to(dev)]

    out = torch.where(replaced, torch.full_like(ids, mask_token_id), ids)
    out = torch.where(randomized, rand_tok, out)
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    return MaskedBatch(out, labels, masked, replaced, randomized, kept)


def word_starts(tokens_or_ids: torch.Tensor | list[list[str]], ids_to_tokens: list[str] | None = None) -> torch.Tensor:
    """Bool [B, T]: True where a token does not start with ``##`` (a word begins there)."""
    if isinstance(tokens_or_ids, torch.Tensor):
        if ids_to_tokens is None:
            raise ValueError("pass ids_to_tokens to find word starts from ids")
        is_cont = torch.tensor([t.startswith("##") for t in ids_to_tokens], dtype=torch.bool)
        return ~is_cont.to(tokens_or_ids.device)[tokens_or_ids]
    return torch.tensor([[not t.startswith("##") for t in row] for row in tokens_or_ids], dtype=torch.bool)


class Masker:
    """Dynamic or static masking with fixed settings.

    Dynamic (RoBERTa): a fresh M every time a sequence is seen, from one generator seeded once.
    Static (original BERT): the same M whenever the same sequence comes back, whatever batch it
    sits in, because each row's generator is seeded from ``seed`` and the row's own tokens.
    """

    def __init__(self, *, mask_token_id: int, vocab_size: int, special_ids: Iterable[int], seed: int = 0,
                 dynamic: bool = True, ids_to_tokens: list[str] | None = None, whole_word: bool = False,
                 **options) -> None:
        self.common = dict(mask_token_id=mask_token_id, vocab_size=vocab_size, special_ids=frozenset(special_ids), **options)
        self.seed, self.dynamic = seed, dynamic
        self.ids_to_tokens = ids_to_tokens
        if whole_word and ids_to_tokens is None:
            raise ValueError("whole-word masking needs ids_to_tokens to recognise ## pieces")
        self.whole_word = whole_word
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> MaskedBatch:
        starts = word_starts(input_ids, self.ids_to_tokens) if self.whole_word else None
        if self.dynamic:
            return mask_tokens(input_ids, attention_mask=attention_mask, whole_word_starts=starts,
                               generator=self.generator, **self.common)
        # Static: each row is masked on its real (unpadded) part with a generator keyed by its
        # tokens, so padding width and batch company do not change its mask. Assumes right padding.
        B, T = input_ids.shape
        out = MaskedBatch(input_ids.clone(), torch.full_like(input_ids, -100),
                          *(torch.zeros((B, T), dtype=torch.bool) for _ in range(4)))
        for i in range(B):
            n = int(attention_mask[i].sum()) if attention_mask is not None else T
            row = input_ids[i:i + 1, :n]
            digest = hashlib.blake2b(row.cpu().numpy().tobytes(), digest_size=8).digest()
            g = torch.Generator().manual_seed((self.seed * 1_000_003 + int.from_bytes(digest, "little")) % (2**63))
            r = mask_tokens(row, generator=g, whole_word_starts=starts[i:i + 1, :n] if starts is not None else None,
                            **self.common)
            for f in ("input_ids", "labels", "masked", "replaced", "randomized", "kept"):
                getattr(out, f)[i, :n] = getattr(r, f)[0]
        return out
