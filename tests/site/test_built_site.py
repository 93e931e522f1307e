"""The built site's own files, read without a browser: the version the book states, the recall
deck that the recall_anki extension writes, and the gym page as Sphinx rendered it. Run after ``make book``."""

from __future__ import annotations

import csv
import re

import recall_anki

import mlm_lib
from mlm_lib.book import recall


def _rows(deck: str) -> list[list[str]]:
    lines = deck.splitlines()
    assert lines[:3] == ["#separator:tab", "#html:true", "#tags column:3"]
    return list(csv.reader(lines[3:], delimiter="\t"))


def test_anki_deck_is_in_the_built_site(site):
    deck = site / "_static" / recall_anki.OUTPUT
    assert deck.exists(), f"{deck} is missing: the recall_anki extension did not run"
    rows = _rows(deck.read_text(encoding="utf-8"))
    assert len(rows) == len(recall.load_items()) and all(len(r) == 3 for r in rows)
    gym = (site / "book" / "gym.html").read_text(encoding="utf-8")
    assert f'href="../_static/{recall_anki.OUTPUT}"' in gym


def test_the_built_gym_shows_no_escaped_bracket(site):
    gym = (site / "book" / "gym.html").read_text(encoding="utf-8")
    shown = re.sub(r"<[^>]+>", "", gym)
    assert "Shown in Chapter" in shown
    escaped = sorted(set(re.findall(r"[^\n]{0,40}\\[\[\]][^\n]{0,20}", shown)))
    assert not escaped, f"backslash-escaped brackets on the gym page: {escaped}"


def test_the_site_shows_the_version(site):
    text = re.sub(r"<[^>]+>", "", (site / "book" / "intro.html").read_text(encoding="utf-8"))
    assert f"This is version {mlm_lib.__version__} of the book" in text
