"""BERT's corruption three ways, on the same sequences, counted the same way.

Chapters 6 and 9 set Hugging Face's ``DataCollatorForLanguageModeling`` (what most projects run),
the library's :func:`~mlm_lib.masking.mask_tokens` and the masking step of Google's
``create_pretraining_data.py`` side by side. Each is run here on one list of tokenized sequences
and returns the same :class:`Corrupted` tensors, so that one function, :func:`count`, reads all
three from the corrupted ids and the labels alone, and :func:`comparison_table` prints them as one
table. Where the three differ is then a row of that table, not a claim.

Google's step is re-written on ids (:func:`google_masking`): its script works on token strings,
and its random token is ``vocab_words[rng.randint(0, len(vocab_words) - 1)]``, which on ids is
``rng.randint(0, vocab_size - 1)``. Nothing here imports transformers; a collator is passed in.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mlm_lib.book.viz import text_table
from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.masking import Corruption, mask_tokens, word_starts
from mlm_lib.stats import proportion_interval
from mlm_lib.tokenizer import WordPieceTokenizer, pad_rows

GOOGLE_MAX_PREDICTIONS = 20  # create_pretraining_data.py's max_predictions_per_seq (for 128 tokens)


@dataclass(frozen=True)
class Corrupted:
    """One recipe's output on a batch, [B, T] each; padding is 0 in ``attention_mask``."""

    original: torch.Tensor
    corrupted: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor


def _batch(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = pad_rows(sequences, pad_id, width)
    attention = pad_rows([[1] * len(s) for s in sequences], 0, width)
    return ids, attention


def run_collator(collator: Callable[[list[dict[str, Any]]], dict[str, torch.Tensor]],
                 examples: Sequence[dict[str, Any]], pad_id: int, batch_size: int = 64) -> Corrupted:
    """Feed ``examples`` (dicts with ``input_ids``, as a tokenizer returns them, padded or not) to a
    Hugging Face collator ``batch_size`` at a time, as a DataLoader would, and stack what comes
    back; an example's ``attention_mask``, when it has one, says where its padding starts."""
    original = [list(e["input_ids"])[:sum(e["attention_mask"])] if "attention_mask" in e
                else list(e["input_ids"]) for e in examples]
    ids, attention = _batch(original, pad_id)
    corrupted, labels = ids.clone(), torch.full_like(ids, IGNORE_INDEX)
    for start in range(0, len(examples), batch_size):
        out = collator(list(examples[start:start + batch_size]))
        rows = slice(start, start + out["input_ids"].shape[0])
        width = min(out["input_ids"].shape[1], ids.shape[1])  # columns past every row's end are padding
        corrupted[rows, :width], labels[rows, :width] = out["input_ids"][:, :width], out["labels"][:, :width]
    return Corrupted(ids, corrupted, labels, attention)


def run_mask_tokens(sequences: Sequence[Sequence[int]], tokenizer: WordPieceTokenizer,
                    corruption: Corruption, seed: int) -> Corrupted:
    """The library's ``mask_tokens`` on the same sequences (whole words when ``corruption`` says)."""
    ids, attention = _batch(sequences, tokenizer.pad_id)
    starts = word_starts(ids, tokenizer.ids_to_tokens) if corruption.whole_word else None
    mb = mask_tokens(ids, mask_token_id=tokenizer.mask_id, vocab_size=tokenizer.vocab_size,
                     special_ids=tokenizer.special_ids, corruption=corruption, attention_mask=attention,
                     whole_word_starts=starts, generator=torch.Generator().manual_seed(seed))
    return Corrupted(ids, mb.input_ids, mb.labels, attention)


def google_masking(ids: Sequence[int], tokenizer: WordPieceTokenizer, rng: random.Random,
                   rate: float = 0.15, max_predictions: int = GOOGLE_MAX_PREDICTIONS,
                   whole_word: bool = False, mask: float = 0.8, keep: float = 0.1) -> tuple[list[int], list[int]]:
    """Google's ``create_masked_lm_predictions`` on ids: returns the corrupted ids and the labels.

    Candidates are every position but [CLS] and [SEP] (with ``whole_word``, a ``##`` piece joins
    the candidate before it); they are shuffled, and taken in that order until
    min(max_predictions, max(1, round(rate * n))) positions are chosen, n counting [CLS] and
    [SEP]; a whole word that would overshoot is skipped. Each chosen position then draws its own
    coins: [MASK] with probability ``mask``, else unchanged with probability keep / (1 - mask),
    else a token drawn uniformly from the *whole* vocabulary, special tokens included.
    ``mask``/``keep`` are fixed at 0.8/0.1 in Google's script; they are arguments here only so
    that a probe can send every chosen position to a random token.
    """
    candidates: list[list[int]] = []
    for i, token_id in enumerate(ids):
        if token_id in (tokenizer.cls_id, tokenizer.sep_id):
            continue
        if whole_word and candidates and tokenizer.ids_to_tokens[token_id].startswith("##"):
            candidates[-1].append(i)
        else:
            candidates.append([i])
    rng.shuffle(candidates)
    count = min(max_predictions, max(1, int(round(len(ids) * rate))))
    corrupted, labels, chosen = list(ids), [IGNORE_INDEX] * len(ids), 0
    for word in candidates:
        if chosen >= count:
            break
        if chosen + len(word) > count:
            continue  # the word would overshoot the count: try the next one
        for i in word:
            chosen += 1
            labels[i] = ids[i]
            if rng.random() < mask:
                corrupted[i] = tokenizer.mask_id
            elif rng.random() >= keep / (1 - mask):
                corrupted[i] = rng.randint(0, tokenizer.vocab_size - 1)
    return corrupted, labels


def run_google(sequences: Sequence[Sequence[int]], tokenizer: WordPieceTokenizer, seed: int,
               **options: Any) -> Corrupted:
    """:func:`google_masking` on every sequence with one ``random.Random(seed)``, as the script
    runs one generator through its whole corpus."""
    rng = random.Random(seed)
    ids, attention = _batch(sequences, tokenizer.pad_id)
    outs = [google_masking(s, tokenizer, rng, **options) for s in sequences]
    corrupted = pad_rows([c for c, _ in outs], tokenizer.pad_id, ids.shape[1])
    labels = pad_rows([lab for _, lab in outs], IGNORE_INDEX, ids.shape[1])
    return Corrupted(ids, corrupted, labels, attention)


def spaced_words(offsets: torch.Tensor, special: torch.Tensor) -> torch.Tensor:
    """Long [B, T]: a word index per position, a new word wherever a piece does not start where
    the one before it ended (a space or a special token between them), as Hugging Face's
    whole-word collator splits words; so "london," is one word there, two pieces under ``##``."""
    starts, ends = offsets[..., 0], offsets[..., 1]
    previous_end = torch.roll(ends, 1, dims=1)
    previous_special = torch.roll(special, 1, dims=1)
    previous_special[:, 0] = True
    new = special | previous_special | (starts != previous_end)
    return torch.cumsum(new.long(), dim=1)


def piece_words(ids: torch.Tensor, tokenizer: WordPieceTokenizer) -> torch.Tensor:
    """Long [B, T]: a word index per position, a new word at every piece without ``##``."""
    special = torch.isin(ids, torch.tensor(sorted(tokenizer.special_ids)))
    return torch.cumsum((word_starts(ids, tokenizer.ids_to_tokens) | special).long(), dim=1)


def words_cut(in_m: torch.Tensor, words: torch.Tensor, real: torch.Tensor) -> int:
    """How many words have some of their pieces in M and some outside it."""
    B, T = in_m.shape
    key = (words + torch.arange(B).unsqueeze(1) * (T + 1))[real]
    size = torch.zeros(B * (T + 1), dtype=torch.long).scatter_add_(0, key, torch.ones_like(key))
    hit = torch.zeros_like(size).scatter_add_(0, key, in_m[real].long())
    return int(((hit > 0) & (hit < size)).sum())


@dataclass(frozen=True)
class Counts:
    """What one recipe did, read from the corrupted ids and the labels alone."""

    ordinary: int                 # positions that are not special tokens or padding
    chosen: int                   # |M|, summed over the sequences
    masked: int                   # in M and now [MASK]
    random: int                   # in M and now another token
    kept: int                     # in M and unchanged (a random draw of the same token included)
    per_sequence: torch.Tensor    # |M| of each sequence
    google_count: torch.Tensor    # what Google's script would choose for each sequence
    special_chosen: int           # [CLS], [SEP] or [PAD] positions in M
    cut: dict[str, int]           # words cut by M, per definition of a word


def count(out: Corrupted, tokenizer: WordPieceTokenizer, rate: float = 0.15,
          words: dict[str, torch.Tensor] | None = None) -> Counts:
    """Count ``out`` as chapter 6 counts its ten-line ``corrupt``. ``words`` maps a name to a
    word index per position (:func:`piece_words`, :func:`spaced_words`) for the rows "words cut"."""
    real = out.attention_mask.bool()
    special = torch.isin(out.original, torch.tensor(sorted(tokenizer.special_ids))) | ~real
    in_m = out.labels != IGNORE_INDEX
    masked = in_m & (out.corrupted == tokenizer.mask_id)
    random_ = in_m & ~masked & (out.corrupted != out.original)
    lengths = real.sum(1)
    google = torch.round(lengths.double() * rate).long().clamp(min=1, max=GOOGLE_MAX_PREDICTIONS)
    structural = torch.isin(out.original, torch.tensor([tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id]))
    cut = {name: words_cut(in_m, w, real & ~special) for name, w in (words or {}).items()}
    return Counts(int((~special).sum()), int(in_m.sum()), int(masked.sum()), int(random_.sum()),
                  int((in_m & ~masked & ~random_).sum()), in_m.sum(1), google,
                  int((in_m & (structural | ~real)).sum()), cut)


def special_draws(out: Corrupted, tokenizer: WordPieceTokenizer) -> tuple[int, int]:
    """(random tokens that are special ids, random tokens): for a probe in which every position of
    M was sent to a random token, so that the ids in M are the draws themselves."""
    draws = out.corrupted[out.labels != IGNORE_INDEX]
    return int(torch.isin(draws, torch.tensor(sorted(tokenizer.special_ids))).sum()), draws.numel()


def comparison_table(counts: dict[str, Counts], probes: dict[str, tuple[int, int]] | None = None) -> str:
    """One column per recipe: the shares with 95% Wilson intervals, |M| per sequence against
    Google's count, what can be chosen, and (from ``probes``) where random tokens come from."""
    names = list(counts)
    rows: list[tuple[str, list[str]]] = [
        ("chosen (of ordinary)", [str(proportion_interval(c.chosen, c.ordinary)) for c in counts.values()]),
        ("[MASK] (of M)", [str(proportion_interval(c.masked, c.chosen)) for c in counts.values()]),
        ("random (of M)", [str(proportion_interval(c.random, c.chosen)) for c in counts.values()]),
        ("kept (of M)", [str(proportion_interval(c.kept, c.chosen)) for c in counts.values()]),
        ("|M| per sequence", [f"{int(c.per_sequence.min())} to {int(c.per_sequence.max())}"
                              for c in counts.values()]),
        ("|M| = Google's count", [f"{int((c.per_sequence == c.google_count).sum()):,} of {len(c.per_sequence):,}"
                                  for c in counts.values()]),
        ("empty M", [f"{int((c.per_sequence == 0).sum()):,}" for c in counts.values()]),
        ("[CLS]/[SEP]/[PAD] in M", [f"{c.special_chosen:,}" for c in counts.values()]),
    ]
    for word in next(iter(counts.values())).cut:
        rows.append((f"{word} cut by M", [f"{c.cut[word]:,}" for c in counts.values()]))
    if probes:
        rows.append(("specials among probe draws", [f"{probes[n][0]:,} of {probes[n][1]:,}" for n in names]))
    return text_table(["", *names], [[label, *values] for label, values in rows])
