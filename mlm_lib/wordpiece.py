"""Training a WordPiece vocabulary from text: merges of ``##`` continuation pieces.

The vocabulary it learns is encoded by :class:`~mlm_lib.tokenizer.WordPieceTokenizer` like any
other ``vocab.txt``: greedy longest-match-first, not by replaying the merges.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Iterable

from mlm_lib.tokenizer import (MAX_INPUT_CHARS_PER_WORD, SPECIAL_TOKENS, BasicTokenizer,
                               WordPieceTokenizer)

Pair = tuple[str, str]


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8000, do_lower_case: bool = True,
                    min_frequency: int = 2, limit_alphabet: int = 1000,
                    max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
                    score: str = "frequency") -> WordPieceTokenizer:
    """Learn a WordPiece vocabulary by merging units with ``##`` continuation pieces.

    Algorithm (deterministic; ``score="frequency"`` is what Hugging Face's ``WordPieceTrainer``
    does, and what the book's vocabulary uses):

    1. Basic-tokenize every text exactly as encoding will, and count word frequencies.
    2. Start from the alphabet: the ``limit_alphabet`` most frequent characters, each as a
       word-initial unit ``c`` and, where it occurs inside words, a continuation unit ``##c``.
       Every word is a sequence of units: ``low`` -> ``l ##o ##w``.
    3. Repeatedly merge the best adjacent pair ``(a, b)`` into one unit ``a + b`` without b's
       ``##`` (``##o ##w`` -> ``##ow``), add it to the vocabulary, and rewrite the words that
       contain it. "Best" is, by ``score``:

       - ``"frequency"``: the highest count freq(ab) over the corpus;
       - ``"likelihood"``: the highest freq(ab) / (freq(a) * freq(b)), the original WordPiece
         criterion (Schuster & Nakajima, 2012): the merge that most raises the likelihood of the
         corpus under a unigram model of units. It prefers pairs whose parts rarely occur apart.

       Only pairs seen at least ``min_frequency`` times compete. Ties break alphabetically, so
       the result depends only on the texts.
    4. Stop at ``vocab_size`` pieces (special tokens included) or when no pair is left.

    Google never released its trainer; both scores are common open re-implementations. Either
    way, *encoding* with the learned vocabulary uses greedy longest-match-first, not the merges.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    if score not in ("frequency", "likelihood"):
        raise ValueError(f"score must be 'frequency' or 'likelihood', got {score!r}")
    word_counts = _count_words(texts, do_lower_case, max_input_chars_per_word)  # step 1
    alphabet = _alphabet(word_counts, limit_alphabet)  # step 2
    merges = _MergeTable(word_counts, alphabet, likelihood=score == "likelihood")
    vocab = list(SPECIAL_TOKENS) + sorted(merges.unit_counts)
    _learn_merges(merges, vocab, vocab_size, min_frequency)  # steps 3 and 4
    return WordPieceTokenizer(vocab, do_lower_case=do_lower_case,
                              max_input_chars_per_word=max_input_chars_per_word)


def _count_words(texts: Iterable[str], do_lower_case: bool,
                 max_input_chars_per_word: int) -> Counter[str]:
    """How often each basic-tokenized word occurs; words that encoding turns into [UNK] (too long)
    are left out. Whitespace chunks are counted first: far fewer distinct ones need splitting."""
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    chunk_counts: Counter[str] = Counter()
    for text in texts:
        chunk_counts.update(basic.clean(text).split())
    word_counts: Counter[str] = Counter()
    for chunk, c in chunk_counts.items():
        for w in basic.split_chunk(chunk):
            if len(w) <= max_input_chars_per_word:
                word_counts[w] += c
    return word_counts


def _alphabet(word_counts: Counter[str], limit_alphabet: int) -> set[str]:
    """The ``limit_alphabet`` most frequent characters (ties alphabetically): rare symbols would
    each take a vocabulary slot, so words containing them are left to [UNK] instead."""
    char_counts: Counter[str] = Counter()
    for w, c in word_counts.items():
        for ch in w:
            char_counts[ch] += c
    return {ch for ch, _ in sorted(char_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit_alphabet]}


def _merged(pair: Pair) -> str:
    """The unit a merge creates: ``("l", "##o")`` -> ``"lo"``, ``("##o", "##w")`` -> ``"##ow"``."""
    a, b = pair
    return a + b[2:]


def _merge_in_word(units: list[str], pair: Pair) -> list[str]:
    """``units`` with every occurrence of ``pair``, read from the left, replaced by one unit."""
    a, b = pair
    merged = _merged(pair)
    out, j, n = [], 0, len(units)
    while j < n:
        if j + 1 < n and units[j] == a and units[j + 1] == b:
            out.append(merged)
            j += 2
        else:
            out.append(units[j])
            j += 1
    return out


class _MergeTable:
    """The corpus as unit sequences, with the counts that choosing the next merge needs.

    Recounting every pair after each merge would cost a pass over the corpus per merge. Instead
    the table remembers which words contain each pair, rewrites only those, and adjusts the
    counts by the difference.
    """

    def __init__(self, word_counts: Counter[str], alphabet: set[str], likelihood: bool) -> None:
        self.likelihood = likelihood
        # Words whose characters are all in the alphabet, as unit lists; sorted for determinism.
        self.words: list[list[str]] = []
        self.freqs: list[int] = []
        self.unit_counts: Counter[str] = Counter()
        for w in sorted(word_counts):
            if not all(ch in alphabet for ch in w):
                continue
            units = [w[0]] + ["##" + ch for ch in w[1:]]
            for u in units:
                self.unit_counts[u] += word_counts[w]
            self.words.append(units)
            self.freqs.append(word_counts[w])
        self.pair_counts: dict[Pair, int] = {}
        self.where: dict[Pair, set[int]] = {}  # pair -> indices of the words that contain it
        self.pairs_of: dict[str, set[Pair]] = {}  # unit -> pairs it is part of (likelihood only)
        for i, units in enumerate(self.words):
            for p in zip(units, units[1:]):
                self.pair_counts[p] = self.pair_counts.get(p, 0) + self.freqs[i]
                self.where.setdefault(p, set()).add(i)
        if likelihood:
            for p in self.pair_counts:
                self._note_units_of(p)

    def _note_units_of(self, p: Pair) -> None:
        self.pairs_of.setdefault(p[0], set()).add(p)
        self.pairs_of.setdefault(p[1], set()).add(p)

    def value(self, p: Pair) -> float:
        """The score of a pair: its count, or count / (count(a) * count(b)) for likelihood."""
        c = self.pair_counts[p]
        return c / (self.unit_counts[p[0]] * self.unit_counts[p[1]]) if self.likelihood else c

    def merge(self, pair: Pair) -> set[Pair]:
        """Merge ``pair`` in every word that contains it; returns the pairs whose score changed."""
        touched: dict[Pair, int] = {}  # pair -> change of its count
        for i in sorted(self.where.pop(pair, ())):
            self._rewrite_word(i, pair, touched)
        changed = self._apply_count_changes(touched)
        self.pair_counts.pop(pair, None)
        if self.likelihood:  # unit counts of a, b and the merged unit moved: their pairs rescore
            for u in {pair[0], pair[1], _merged(pair)}:
                live = {p for p in self.pairs_of.get(u, ()) if p in self.pair_counts}
                self.pairs_of[u] = live
                changed |= live
        return changed

    def _rewrite_word(self, i: int, pair: Pair, touched: dict[Pair, int]) -> None:
        """Merge ``pair`` inside word ``i``: its old pairs count down, its new ones count up."""
        units, f = self.words[i], self.freqs[i]
        for p in zip(units, units[1:]):
            touched[p] = touched.get(p, 0) - f
        out = _merge_in_word(units, pair)
        merges = len(units) - len(out)  # each merge makes the word one unit shorter
        if merges:
            self.unit_counts[pair[0]] -= f * merges
            self.unit_counts[pair[1]] -= f * merges
            self.unit_counts[_merged(pair)] += f * merges
        self.words[i] = out
        for p in zip(out, out[1:]):
            touched[p] = touched.get(p, 0) + f
            self.where.setdefault(p, set()).add(i)

    def _apply_count_changes(self, touched: dict[Pair, int]) -> set[Pair]:
        """Add the count changes of a merge; a pair whose count drops to zero is forgotten."""
        changed: set[Pair] = set()
        for p, delta in touched.items():
            if delta:
                c = self.pair_counts.get(p, 0) + delta
                if c > 0:
                    self.pair_counts[p] = c
                    changed.add(p)
                    if self.likelihood:
                        self._note_units_of(p)
                else:
                    self.pair_counts.pop(p, None)
        return changed


def _learn_merges(merges: _MergeTable, vocab: list[str], vocab_size: int,
                  min_frequency: int) -> None:
    """Append the merged units to ``vocab``, best pair first, until it holds ``vocab_size`` pieces.

    A lazy max-heap finds the best pair: an entry is valid while its score equals the pair's
    current score; every score change pushes a new entry, so the valid entry on top is the true
    best pair, and stale entries are skipped when they surface.
    """
    seen = set(vocab)
    heap = [(-merges.value(p), p) for p in merges.pair_counts]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        neg, pair = heapq.heappop(heap)
        if pair not in merges.pair_counts or merges.value(pair) != -neg:
            continue  # stale
        if merges.pair_counts[pair] < min_frequency:
            if merges.likelihood:
                continue  # a rare pair may score high; it returns to the heap if its count grows
            break  # frequency order: every remaining pair is rarer still
        merged = _merged(pair)
        if merged not in seen:
            vocab.append(merged)
            seen.add(merged)
        for p in sorted(merges.merge(pair)):
            heapq.heappush(heap, (-merges.value(p), p))
