"""Printed code only where it is discussed.

A page a reader can finish shows the code its prose walks through: the few lines that compute the
piece of the formula a section teaches. The code that builds an experiment, a widget, a table or a
check folds behind its "Show code cell source" toggle (tag ``hide-input``); the notebook shows all
of it, and the outputs stay on the page. Two limits keep it so: the code a chapter shows at open,
and the longest cell it shows (a longer one is split, its set-up folded).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Tags under which the site shows no code at open (jupyter-book's hide-input and hide-cell fold it).
FOLDED = frozenset({"hide-input", "remove-input", "hide-cell", "remove-cell"})
# At open, a chapter shows at most this many lines of code (the most today: 122, chapter 9's
# merges by hand), and no single cell longer than a screen of code.
SHOWN_CODE_LINES = 125
SHOWN_CELL_LINES = 30


def shown_code(nb: nbformat.NotebookNode) -> list[int]:
    """The line counts of the code cells a reader sees without opening anything."""
    return [len(c.source.splitlines()) for c in nb.cells
            if c.cell_type == "code" and not FOLDED & set(c.metadata.get("tags", []))]


def code_problems(nb: nbformat.NotebookNode) -> list[str]:
    lines = shown_code(nb)
    problems = []
    if sum(lines) > SHOWN_CODE_LINES:
        problems.append(f"shows {sum(lines)} lines of code at open (at most {SHOWN_CODE_LINES}): "
                        "fold the cells that build experiments, widgets, tables and checks")
    if lines and max(lines) > SHOWN_CELL_LINES:
        problems.append(f"shows a cell of {max(lines)} lines (at most {SHOWN_CELL_LINES}): split it "
                        "and fold its set-up")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_page_shows_only_the_code_it_discusses(path):
    problems = code_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.stem} {problems[0]}"


def test_the_code_check_sees_planted_pages():
    def page(*cells: tuple[int, list[str]]) -> nbformat.NotebookNode:
        nb = nbformat.v4.new_notebook()
        for n, tags in cells:
            cell = nbformat.v4.new_code_cell("\n".join(["x = 1"] * n))
            cell.metadata["tags"] = tags
            nb.cells.append(cell)
        return nb

    assert not code_problems(page((20, []), (200, ["hide-input"]), (50, ["hide-cell"])))
    assert code_problems(page(*[(25, [])] * 6))          # too much code at open
    assert code_problems(page((SHOWN_CELL_LINES + 1, [])))  # one cell too long
    assert code_problems(page((40, ["nbval-check-output"])))  # other tags fold nothing
