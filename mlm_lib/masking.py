"""Choosing the set M and corrupting it, BERT's way (80% [MASK], 10% random, 10% unchanged).

Every position of every sequence is decided at once with tensor operations, with no Python
loop. All randomness comes from an explicit ``torch.Generator`` so a chapter can redraw exactly
the same picture.

The recipe is one value, a :class:`Corruption`: by default selection is per token with
probability ``select`` (as in Hugging Face's collator), so the number of masked tokens in a row
is Binomial(real tokens, select); ``fixed_count=True`` chooses a fixed number per row instead, as
Google's original script does. The shares ``mask``/``random``/``keep`` then say what happens to
the chosen tokens. With ``whole_word_starts`` a word's pieces share one draw, so a word is
masked entirely or not at all. ``max_predictions`` keeps, in a random order, only as many chosen
words as fit the cap; ``at_least_one`` masks one candidate word in any row where the draw chose
nothing (short sentences would otherwise give no training signal).

Span masking (SpanBERT, Joshi et al. 2020, section 3.1) is a third way to choose M:
``Corruption(span_p=0.2)`` masks runs of whole words, their lengths drawn from a geometric
distribution, until a share ``select`` of the row's tokens is chosen; one coin per *span* then
sends all of it to [MASK], to random tokens or leaves it. Spans are drawn one after another, so
this mode loops over the rows and their spans in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

from mlm_lib.loss import IGNORE_INDEX  # the label of a position outside M


@dataclass(frozen=True)
class Corruption:
    """BERT's corruption recipe: choose a share ``select`` of the real tokens as the set M, then
    replace a share ``mask`` of M by [MASK], a share ``random`` by a random token and leave a share
    ``keep`` unchanged (BERT: 0.15, then 0.8/0.1/0.1).

    How M is chosen comes in two ways. By default each token joins M on its own coin, so |M| in a
    sequence is Binomial(n, select), as in Hugging Face's ``DataCollatorForLanguageModeling``; an
    empty M can happen. ``fixed_count=True`` chooses exactly max(1, round(select * n)) tokens per sequence,
    with n counting [CLS] and [SEP], as Google's ``create_pretraining_data.py`` does (a whole word
    that would overshoot the count is skipped for the next one); M is then never empty while a
    word fits. Random
    replacements come from the non-special vocabulary, or with ``random_from_all=True`` from the
    whole vocabulary, as Google's script draws them.
    """

    select: float = 0.15
    mask: float = 0.8
    random: float = 0.1
    keep: float = 0.1
    fixed_count: bool = False
    random_from_all: bool = False
    span_p: float | None = None  # SpanBERT's spans: the geometric distribution's p (0.2 there)
    max_span: int = 10            # the longest span, in words (10 there)
    whole_word: bool = False      # a word's pieces join M together (needs whole_word_starts)

    def __post_init__(self) -> None:
        # Written as "not (inside)" so that nan is refused too.
        if not 0 < self.select <= 1:
            raise ValueError(f"select must be in (0, 1], got {self.select}")
        for name in ("mask", "random", "keep"):
            share = getattr(self, name)
            if not 0 <= share <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {share}")
        total = self.mask + self.random + self.keep
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"mask + random + keep must sum to 1, got {total:.6g}")
        if self.span_p is not None:
            if not 0 < self.span_p <= 1:
                raise ValueError(f"span_p must be in (0, 1], got {self.span_p}")
            if self.max_span < 1:
                raise ValueError(f"max_span must be at least 1, got {self.max_span}")
            if self.fixed_count:
                raise ValueError("span masking sets its own count (a share select of the tokens); "
                                 "leave fixed_count False")

    def span_lengths(self) -> torch.Tensor:
        """P(length = 1 .. max_span words): the geometric distribution cut at ``max_span`` and
        renormalised, as SpanBERT draws it (mean 3.8 words for p = 0.2 and 10)."""
        if self.span_p is None:
            raise ValueError("this Corruption masks no spans (span_p is None)")
        k = torch.arange(1, self.max_span + 1, dtype=torch.float64)
        p = self.span_p * (1 - self.span_p) ** (k - 1)
        return p / p.sum()


BERT_CORRUPTION = Corruption()
# Held-out blanks: every chosen token becomes [MASK], so there are no unchanged tokens a model
# could copy, and every model and count baseline is scored on the same blanks.
EVAL_CORRUPTION = Corruption(mask=1.0, random=0.0, keep=0.0)
# The original BERT's choice of M (google-research/bert, create_pretraining_data.py): a fixed
# number of targets per sequence and random replacements from the whole vocabulary.
GOOGLE_CORRUPTION = Corruption(fixed_count=True, random_from_all=True)
# BERT's later release: whole-word masking, a word's pieces chosen together.
WHOLE_WORD_CORRUPTION = Corruption(whole_word=True)
# SpanBERT's (Joshi et al. 2020, section 3.1): spans of whole words, lengths ~ Geometric(0.2) cut
# at 10, until 15% of the tokens are chosen; 80/10/10 decided once per span.
SPANBERT_CORRUPTION = Corruption(span_p=0.2, max_span=10, whole_word=True)


@dataclass
class MaskedBatch:
    """What the loss needs (``input_ids``, ``labels``) and what a figure needs (the masks)."""

    input_ids: torch.Tensor   # the corrupted sequence x_\M, [B, T]
    labels: torch.Tensor      # original ids on M, IGNORE_INDEX elsewhere, [B, T]
    masked: torch.Tensor      # bool [B, T]: the set M
    replaced: torch.Tensor    # bool: in M and now [MASK]
    randomized: torch.Tensor  # bool: in M and now a random token
    kept: torch.Tensor        # bool: in M and left unchanged
    span: torch.Tensor | None = None  # span masking: each position's span (1, 2, ...; 0 outside M)

    @property
    def num_masked(self) -> int:
        return int(self.masked.sum())


def mask_tokens(input_ids: torch.Tensor, *, mask_token_id: int, vocab_size: int, special_ids: Iterable[int],
                corruption: Corruption = BERT_CORRUPTION, attention_mask: torch.Tensor | None = None,
                whole_word_starts: torch.Tensor | None = None, at_least_one: bool = False,
                max_predictions: int | None = None, generator: torch.Generator | None = None) -> MaskedBatch:
    """Choose M among the real, non-special tokens and corrupt it by the recipe ``corruption``.

    ``whole_word_starts`` is a bool [B, T] tensor, True where a word begins (False on ``##``
    pieces). Random replacements are drawn uniformly from the non-special vocabulary (from all of
    it with ``corruption.random_from_all``).
    """
    special = _check_masking_inputs(input_ids, vocab_size, special_ids, corruption,
                                    attention_mask, whole_word_starts, max_predictions)
    x = input_ids.long()
    real = _real_tokens(x, special, attention_mask)  # the positions that may join M
    word = _word_index(real, whole_word_starts)      # the pieces of one word share an index

    # 1. Choose M: one coin per word, so that a word joins M whole or not at all.
    B, T = x.shape
    coin = torch.gather(_uniform((B, T + 1), generator, x.device, torch.float64), 1, word)
    span = None
    if corruption.span_p is not None:
        masked, span = _choose_spans(real, word, corruption, generator)
    elif corruption.fixed_count:
        masked = _fill_to_count(real, coin, word, _fixed_count(corruption.select, x, attention_mask))
    else:
        masked = real & (coin < corruption.select)
    if max_predictions is not None:
        masked = _cap_predictions(masked, coin, word, max_predictions)
    if at_least_one:
        masked = _at_least_one(masked, real, coin, word)

    # 2. Split M: a second coin per position (per span, for spans) sends it to [MASK], to a random
    # token or leaves it.
    replaced, randomized, kept = _split(masked, corruption, generator, span)

    # 3. Write x_\M, and the labels: the original token on M, IGNORE_INDEX everywhere else.
    random_ids = _random_tokens(x.shape, vocab_size, special, generator, x.device,
                                exclude_special=not corruption.random_from_all)
    corrupted = torch.where(replaced, torch.full_like(x, mask_token_id), x)
    corrupted = torch.where(randomized, random_ids, corrupted)
    labels = torch.where(masked, x, torch.full_like(x, IGNORE_INDEX))
    return MaskedBatch(corrupted, labels, masked, replaced, randomized, kept, span)


def _check_masking_inputs(input_ids: torch.Tensor, vocab_size: int, special_ids: Iterable[int],
                          corruption: Corruption, attention_mask: torch.Tensor | None,
                          whole_word_starts: torch.Tensor | None,
                          max_predictions: int | None) -> torch.Tensor:
    """Refuse bad arguments before any random draw, with a message that names the argument;
    return the special ids as a sorted tensor on the device of ``input_ids``."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int32, torch.int64):
        raise ValueError("input_ids must be an integer torch.Tensor")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq_len], got shape {tuple(input_ids.shape)}")
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab_size):
        raise ValueError(f"input_ids must lie in [0, {vocab_size})")
    if not isinstance(corruption, Corruption):
        raise TypeError(f"corruption must be a Corruption, got {type(corruption).__name__}")
    if attention_mask is not None and attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} != input_ids shape "
                         f"{tuple(input_ids.shape)}")
    if whole_word_starts is not None and whole_word_starts.shape != input_ids.shape:
        raise ValueError("whole_word_starts must have the shape of input_ids")
    if corruption.whole_word and whole_word_starts is None:
        raise ValueError("this Corruption masks whole words: pass whole_word_starts "
                         "(word_starts(input_ids, tokenizer.ids_to_tokens) finds them)")
    if max_predictions is not None and max_predictions < 1:
        raise ValueError(f"max_predictions must be at least 1, got {max_predictions}")
    special = sorted({int(s) for s in special_ids})
    if sum(0 <= s < vocab_size for s in special) == vocab_size:
        raise ValueError("every vocabulary id is special; there is no token to draw at random")
    return torch.tensor(special, dtype=torch.long, device=input_ids.device)


def _real_tokens(ids: torch.Tensor, special: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Bool [B, T]: the candidates for M. [CLS], [SEP] and padding are never targets: they carry
    no word to predict, and a model would only learn where they sit."""
    real = ~torch.isin(ids, special)
    if attention_mask is not None:
        real &= attention_mask.bool()
    return real


def _word_index(real: torch.Tensor, whole_word_starts: torch.Tensor | None) -> torch.Tensor:
    """Long [B, T] in 0 .. T: the word each position belongs to, so that a word's pieces can share
    one coin. Without whole-word masking every token is a word of its own (indices 1 .. T)."""
    B, T = real.shape
    if whole_word_starts is None:
        return torch.arange(1, T + 1, device=real.device).expand(B, T)
    starts = whole_word_starts.bool() | ~real  # a special token or padding always ends a word
    return torch.cumsum(starts.long(), dim=1)


def _draw_device(generator: torch.Generator | None, device: torch.device) -> torch.device:
    """Where to draw: on the generator's device, so that a CPU generator can mask a GPU batch and
    gives the same draws wherever the batch lives; the draws are then moved to the batch."""
    return generator.device if generator is not None else device


def _uniform(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device,
             dtype: torch.dtype | None = None) -> torch.Tensor:
    """Uniform [0, 1) draws of ``shape`` (see :func:`_draw_device` for where they are made)."""
    return torch.rand(shape, generator=generator, device=_draw_device(generator, device), dtype=dtype).to(device)


def _fixed_count(select: float, ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Long [B]: how many targets each sequence gets in Google's recipe, max(1, round(select * n))
    with n its length, [CLS] and [SEP] included (half rounds to even, as Python's round does)."""
    n = (attention_mask.sum(dim=1) if attention_mask is not None
         else torch.full(ids.shape[:1], ids.shape[1], device=ids.device))
    return torch.round(select * n.double()).long().clamp(min=1)


def _fill_to_count(real: torch.Tensor, coin: torch.Tensor, word: torch.Tensor,
                   count: torch.Tensor) -> torch.Tensor:
    """Google's choice of M: visit the candidate words in a random order (ascending coin) and take
    each one that still fits in the row's ``count`` [B]; a word that would overshoot is skipped,
    so a long word cannot leave M empty. One pass per word slot, each over the whole batch."""
    B, T = real.shape
    size = torch.zeros((B, T + 1), dtype=torch.long, device=real.device)
    size.scatter_add_(1, word, real.long())  # real pieces per word
    word_coin = torch.full((B, T + 1), 2.0, dtype=coin.dtype, device=coin.device)
    word_coin.scatter_reduce_(1, word, torch.where(real, coin, torch.full_like(coin, 2.0)), reduce="amin")
    order = torch.argsort(word_coin, dim=1, stable=True)
    size_sorted = torch.gather(size, 1, order)
    taken = torch.zeros(B, dtype=torch.long, device=real.device)
    take_sorted = torch.zeros((B, T + 1), dtype=torch.bool, device=real.device)
    for j in range(T + 1):
        fits = (size_sorted[:, j] > 0) & (taken + size_sorted[:, j] <= count)
        take_sorted[:, j] = fits
        taken += size_sorted[:, j] * fits
        if bool((taken >= count).all()):
            break
    take = torch.zeros_like(take_sorted).scatter_(1, order, take_sorted)
    return real & torch.gather(take, 1, word)


def _cap_predictions(masked: torch.Tensor, coin: torch.Tensor, word: torch.Tensor, cap: int) -> torch.Tensor:
    """Keep at most ``cap`` tokens of M per row, dropping whole words, never single pieces.

    The chosen words are visited in ascending order of their coin, which is already a uniform
    random order, so no extra draw is needed; a word stays if the running count of tokens up to
    and including its last piece fits the cap.
    """
    B, T = masked.shape
    if T == 0:
        return masked
    key = torch.where(masked, coin, torch.full_like(coin, 2.0))  # unchosen positions go last
    order = torch.argsort(key, dim=1, stable=True)
    count_sorted = torch.cumsum(torch.gather(masked.long(), 1, order), dim=1)
    count = torch.empty_like(count_sorted).scatter_(1, order, count_sorted)
    word_total = torch.zeros((B, T + 1), dtype=torch.long, device=masked.device)
    word_total.scatter_reduce_(1, word, torch.where(masked, count, torch.zeros_like(count)), reduce="amax")
    return masked & (torch.gather(word_total, 1, word) <= cap)


def _at_least_one(masked: torch.Tensor, real: torch.Tensor, coin: torch.Tensor, word: torch.Tensor) -> torch.Tensor:
    """In a row where M came out empty but has a candidate, add the candidate word with the
    smallest coin: a uniformly random word, chosen without an extra draw, so that a short
    sentence still gives a training signal and the draws after this one stay the same."""
    if masked.shape[1] == 0:
        return masked
    empty = ~masked.any(dim=1) & real.any(dim=1)
    if not bool(empty.any()):
        return masked
    first = torch.where(real, coin, torch.full_like(coin, 2.0)).argmin(dim=1, keepdim=True)
    return masked | (real & (word == torch.gather(word, 1, first)) & empty.view(-1, 1))


def _choose_spans(real: torch.Tensor, word: torch.Tensor, corruption: Corruption,
                  generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """SpanBERT's choice of M, row by row: draw a length (in words) and a starting word at
    random, mask the span's words left to right, and repeat until round(select * n) of the row's
    n real tokens are chosen (at least one); the last word may be cut there, as in SpanBERT's
    code. A span that would start inside M is drawn again; one that runs into M stops there.
    Returns M and, for each position of M, its span's number (1, 2, ...; 0 outside M), so that a
    span shares one 80/10/10 coin."""
    B, T = real.shape
    span = [[0] * T for _ in range(B)]
    cumulative = corruption.span_lengths().cumsum(0)
    for b in range(B):
        words: dict[int, list[int]] = {}
        for t in real[b].nonzero().squeeze(1).tolist():
            words.setdefault(int(word[b, t]), []).append(t)
        order = list(words.values())  # the row's words, left to right, each its positions
        n = sum(len(pieces) for pieces in order)
        budget, chosen, n_span = max(1, round(corruption.select * n)) if n else 0, 0, 0
        while chosen < budget:
            u_len, u_start = _uniform((2,), generator, torch.device("cpu"), torch.float64).tolist()
            length = int(torch.searchsorted(cumulative, torch.tensor([u_len], dtype=torch.float64),
                                            right=True)) + 1
            start = min(int(u_start * len(order)), len(order) - 1)
            if span[b][order[start][0]]:
                continue
            n_span += 1
            for pieces in order[start:start + length]:
                if span[b][pieces[0]]:
                    break  # the span ran into an earlier one
                for t in pieces[:budget - chosen]:
                    span[b][t] = n_span
                chosen += min(len(pieces), budget - chosen)
                if chosen == budget:
                    break
    numbered = torch.tensor(span, dtype=torch.long, device=real.device).view(B, T)
    return numbered > 0, numbered


def _split(masked: torch.Tensor, corruption: Corruption, generator: torch.Generator | None,
           span: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cut M into (replaced, randomized, kept) with one uniform coin per position (per span when
    ``span`` numbers them): below ``mask`` it becomes [MASK], in the next ``random`` a random
    token, the rest stays unchanged. Kept and random tokens make the model predict at positions
    that hold a real token too."""
    if span is None:
        v = _uniform(masked.shape, generator, masked.device)
    else:  # one coin per span number: a span is [MASK], random or kept as a whole
        B, T = masked.shape
        v = torch.gather(_uniform((B, T + 1), generator, masked.device), 1, span)
    replaced = masked & (v < corruption.mask)
    randomized = masked & (v >= corruption.mask) & (v < corruption.mask + corruption.random)
    kept = masked & ~replaced & ~randomized
    return replaced, randomized, kept


def _random_tokens(shape: torch.Size, vocab_size: int, special: torch.Tensor,
                   generator: torch.Generator | None, device: torch.device,
                   exclude_special: bool = True) -> torch.Tensor:
    """A token drawn uniformly from the vocabulary at every position (only those in the random
    share are used). The special ids are left out unless told otherwise: a random [CLS] or [PAD]
    would be a signal, not noise."""
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=device)
    if exclude_special:
        allowed[special[special < vocab_size]] = False
    allowed_ids = allowed.nonzero().squeeze(1)
    pick = torch.randint(len(allowed_ids), shape, generator=generator, device=_draw_device(generator, device))
    return allowed_ids[pick.to(device)]


def word_starts(tokens_or_ids: torch.Tensor | list[list[str]], ids_to_tokens: list[str] | None = None) -> torch.Tensor:
    """Bool [B, T]: True where a token does not start with ``##`` (a word begins there)."""
    if isinstance(tokens_or_ids, torch.Tensor):
        if ids_to_tokens is None:
            raise ValueError("pass ids_to_tokens to find word starts from ids")
        is_cont = torch.tensor([t.startswith("##") for t in ids_to_tokens], dtype=torch.bool)
        return ~is_cont.to(tokens_or_ids.device)[tokens_or_ids]
    return torch.tensor([[not t.startswith("##") for t in row] for row in tokens_or_ids], dtype=torch.bool)
