"""Every chapter closes: what the reader can now do, then exercises with hidden worked solutions.

The format is the book's (CONTRIBUTING.md, "Writing a chapter"): a `## You can now` cell of 3 to 5 bullets
just before `## Recall`, and after the recall cells an `## Exercises` cell followed by 2 to 4
cells `### Exercise N: title`, each holding its solution in a closed `<details>` block, which
folds on the site, in JupyterLab and in a notebook opened without running it. A solution that
needs numbers computes them in a code cell hidden on the site (`hide-cell`) and in JupyterLab
(`source_hidden`, `outputs_hidden`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FINAL_PAGE = ROOT / "book" / "whole_formula.md"

BULLETS = (3, 5)
EXERCISES = (2, 4)
EXERCISE = re.compile(r"^### Exercise (\d+): \S", re.M)
SOLUTION = re.compile(r"<details>\s*<summary>Solution</summary>\s*\n\n(?P<body>.+?)\n\n\s*</details>",
                      re.S)
MIN_SOLUTION_CHARS = 120  # a worked solution, not "yes"
SOLUTION_CELL = re.compile(r"^# Solution to exercise (\d+)$", re.M)


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _heading_index(cells: list[dict], heading: str) -> int:
    hits = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
            and (_source(c).strip() == heading or _source(c).lstrip().startswith(heading + "\n"))]
    if len(hits) != 1:
        raise LookupError(f"expected one cell starting with {heading!r}, found {len(hits)}")
    return hits[0]


def closing_problems(nb: dict) -> list[str]:
    """Every way this chapter's closing departs from the format (empty when it follows it)."""
    cells, problems = nb["cells"], []
    try:
        now = _heading_index(cells, "## You can now")
        recall = _heading_index(cells, "## Recall")
        exercises = _heading_index(cells, "## Exercises")
    except LookupError as err:
        return [str(err)]
    if now != recall - 1:
        problems.append("`## You can now` must be the cell just before `## Recall`")
    bullets = [line for line in _source(cells[now]).splitlines() if line.startswith("- ")]
    if not BULLETS[0] <= len(bullets) <= BULLETS[1]:
        problems.append(f"`## You can now` has {len(bullets)} bullets, not {BULLETS[0]} to {BULLETS[1]}")
    if exercises < recall:
        problems.append("`## Exercises` must come after the recall cells")
    found = []
    for cell in cells[exercises + 1:]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            m = EXERCISE.search(text)
            if not m:
                problems.append(f"after `## Exercises` every Markdown cell is an exercise: {text[:60]!r}")
                continue
            number = int(m.group(1))
            found.append(number)
            sol = SOLUTION.search(text)
            if not sol or "<details open" in text:
                problems.append(f"exercise {number} has no closed <details> block with a "
                                f"<summary>Solution</summary> and blank lines around its text")
            elif len(sol.group("body").strip()) < MIN_SOLUTION_CHARS:
                problems.append(f"exercise {number}'s solution is not worked ({len(sol.group('body'))} chars)")
            elif text.index("<details>") < m.end() + 40:
                problems.append(f"exercise {number} states no task before its solution")
        elif cell["cell_type"] == "code":
            m = SOLUTION_CELL.search(text)
            meta = cell.get("metadata", {})
            hidden = meta.get("jupyter", {})
            if not m or not found or int(m.group(1)) != found[-1]:
                problems.append(f"a code cell after `## Exercises` must start `# Solution to exercise N` "
                                f"for the exercise above it: {text[:60]!r}")
            if "hide-cell" not in meta.get("tags", []) or not (hidden.get("source_hidden")
                                                               and hidden.get("outputs_hidden")):
                problems.append("a solution cell must be hidden: tag hide-cell, and "
                                "jupyter.source_hidden and outputs_hidden")
    if found != list(range(1, len(found) + 1)):
        problems.append(f"exercises must be numbered 1, 2, ...: found {found}")
    if not EXERCISES[0] <= len(found) <= EXERCISES[1]:
        problems.append(f"{len(found)} exercises, not {EXERCISES[0]} to {EXERCISES[1]}")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_closes(path):
    problems = closing_problems(json.loads(path.read_text()))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


SOLUTION_TEXT = "A worked solution that explains the reasoning step by step and says what the run shows. " * 2
GOOD = [
    _md("## You can now\n\n- one\n- two\n- three\n"),
    _md("## Recall"),
    {"cell_type": "code", "metadata": {}, "source": "reveal('q', 'a')"},
    _md("## Exercises\n\nTry these."),
    _md("### Exercise 1: change the rate\n\nChange the rate in the cell above, predict, then run.\n\n"
        f"<details>\n<summary>Solution</summary>\n\n{SOLUTION_TEXT}\n\n</details>\n"),
    {"cell_type": "code", "source": "# Solution to exercise 1\nprint(1)",
     "metadata": {"tags": ["hide-cell"], "jupyter": {"source_hidden": True, "outputs_hidden": True}}},
    _md("### Exercise 2: another\n\nSay why the loss cannot be negative, then check it below.\n\n"
        f"<details>\n<summary>Solution</summary>\n\n{SOLUTION_TEXT}\n\n</details>\n"),
]


def test_the_check_accepts_the_format_and_names_each_departure():
    assert closing_problems({"cells": GOOD}) == []
    one_exercise = GOOD[:6]
    assert any("1 exercises" in p for p in closing_problems({"cells": one_exercise}))
    open_solution = GOOD[:6] + [_md(GOOD[6]["source"].replace("<details>", "<details open>"))]
    assert any("closed <details>" in p for p in closing_problems({"cells": open_solution}))
    visible_cell = GOOD[:5] + [dict(GOOD[5], metadata={})] + GOOD[6:]
    assert any("must be hidden" in p for p in closing_problems({"cells": visible_cell}))
    two_bullets = [_md("## You can now\n\n- one\n- two\n")] + GOOD[1:]
    assert any("2 bullets" in p for p in closing_problems({"cells": two_bullets}))
    short = GOOD[:6] + [_md("### Exercise 2: x\n\nSay why the loss is never below zero here.\n\n"
                            "<details>\n<summary>Solution</summary>\n\nYes.\n\n</details>\n")]
    assert any("not worked" in p for p in closing_problems({"cells": short}))
    assert closing_problems({"cells": GOOD[1:]}) == ["expected one cell starting with '## You can now', found 0"]


def test_the_final_page_brings_back_every_chapter():
    text = FINAL_PAGE.read_text()
    missing = [p.name for p in CHAPTERS if p.name.startswith(("01", "02", "03", "04", "05"))
               and f"{p.stem}" not in text]
    assert not missing, f"{FINAL_PAGE.name} does not link the formula chapters {missing}"
    assert "\\sum_{i \\in M}" in text, "the final page must show the formula whole"
