"""BERT's WordPiece tokenizer, id-for-id compatible with the original.

Tokenizing is two stages, exactly as in Google's ``tokenization.py``:

1. *Basic tokenization*: drop control characters and U+0000/U+FFFD, turn every whitespace into a
   space, put spaces around CJK ideographs, NFC-normalise, split on whitespace, optionally lowercase
   and strip accents (NFD, drop combining marks), and split off every punctuation character.
2. *WordPiece*: each word is cut greedily into the longest vocabulary piece from the left; pieces
   after the first carry the ``##`` continuation prefix. A word with an unmatched remainder, or
   longer than ``max_input_chars_per_word`` characters, becomes ``[UNK]`` as a whole.

Special tokens written literally in the text (``"Paris is the [MASK] of France"``) are kept whole,
as Hugging Face's tokenizers do, so a chapter can type a blank directly.

Speed comes from one observation: after the character-level clean-up, every whitespace-separated
chunk is processed independently. So a dict maps each chunk to its pieces and ids, and a corpus
with Zipf-distributed words is tokenized mostly by dict look-ups.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import torch

from mlm_lib.files import read_text

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# BERT's default: a longer "word" is hardly ever prose (a URL, a hash), so rather than being cut
# into a long run of pieces it becomes one [UNK].
MAX_INPUT_CHARS_PER_WORD = 100
# A special token written literally in a text, captured so that ``re.split`` keeps it.
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


# ----------------------------------------------------------------------------- character classes
def _is_whitespace(ch: str) -> bool:
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT treats every non-alphanumeric ASCII character as punctuation, e.g. "$", "^" and "`".
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    # The CJK Unified Ideographs blocks and their extensions, as in BERT's ``_is_chinese_char``
    # (Japanese kana and Korean hangul are written with spaces and are not included).
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class _CleanTable(dict):
    """A ``str.translate`` table, filled lazily: deletes control characters, maps whitespace to a
    space and spaces out CJK ideographs, in one C-level pass over the text."""

    def __init__(self, cjk: bool) -> None:
        super().__init__()
        self.cjk = cjk

    def __missing__(self, cp: int) -> str | None:
        ch = chr(cp)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            out: str | None = None
        elif _is_whitespace(ch):
            out = " "
        elif self.cjk and _is_cjk(cp):
            out = f" {ch} "
        else:
            out = ch
        self[cp] = out
        return out


class BasicTokenizer:
    """Stage 1 of BERT tokenization (see the module docstring); returns the list of words."""

    def __init__(self, do_lower_case: bool = True, tokenize_chinese_chars: bool = True,
                 strip_accents: bool | None = None) -> None:
        self.do_lower_case = do_lower_case
        self.strip_accents = strip_accents
        self._table = _CleanTable(tokenize_chinese_chars)

    def clean(self, text: str) -> str:
        """Character-level clean-up of the whole text (control chars, whitespace, CJK, NFC)."""
        text = text.translate(self._table)
        if not text.isascii():
            text = unicodedata.normalize("NFC", text)
        return text

    def split_chunk(self, chunk: str) -> list[str]:
        """Lowercase/strip accents and split off punctuation in one whitespace-free chunk."""
        if self.do_lower_case:
            chunk = chunk.lower()
            if self.strip_accents is not False:
                chunk = _strip_accents(chunk)
        elif self.strip_accents:
            chunk = _strip_accents(chunk)
        out = [chunk[first:end] for first, end in _punctuation_spans(chunk)]
        # Lowercasing can in principle create whitespace; re-split as the reference does.
        return " ".join(out).split()

    def tokenize(self, text: str) -> list[str]:
        words: list[str] = []
        for chunk in self.clean(text).split():
            words.extend(self.split_chunk(chunk))
        return words


def _punctuation_spans(chunk: str) -> list[tuple[int, int]]:
    """(first, end) of each word of a whitespace-free ``chunk``: every punctuation character is a
    word of its own. The one rule behind both the tokenizer's words and :func:`word_spans`."""
    spans: list[tuple[int, int]] = []
    start = 0
    for k, ch in enumerate(chunk):
        if is_punctuation(ch):
            if start < k:
                spans.append((start, k))
            spans.append((k, k + 1))
            start = k + 1
    if start < len(chunk):
        spans.append((start, len(chunk)))
    return spans


def word_spans(text: str) -> list[tuple[int, int]]:
    """(first, end) of every word of ``text``, in the text's own characters: whitespace splits,
    each punctuation character is a word of its own, and a literal special token (``[MASK]``)
    stays whole, as the tokenizer splits words.

    Why positions: a task labels the words of the original text (its case, its accents), so a
    word's characters must be found in that text, not in the lowercased words the tokenizer
    returns. The character clean-up (control characters, CJK spacing) is not applied."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for special in [*_SPECIAL_RE.finditer(text), None]:
        part_end = special.start() if special else len(text)
        for chunk in re.finditer(r"\S+", text[cursor:part_end]):
            base = cursor + chunk.start()
            spans += [(base + first, base + end) for first, end in _punctuation_spans(chunk.group())]
        if special:
            spans.append((special.start(), special.end()))
            cursor = special.end()
    return spans


def _strip_accents(text: str) -> str:
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


# ----------------------------------------------------------------------------- the tokenizer
@dataclass
class Encoding:
    """One encoded text (or pair): ids, segment ids (0 for A, 1 for B) and the token strings."""

    input_ids: list[int]
    token_type_ids: list[int]
    tokens: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)


class WordPieceTokenizer:
    """BERT's tokenizer over a ``vocab.txt`` (one piece per line, the line number is the id)."""

    CACHE_LIMIT = 1_000_000  # chunks kept in the look-up cache before it is cleared

    def __init__(self, vocab: dict[str, int] | Sequence[str], do_lower_case: bool = True,
                 tokenize_chinese_chars: bool = True, strip_accents: bool | None = None,
                 max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD) -> None:
        if not isinstance(vocab, dict):
            vocab = {tok: i for i, tok in enumerate(vocab)}
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"vocabulary lacks the special token(s) {missing}; BERT needs all of {list(SPECIAL_TOKENS)}")
        ids = sorted(vocab.values())
        if ids != list(range(len(ids))):
            raise ValueError("vocabulary ids must be 0..N-1 without gaps or duplicates")
        self.vocab: dict[str, int] = dict(vocab)
        self.ids_to_tokens: list[str] = [""] * len(vocab)
        for tok, i in vocab.items():
            self.ids_to_tokens[i] = tok
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word
        self.basic = BasicTokenizer(do_lower_case, tokenize_chinese_chars, strip_accents)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIAL_TOKENS)
        self.special_ids = frozenset((self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id))
        self._max_piece = max(len(t) for t in vocab)
        self._cache: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}

    # -- loading and saving
    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike, do_lower_case: bool = True, **kwargs) -> "WordPieceTokenizer":
        """Read a standard BERT ``vocab.txt``; a binary or non-UTF-8 file is refused clearly."""
        lines = read_text(path, "a vocab.txt").split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the final newline
        vocab: dict[str, int] = {}
        for n, line in enumerate(lines, start=1):
            tok = line.rstrip("\r").strip()
            # The id of a piece is its line number, so a blank or repeated line would shift ids.
            if not tok:
                raise ValueError(f"{path}: line {n} is blank; a vocab.txt has one piece per line")
            if tok in vocab:
                raise ValueError(f"{path}: line {n} repeats the piece {tok!r} of line {vocab[tok] + 1}")
            vocab[tok] = len(vocab)
        return cls(vocab, do_lower_case=do_lower_case, **kwargs)

    def vocab_text(self) -> str:
        """The content of ``vocab.txt``: one piece per line in id order, each line ending in "\\n"."""
        return "".join(token + "\n" for token in self.ids_to_tokens)

    def save_vocab(self, path: str | os.PathLike) -> None:
        """Write :meth:`vocab_text` as UTF-8 bytes, so the file is the same on every platform."""
        Path(path).write_bytes(self.vocab_text().encode("utf-8"))

    @property
    def vocab_size(self) -> int:
        return len(self.ids_to_tokens)

    def __len__(self) -> int:
        return self.vocab_size

    # -- WordPiece
    def wordpiece(self, word: str) -> list[str]:
        """Greedy longest-match-first split of one basic-tokenized word into vocabulary pieces."""
        if len(word) > self.max_input_chars_per_word:
            return ["[UNK]"]
        vocab, pieces, start, n = self.vocab, [], 0, len(word)
        while start < n:
            end = min(n, start + self._max_piece)
            cur = None
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return ["[UNK]"]
            pieces.append(cur)
            start = end
        return pieces

    def _chunk(self, chunk: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        hit = self._cache.get(chunk)
        if hit is None:
            pieces: list[str] = []
            for word in self.basic.split_chunk(chunk):
                pieces.extend(self.wordpiece(word))
            hit = (tuple(pieces), tuple(self.vocab[p] for p in pieces))
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache.clear()
            self._cache[chunk] = hit
        return hit

    def _tokenize(self, text: str, want_tokens: bool) -> tuple[list[str], list[int]]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        parts = _SPECIAL_RE.split(text) if "[" in text else [text]
        tokens: list[str] = []
        ids: list[int] = []
        for k, part in enumerate(parts):
            if k % 2:  # a literal special token
                tokens.append(part)
                ids.append(self.vocab[part])
                continue
            for chunk in self.basic.clean(part).split():
                toks, tids = self._chunk(chunk)
                ids.extend(tids)
                if want_tokens:
                    tokens.extend(toks)
        return tokens, ids

    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece strings, without [CLS]/[SEP]."""
        return self._tokenize(text, True)[0]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        unk = self.unk_id
        return [self.vocab.get(t, unk) for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        out = []
        for i in ids:
            if not 0 <= int(i) < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary (size {self.vocab_size})")
            out.append(self.ids_to_tokens[int(i)])
        return out

    # -- encoding
    def encode(self, text: str, pair: str | None = None, max_length: int | None = None,
               add_special_tokens: bool = True) -> Encoding:
        """``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` with segment ids 0 for A, 1 for B.

        With ``max_length`` the longer of A and B loses its last token until everything fits
        (BERT's ``truncate_seq_pair``; on a tie B is cut).
        """
        ta, a = self._tokenize(text, True)
        tb, b = self._tokenize(pair, True) if pair is not None else ([], [])
        if max_length is not None:
            extra = (3 if pair is not None else 2) if add_special_tokens else 0
            budget = max_length - extra
            if budget < 0:
                raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
            while len(a) + len(b) > budget:
                if len(a) > len(b):
                    a.pop(), ta.pop()
                else:
                    b.pop(), tb.pop()
        if not add_special_tokens:
            return Encoding(a + b, [0] * len(a) + [1] * len(b), ta + tb)
        ids = [self.cls_id] + a + [self.sep_id]
        toks = ["[CLS]"] + ta + ["[SEP]"]
        types = [0] * len(ids)
        if pair is not None:
            ids += b + [self.sep_id]
            toks += tb + ["[SEP]"]
            types += [1] * (len(b) + 1)
        return Encoding(ids, types, toks)

    def encode_ids(self, text: str) -> list[int]:
        """Just the WordPiece ids of ``text`` (no special tokens): the fast path for corpora."""
        return self._tokenize(text, False)[1]

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     max_length: int | None = None, padding: bool = True) -> dict[str, torch.Tensor]:
        """Encode several texts (or pairs) into padded LongTensors with an attention mask (1 = real)."""
        if isinstance(texts, str):
            raise ValueError("encode_batch expects a list of texts; use encode() for one text")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        encs = [self.encode(t, pairs[i] if pairs is not None else None, max_length) for i, t in enumerate(texts)]
        lengths = [len(e) for e in encs]
        if not padding and len(set(lengths)) > 1:
            raise ValueError("texts encode to different lengths; pass padding=True to batch them")
        return pad_batch([e.input_ids for e in encs], [e.token_type_ids for e in encs], self.pad_id)

    def decode(self, ids: Iterable[int] | torch.Tensor, skip_special_tokens: bool = True) -> str:
        """Join pieces with spaces and glue ``##`` continuations back onto their word.

        No other clean-up, so ``decode(encode(x))`` is exactly the basic-tokenized, space-joined
        form of ``x`` whenever all its words are in the vocabulary.
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        if skip_special_tokens:  # structural tokens only: [MASK] and [UNK] carry meaning in a text
            drop = {self.pad_id, self.cls_id, self.sep_id}
            ids = [i for i in ids if i not in drop]
        toks = self.convert_ids_to_tokens(ids)
        return " ".join(toks).replace(" ##", "").strip()


def pad_rows(rows: Sequence[Sequence[int]], value: int, width: int | None = None) -> torch.Tensor:
    """Rows of different lengths as one [B, width] LongTensor, each row right-padded with
    ``value`` (``width``: the longest row's length unless given). The one padder of the library:
    token ids pad with ``[PAD]``, segment ids and masks with 0, labels with ``IGNORE_INDEX``."""
    width = max((len(row) for row in rows), default=0) if width is None else width
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def pad_batch(input_ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]],
              pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad rows of token ids and segment ids into [B, T] LongTensors, with the
    ``attention_mask`` (1 = real token, 0 = padding) that keeps attention off the padding."""
    lengths = [len(row) for row in input_ids]
    if lengths != [len(row) for row in token_type_ids]:
        raise ValueError("every row of token ids needs a row of segment ids of its length")
    ids = pad_rows(input_ids, pad_id)
    return {"input_ids": ids, "token_type_ids": pad_rows(token_type_ids, 0, ids.shape[1]),
            "attention_mask": pad_rows([[1] * n for n in lengths], 0, ids.shape[1])}


def checkpoint_tokenizer(folder: str | os.PathLike) -> WordPieceTokenizer:
    """The tokenizer saved with a checkpoint: ``vocab.txt`` in ``folder``, else in the folder
    above it (a training run keeps one vocab.txt next to its ``step-XXXXXXXX`` folders)."""
    folder = Path(folder)
    for vocab in (folder / "vocab.txt", folder.parent / "vocab.txt"):
        if vocab.exists():
            return WordPieceTokenizer.from_vocab_file(vocab)
    raise FileNotFoundError(f"no vocab.txt in {folder} or {folder.parent}: a checkpoint folder keeps "
                            "the tokenizer it was trained with next to its weights")
