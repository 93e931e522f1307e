"""Chapter 8's judge of written text: repeats and the bigram fit, on texts written by hand."""

import math

import pytest

from mlm_lib.book import generation
from mlm_lib.book.generation import ARMS, generation_metrics, text_scores


@pytest.fixture
def counts(monkeypatch):
    """A training text of pieces 1 2 1 2 3 (vocabulary 10), in place of the book's."""
    from collections import Counter
    ids = [1, 2, 1, 2, 3]
    fake = (Counter(zip(ids, ids[1:])), Counter(ids), 10)
    monkeypatch.setattr(generation, "bigram_counts", lambda: fake)
    return fake


def test_a_loop_repeats_and_a_new_pair_does_not(counts):
    # prompt 1 2; written 1 2 1: the pairs (2,1), (1,2), (2,1) - the second and third were seen
    scores = text_scores([1, 2], [1, 2, 1])
    assert scores["repeats"] == pytest.approx(2 / 3)
    assert text_scores([1, 2], [3, 4])["repeats"] == 0


def test_the_bigram_fit_is_add_one_counts(counts):
    pairs, pieces, vocab = counts
    expected = -(math.log((pairs[(2, 1)] + 1) / (pieces[2] + vocab))
                 + math.log((pairs[(1, 2)] + 1) / (pieces[1] + vocab))) / 2
    assert text_scores([2], [1, 2])["bigram_nll"] == pytest.approx(expected)


def test_bad_input_is_named(counts):
    with pytest.raises(ValueError, match="nothing was written"):
        text_scores([1], [])
    with pytest.raises(ValueError, match="arm must be one of"):
        generation_metrics("a poet", 0)
    assert len(ARMS) == 3
