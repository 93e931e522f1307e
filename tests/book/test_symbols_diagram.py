"""Chapter 1's picture reads every number it shows from the sentence's ``SentenceLoss``."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from mlm_lib.inference import SentenceLoss
from mlm_lib.book.symbols_diagram import symbols_diagram

SVG = "{http://www.w3.org/2000/svg}"


def _text(svg: str) -> list[str]:
    return ["".join(e.itertext()) for e in ET.fromstring(svg).iter(SVG + "text")]


def test_each_blank_shows_its_vector_scores_probability_guess_and_term_and_l_is_their_sum():
    result = SentenceLoss(["[CLS]", "a", "cat", "sat", "[SEP]"], [2, 3], [math.log(0.25), math.log(0.01)],
                          ["dog", "ran"])
    texts = _text(symbols_diagram(result, hidden_size=96, vocab_size=1234))
    for phrase in ["h_2", "h_3", "96 numbers: position 2 in context", "1,234 scores", "P(cat | x\\M) = 0.25",
                   "softmax over V; top guess: dog", "P(sat | x\\M) = 0.01", "−log P = 1.39", "−log P = 4.61",
                   "M = {2, 3}", "L = −Σ over M of log P = 1.39 + 4.61 = 5.99"]:
        assert phrase in texts, f"{phrase!r} not drawn"
    assert texts.count("[MASK]") == 2  # x\M hides exactly the positions of M


def test_a_sentence_wider_than_the_column_or_an_empty_m_is_refused():
    with pytest.raises(ValueError, match="column"):
        symbols_diagram(SentenceLoss(["[CLS]"] + ["longword"] * 20 + ["[SEP]"], [1], [-1.0], ["x"]), 8, 10)
    with pytest.raises(ValueError, match="non-empty M"):
        symbols_diagram(SentenceLoss(["[CLS]", "a", "[SEP]"], [], [], []), 8, 10)
