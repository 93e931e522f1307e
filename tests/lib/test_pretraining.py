"""Pretraining examples in the style of BERT's create_pretraining_data.py."""

from __future__ import annotations

import random
import time

import pytest
import torch

from mlm_lib.batches import collate
from mlm_lib.corpus import Document, load_wikipedia
from mlm_lib.pretraining import PretrainingExample, create_pretraining_examples, truncate_seq_pair
from mlm_lib.packaged import default_tokenizer
from mlm_lib.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

N_DOCS, N_SENTS = 12, 30


@pytest.fixture(scope="module")
def traced():
    """A corpus whose every token says which document and sentence it came from."""
    words = [f"d{d}s{s}" for d in range(N_DOCS) for s in range(N_SENTS)]
    tok = WordPieceTokenizer(list(SPECIAL_TOKENS) + words)
    rng = random.Random(0)
    docs = [Document(str(d), [" ".join([f"d{d}s{s}"] * rng.randint(3, 25)) for s in range(N_SENTS)])
            for d in range(N_DOCS)]
    return tok, docs


def origin(tok: WordPieceTokenizer, i: int) -> tuple[int, int]:
    d, s = tok.ids_to_tokens[i][1:].split("s")
    return int(d), int(s)


def segments(tok, ex: PretrainingExample) -> tuple[list[int], list[int]]:
    first = ex.input_ids.index(tok.sep_id)
    return ex.input_ids[1:first], ex.input_ids[first + 1:-1]


@pytest.mark.parametrize("max_len", [16, 64, 128])
def test_layout_and_nsp_labels_are_true(traced, max_len):
    tok, docs = traced
    examples = create_pretraining_examples(docs, tok, max_seq_length=max_len, seed=1)
    assert examples
    adjacent = 0
    for ex in examples:
        ids, types = ex.input_ids, ex.token_type_ids
        assert len(ids) == len(types) <= max_len
        assert ids[0] == tok.cls_id and ids[-1] == tok.sep_id and ids.count(tok.sep_id) == 2
        a, b = segments(tok, ex)
        assert a and b
        assert types == [0] * (len(a) + 2) + [1] * (len(b) + 1)
        oa, ob = [origin(tok, i) for i in a], [origin(tok, i) for i in b]
        assert len({d for d, _ in oa}) == 1 and len({d for d, _ in ob}) == 1
        sa = sorted({s for _, s in oa})
        assert sa == list(range(sa[0], sa[-1] + 1)), "A is a run of consecutive sentences"
        if ex.is_next:
            assert oa[0][0] == ob[0][0]
            gap = min(s for _, s in ob) - max(s for _, s in oa)
            assert gap >= 1, "B comes after A"
            adjacent += gap == 1  # a larger gap only when truncation ate B's first sentence
        else:
            assert oa[0][0] != ob[0][0], "NotNext B comes from another document"
    n_next = sum(e.is_next for e in examples)
    assert n_next > 0 and adjacent >= 0.8 * n_next


def test_long_examples_fill_up_to_the_target(traced):
    tok, docs = traced
    examples = create_pretraining_examples(docs, tok, max_seq_length=64, short_seq_prob=0.0, seed=2)
    lengths = torch.tensor([len(e) for e in examples], dtype=torch.float)
    assert lengths.max() == 64
    assert lengths.median() >= 60  # chunks are filled until they reach the target


def test_short_sequence_probability(traced):
    tok, docs = traced
    def short_fraction(p: float) -> float:
        ex = create_pretraining_examples(docs, tok, max_seq_length=128, short_seq_prob=p, seed=3)
        return sum(len(e) < 64 for e in ex) / len(ex)
    assert short_fraction(0.0) < 0.1
    assert short_fraction(1.0) > 0.3


def test_deterministic_per_seed(traced):
    tok, docs = traced
    a = create_pretraining_examples(docs, tok, seed=7)
    assert a == create_pretraining_examples(docs, tok, seed=7)
    assert a != create_pretraining_examples(docs, tok, seed=8)
    assert len(create_pretraining_examples(docs, tok, seed=7, dupe_factor=3)) > 2 * len(a)


def test_without_nsp_single_segments(traced):
    tok, docs = traced
    for ex in create_pretraining_examples(docs, tok, max_seq_length=50, nsp=False, seed=0):
        assert ex.input_ids[0] == tok.cls_id and ex.input_ids[-1] == tok.sep_id
        assert ex.input_ids.count(tok.sep_id) == 1 and set(ex.token_type_ids) == {0}
        assert len(ex) <= 50 and ex.is_next == 1
        s = [origin(tok, i) for i in ex.input_ids[1:-1]]
        assert len({d for d, _ in s}) == 1


def test_truncate_seq_pair():
    rng = random.Random(0)
    a, b = list(range(10)), list(range(100, 104))
    truncate_seq_pair(a, b, 8, rng)
    assert len(a) + len(b) == 8 and len(b) == 4 and len(a) == 4
    assert all(x in range(10) for x in a) and a == sorted(a)
    a, b = list(range(6)), list(range(100, 106))
    truncate_seq_pair(a, b, 6, rng)
    assert len(a) == len(b) == 3


def test_collate_pads_on_the_right():
    ex = [PretrainingExample([2, 7, 3, 8, 3], [0, 0, 0, 1, 1], 1), PretrainingExample([2, 9, 3], [0, 0, 0], 0)]
    batch = collate(ex, pad_id=0)
    assert batch["input_ids"].tolist() == [[2, 7, 3, 8, 3], [2, 9, 3, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["is_next"].tolist() == [1, 0]
    assert all(t.dtype == torch.long for t in batch.values())
    with pytest.raises(ValueError, match="empty"):
        collate([], 0)


def test_bad_arguments(traced):
    tok, docs = traced
    with pytest.raises(ValueError, match="too short"):
        create_pretraining_examples(docs, tok, max_seq_length=4)
    with pytest.raises(ValueError, match="short_seq_prob"):
        create_pretraining_examples(docs, tok, short_seq_prob=1.5)
    with pytest.raises(ValueError, match="no document"):
        create_pretraining_examples([Document("empty", ["\x00"])], tok)


def test_whole_corpus_is_fast_and_balanced():
    docs, tok = load_wikipedia(), default_tokenizer()
    t0 = time.perf_counter()
    examples = create_pretraining_examples(docs, tok, max_seq_length=128, seed=0)
    assert time.perf_counter() - t0 < 30
    n = len(examples)
    assert n > 4000
    is_next = sum(e.is_next for e in examples)
    # half IsNext up to the few forced NotNext (single-sentence chunks): within 5 sigma of 0.5, minus 5%
    assert 0.45 * n - 5 * (n ** 0.5) / 2 < is_next < 0.5 * n + 5 * (n ** 0.5) / 2
    assert sum(len(e) for e in examples) / n > 110
