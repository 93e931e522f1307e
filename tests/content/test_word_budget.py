"""The book's length is a budget: say it once, briefly.

The count is scripts/word_count.py's: the Markdown a reader reads before each chapter's closing
"You can now", without math, code, HTML tags, folded <details> or link targets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from word_count import chapter_words, prose_words

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Sixteen chapters (0-15, chapters 7 and 13 on two pages) of about 1,000 words: the figures and
# forest plots say what bracketed intervals and null results used to, so the book shrank from
# 17,700 words as its chapters grew. Chapter 15's second page (the successors) added 800 words, and a
# fresh reading's fixes (what an interval does and does not show) about 170; chapter 13's
# development split and propagated labels, with chapter 12's rates by size, about 230 more, after
# cuts in chapter 13.
BOOK_BUDGET = 17_750
CHAPTER_BUDGET = 1_800


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_keeps_to_its_budget(path):
    words = chapter_words(path)
    assert words <= CHAPTER_BUDGET, f"{path.stem} has {words} words of prose (budget {CHAPTER_BUDGET})"


def test_the_book_keeps_to_its_budget():
    counts = {p.stem: chapter_words(p) for p in CHAPTERS}
    total = sum(counts.values())
    longest = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    assert total <= BOOK_BUDGET, f"the chapters hold {total} words (budget {BOOK_BUDGET}); longest {longest}"


def test_only_prose_is_counted():
    markdown = ("## Two words\n\nOne sentence, `code span`, $x_i$ and [a link](05_masked_only_sum.ipynb#m).\n\n"
                "$$L = -\\sum_{i \\in M} \\log P$$\n\n```python\nprint('not prose')\n```\n\n"
                "<details><summary>folded</summary>hidden words here</details>\n\n"
                "<span class=\"x\">shown</span> {numref}`fig-one`")
    # "Two words", "One sentence", "and a link", "shown"
    assert prose_words(markdown) == 8


def test_a_chapter_without_its_closing_summary_is_an_error(tmp_path):
    nb = tmp_path / "99_planted.ipynb"
    nb.write_text('{"cells": [{"cell_type": "markdown", "source": ["# Title"], "metadata": {}}]}')
    with pytest.raises(ValueError, match="closing"):
        chapter_words(nb)
