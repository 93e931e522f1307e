"""From words and characters to pieces and back: what a tagging or question-answering project
needs around the heads of :mod:`mlm_lib.tasks`.

- :func:`encode_offsets` encodes a text as :meth:`~mlm_lib.tokenizer.WordPieceTokenizer.encode_ids`
  does and also says, for every piece, which characters of the text it came from and which word;
  an answer given as characters (SQuAD's ``answer_start``) is found among the pieces through them,
  and a predicted span of pieces is turned back into characters of the original text (its case,
  its accents), not into lowercased pieces glued together.
- :func:`encode_words` and :func:`align_labels`: words that come with one label each (CoNLL's
  columns) become pieces with one label at each word's first piece.
- :func:`question_windows`: a context longer than the model's positions is cut into windows that
  overlap, each ``[CLS] question [SEP] part of the context [SEP]``.
- :func:`nbest_answers`: the best few (start, end) pairs over all windows, with a cap on the
  answer's length, and no answer that leaves its window's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.tokenizer import word_spans


@dataclass
class PieceEncoding:
    """One text's pieces: ``ids``, each piece's characters ``offsets[k] = (first, end)`` in the
    text (``text[first:end]``), and ``word_ids[k]``, the word it belongs to (words as the tokenizer
    splits them, :func:`~mlm_lib.tokenizer.word_spans`)."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int]

    def __len__(self) -> int:
        return len(self.ids)


def encode_offsets(tokenizer: Any, text: str) -> PieceEncoding:
    """``text``'s pieces with their characters and words (no special tokens added).

    A piece's characters are counted in the word it came from: ``"Aristotle"`` gives
    ``aristotle`` (0, 9); ``"unaffordable"`` gives ``una`` (0, 3), ``##ff`` (3, 5), ... When
    lowercasing or accent stripping changed a word's length (a decomposed accent, a letter that
    lowercases to two), the word's pieces cannot be placed inside it, and each is given the whole
    word's characters: an answer then still maps to whole words."""
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    word_ids: list[int] = []
    for w, (first, end) in enumerate(word_spans(text)):
        word_piece_ids = tokenizer.encode_ids(text[first:end])
        pieces = tokenizer.convert_ids_to_tokens(word_piece_ids)
        lengths = [len(p.removeprefix("##")) for p in pieces]
        exact = sum(lengths) == end - first and tokenizer.unk_id not in word_piece_ids
        at = first
        for length in lengths:
            offsets.append((at, at + length) if exact else (first, end))
            at += length
        ids += word_piece_ids
        word_ids += [w] * len(word_piece_ids)
    return PieceEncoding(ids, offsets, word_ids)


def encode_words(tokenizer: Any, words: Sequence[str]) -> tuple[list[int], list[int]]:
    """Words already split (a CoNLL file's first column) -> (piece ids, the word of each piece)."""
    ids: list[int] = []
    word_ids: list[int] = []
    for w, word in enumerate(words):
        pieces = tokenizer.encode_ids(word)
        ids += pieces
        word_ids += [w] * len(pieces)
    return ids, word_ids


def align_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """One label per piece: a word's label at its first piece, ``IGNORE_INDEX`` at the pieces
    after it and at pieces of no word (``None``: ``[CLS]``, ``[SEP]``, padding).

    Why only the first piece: the task labels words, and is scored on words (CoNLL counts
    entities of words), so the model makes one prediction per word, read at one place. Labelling
    every piece would weigh a word split into five pieces five times in the loss, and leave open
    which of its pieces' predictions is the word's. BERT's paper (section 5.3) does the same."""
    out: list[int] = []
    previous: int | None = None
    for w in word_ids:
        out.append(IGNORE_INDEX if w is None or w == previous else int(word_labels[w]))
        previous = w
    return out


def word_predictions(word_ids: Sequence[int | None], piece_predictions: Sequence[int],
                     n_words: int, missing: int = 0) -> list[int]:
    """The reverse of :func:`align_labels`: each word's prediction read at its first piece;
    ``missing`` for a word that has no piece in the input (cut off by the model's length)."""
    out = [missing] * n_words
    seen: set[int] = set()
    for w, p in zip(word_ids, piece_predictions):
        if w is not None and w not in seen:
            out[w] = int(p)
            seen.add(w)
    return out


def char_span_to_pieces(offsets: Sequence[tuple[int, int]], first: int, end: int
                        ) -> tuple[int, int]:
    """The first and last piece (inclusive) that overlap characters ``[first, end)``."""
    hit = [k for k, (a, b) in enumerate(offsets) if a < end and b > first]
    if not hit:
        raise ValueError(f"no piece covers characters [{first}, {end})")
    return hit[0], hit[-1]


# ---------------------------------------------------------------- long contexts

@dataclass
class Window:
    """``[CLS] question [SEP] context[piece_start : piece_start + n] [SEP]``, and where the
    answer lies in it: ``start_position``/``end_position`` index the window's positions, or are
    ``None`` when the answer is not wholly inside this window (or there is no answer)."""

    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]  # each position's characters of the context; None outside it
    piece_start: int  # the context's first piece in this window
    start_position: int | None = None
    end_position: int | None = None

    @property
    def context_mask(self) -> list[int]:
        return [int(o is not None) for o in self.offsets]


def question_windows(tokenizer: Any, question: str, context: str, max_length: int, stride: int,
                     answer: tuple[int, int] | None = None) -> list[Window]:
    """The context cut into windows of at most ``max_length`` positions with the question in each.

    A window's context part starts ``stride`` pieces after the previous one's (BERT's
    ``doc_stride``; Hugging Face's ``stride`` is the overlap instead, room minus this stride), the
    last one reaching the context's end. ``answer`` is the answer's characters ``(first, end)`` in
    the context; a window that holds the whole answer gets its positions. An answer near a
    window's edge is whole in the next window when the overlap (room minus stride) is at least
    as long as the answer."""
    q = tokenizer.encode_ids(question)
    ctx = encode_offsets(tokenizer, context)
    room = max_length - len(q) - 3
    if room < 1:
        raise ValueError(f"the question takes {len(q)} pieces: no room for the context in "
                         f"{max_length} positions")
    if not 0 < stride <= room:
        raise ValueError(f"stride must be in [1, {room}] (the room for the context), got {stride}")
    answer_pieces = char_span_to_pieces(ctx.offsets, *answer) if answer is not None else None
    windows = []
    start = 0
    while True:
        part = range(start, min(start + room, len(ctx)))
        ids = [tokenizer.cls_id, *q, tokenizer.sep_id, *(ctx.ids[k] for k in part), tokenizer.sep_id]
        offsets = [None] * (len(q) + 2) + [ctx.offsets[k] for k in part] + [None]
        window = Window(ids, [0] * (len(q) + 2) + [1] * (len(part) + 1), offsets, start)
        if answer_pieces is not None and part.start <= answer_pieces[0] and answer_pieces[1] < part.stop:
            window.start_position = len(q) + 2 + answer_pieces[0] - start
            window.end_position = len(q) + 2 + answer_pieces[1] - start
        windows.append(window)
        if part.stop >= len(ctx):
            return windows
        start += stride


@dataclass(frozen=True)
class Answer:
    """A candidate answer: its text, its characters in the context, its score (start score plus
    end score) and the window it was read from."""

    text: str
    first: int
    end: int
    score: float
    window: int


def nbest_answers(windows: Sequence[Window], start_logits: Sequence[torch.Tensor],
                  end_logits: Sequence[torch.Tensor], context: str, n_best: int = 20,
                  max_answer_pieces: int = 30) -> list[Answer]:
    """The ``n_best`` best answers over all windows, best first, as BERT's ``run_squad.py`` picks
    them: in each window the ``n_best`` highest start scores and end scores are paired, and a pair
    is dropped when its start or end is outside the window's context (in the question, on
    ``[SEP]``, past the end: an answer must lie inside one window's context), when the end is
    before the start, or when it is longer than ``max_answer_pieces``. The same characters found
    in two overlapping windows count once, at their best score. An empty list: no window had a
    valid pair. Two of ``run_squad.py``'s rules differ: it also drops a start that is not in its
    window's "max context" (the window where the piece has the most context on both sides, its
    line 798), and its default cap is 30 pieces (line 113; chapter 13 passes 16)."""
    best: dict[tuple[int, int], Answer] = {}
    for w, (window, s_logits, e_logits) in enumerate(zip(windows, start_logits, end_logits)):
        s_logits, e_logits = torch.as_tensor(s_logits).float(), torch.as_tensor(e_logits).float()
        n = len(window.input_ids)
        k = min(n_best, n)
        starts = s_logits[:n].topk(k).indices.tolist()
        ends = e_logits[:n].topk(k).indices.tolist()
        for s in starts:
            for e in ends:
                if window.offsets[s] is None or window.offsets[e] is None:
                    continue
                if e < s or e - s + 1 > max_answer_pieces:
                    continue
                first, end = window.offsets[s][0], window.offsets[e][1]
                score = float(s_logits[s] + e_logits[e])
                if (first, end) not in best or best[first, end].score < score:
                    best[first, end] = Answer(context[first:end], first, end, score, w)
    return sorted(best.values(), key=lambda a: (-a.score, a.first, a.end))[:n_best]
