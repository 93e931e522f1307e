"""Chapter 9's drawings of words as pieces: letters in columns, every row the same words."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from mlm_lib.book.diagram import GRID_FILLS
from mlm_lib.book.pieces_diagram import CHAR_W, pieces_diagram

SVG = "{http://www.w3.org/2000/svg}"


def test_a_piece_is_as_wide_as_its_letters_and_a_new_unit_is_marked():
    rows = [("start", [["l", "##o", "##w"]], None), ("1: ##o + ##w", [["l", "##ow"]], "##ow")]
    root = ET.fromstring(pieces_diagram(rows, "one merge"))
    boxes = [r for r in root.iter(SVG + "rect") if r.get("height") == "24"]
    assert [float(b.get("width")) for b in boxes] == [CHAR_W] * 3 + [CHAR_W, 2 * CHAR_W]
    assert float(boxes[4].get("x")) == float(boxes[1].get("x"))  # "ow" starts where "o" did
    assert boxes[4].get("fill") == GRID_FILLS["in M"] and boxes[1].get("fill") != GRID_FILLS["in M"]
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    assert "ow" in texts and "##ow" not in texts  # shown without its ##, shaded instead
    assert "the unit this row made" in texts


def test_rows_that_spell_other_words_or_too_many_letters_are_refused():
    with pytest.raises(ValueError, match="spells"):
        pieces_diagram([("a", [["low"]], None), ("b", [["lo", "##g"]], None)], "x")
    with pytest.raises(ValueError, match="column"):
        pieces_diagram([("a", [["x" * 60]], None)], "x")
    with pytest.raises(ValueError, match="at least one row"):
        pieces_diagram([], "x")


def test_the_label_lists_every_rows_pieces():
    label = ET.fromstring(pieces_diagram([("300", [["p", "##l"]], None)], "cuts")).get("aria-label")
    assert re.fullmatch(r"cuts: 300: p ##l", label)
