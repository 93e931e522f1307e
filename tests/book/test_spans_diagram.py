"""Chapter 13's drawings of labels on pieces and of windows read what mlm_lib.spans returned."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from mlm_lib.spans import Window
from mlm_lib.book.spans_diagram import alignment_diagram, windows_diagram

SVG = "{http://www.w3.org/2000/svg}"
TAGS = ["O", "B-LINK", "I-LINK"]


def _texts(svg: str) -> list[str]:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG + "text")]


def test_a_word_spans_its_pieces_and_only_first_pieces_carry_a_tag():
    svg = alignment_diagram(["Aristotle", "tutored"], ["[CLS]", "aristotle", "tu", "##tored", "[SEP]"],
                            [None, 0, 1, 1, None], [-100, 1, 0, -100, -100], TAGS, "labels")
    root = ET.fromstring(svg)
    texts = _texts(svg)
    assert texts.count("-100") == 3 and "B-LINK" in texts and "O" in texts
    rects = {(r.get("y"), float(r.get("x"))): float(r.get("width")) for r in root.iter(SVG + "rect")}
    word_row = min(float(y) for y, _ in rects)
    tutored = [w for (y, x), w in rects.items() if float(y) == word_row][1]
    pieces = sorted((x, w) for (y, x), w in rects.items() if float(y) == word_row + 28)
    assert tutored == pytest.approx(pieces[2][1] + pieces[3][1] + 2)  # "tutored" over "tu" and "##tored"
    with pytest.raises(ValueError, match="one of each per position"):
        alignment_diagram(["a"], ["a"], [0, None], [0], TAGS, "x")


def _window(start: int, n: int, holds: bool) -> Window:
    offsets = [None, None] + [(k, k + 1) for k in range(start, start + n)] + [None]
    return Window([0] * len(offsets), [0] * len(offsets), offsets, start, 3 if holds else None, 3 if holds else None)


def test_each_window_is_a_bar_and_the_answer_is_coloured_only_where_it_is_whole():
    windows = [_window(0, 10, True), _window(5, 10, False)]
    svg = windows_diagram(windows, 15, (1, 1), "windows")
    root = ET.fromstring(svg)
    assert _texts(svg)[1:3] == ["window 0", "window 1"]
    bars = [r for r in root.iter(SVG + "rect") if r.get("height") == "16"]
    assert len(bars) == 3  # two windows and the answer, once
    assert "whole in windows [0]" in root.get("aria-label")
    with pytest.raises(ValueError, match="at least one window"):
        windows_diagram([], 10, None, "x")
