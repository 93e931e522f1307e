"""What the recall items ask, not only how they are written (tests/book/test_recall.py checks the
format): true-or-false answers that a reader cannot guess by always saying "false", predict-then-run
items placed right before the experiment they ask about, enough multiple-choice items, find-the-bug
items that show the code, and a gym that asks each trap in a new context instead of repeating the
chapter."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from mlm_lib.book import recall

pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
ITEMS = recall.load_items()

# The share of true statements a true-or-false set must keep, in the chapters and in the gym: near
# one half, so that always answering "false" (or "true") scores no better than a coin.
TRUE_SHARE = (0.35, 0.65)
# Chapters with a key experiment: each has at least one predict-then-run item before one.
PREDICT_CHAPTERS = [2, 3, 4, 5, 6, 7, 8, 10, 11, 12]
MIN_MULTIPLE_CHOICE = 6
# How alike a gym item's question may be to its chapter item's (difflib's ratio, 0 to 1): above
# this, the gym is rewording the chapter rather than asking the trap anew.
MAX_GYM_LIKENESS = 0.75
# The ids of items that are not on a bank id: P (predict, then run), N (a number to work out),
# B (find the bug), Q (other), followed by <chapter>.<n>.
OWN_ID = re.compile(r"([PNBQ])(\d+)\.(\d+)")


def _chapter_items() -> list[recall.Item]:
    return [i for i in ITEMS.values() if i.file not in ("gym.yml", "pages.yml")]


def true_share(items: list[recall.Item]) -> float:
    tf = [i for i in items if i.kind == "true-or-false"]
    return sum(i.fields["answer"] is True for i in tf) / len(tf)


@pytest.mark.parametrize("group", ["chapters", "gym"])
def test_true_or_false_answers_are_balanced(group):
    items = _chapter_items() if group == "chapters" else [i for i in ITEMS.values() if i.file == "gym.yml"]
    share = true_share(items)
    low, high = TRUE_SHARE
    assert low <= share <= high, f"{group}: {share:.0%} of the true-or-false items are true"


def _question(item: recall.Item) -> str:
    return " ".join((item.fields.get("question") or item.fields.get("statement") or "").split()).lower()


def gym_likeness(items: dict[str, recall.Item]) -> dict[str, float]:
    """For each gym item, how alike its question is to its chapter item's."""
    return {k: difflib.SequenceMatcher(None, _question(i), _question(items[k[: -len(".gym")]])).ratio()
            for k, i in items.items() if k.endswith(".gym")}


def test_the_gym_asks_each_trap_in_a_new_context():
    alike = {k: round(r, 2) for k, r in gym_likeness(ITEMS).items() if r > MAX_GYM_LIKENESS}
    assert alike == {}, f"gym items worded like their chapter items: {alike}"


def test_own_ids_name_their_chapter():
    for item in _chapter_items():
        m = OWN_ID.fullmatch(item.id)
        if m:
            assert item.file.startswith(f"{int(m.group(2)):02d}_"), f"{item.id} is in {item.file}"


def test_enough_multiple_choice_items_with_a_wrong_option():
    mc = [i for i in _chapter_items() if i.kind == "multiple-choice"]
    assert len(mc) >= MIN_MULTIPLE_CHOICE
    for item in [i for i in ITEMS.values() if i.kind == "multiple-choice"]:
        assert any(o["correct"] is False for o in item.fields["options"]), \
            f"{item.id}: every option is right, so nothing is asked"


def test_find_the_bug_items_show_code():
    bugs = [i for i in _chapter_items() if i.id.startswith("B")]
    assert len(bugs) >= 3
    for item in bugs:
        text = item.fields.get("statement") or item.fields.get("question")
        assert re.search(r"`[^`]*[(=][^`]*`", text), f"{item.id}: no code snippet in the text"


def _recall_ids(cell: dict) -> list[str]:
    return re.findall(r"""\brecall\(\s*["']([^"']+)["']""", "".join(cell["source"]))


def predict_placement(nb: dict) -> dict[str, str]:
    """Each predict item's problem, '' when it sits right before a code cell that is not a recall
    cell and above the chapter's Recall section."""
    found, in_recall = {}, False
    cells = nb["cells"]
    for k, cell in enumerate(cells):
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and re.search(r"^##\s+Recall\b", src, re.M):
            in_recall = True
        for item_id in _recall_ids(cell) if cell["cell_type"] == "code" else []:
            if not item_id.startswith("P"):
                continue
            following = cells[k + 1] if k + 1 < len(cells) else None
            if in_recall:
                found[item_id] = "in the Recall section"
            elif following is None or following["cell_type"] != "code" or _recall_ids(following):
                found[item_id] = "not followed by the experiment's code cell"
            else:
                found[item_id] = ""
    return found


@pytest.mark.parametrize("number", PREDICT_CHAPTERS)
def test_predict_items_come_right_before_an_experiment(number):
    stems = [s for s in NOTEBOOKS if s.startswith(f"{number:02d}_")]  # a chapter may have two pages
    stem = "+".join(stems)
    placed = {k: v for s in stems for k, v in predict_placement(json.loads(NOTEBOOKS[s].read_text())).items()}
    assert placed, f"{stem}: no predict-then-run item"
    problems = {k: v for k, v in placed.items() if v}
    assert problems == {}, f"{stem}: {problems}"
    for item_id in placed:
        assert ITEMS[item_id].kind in ("reveal", "multiple-choice")
        assert ITEMS[item_id].fields["question"].startswith("Predict"), \
            f"{item_id}: say that it asks for a prediction"


def right_answer_positions(items: list[recall.Item], n_options: int = 4) -> list[int]:
    """Where the right answer is shown, for each single-answer item with ``n_options`` options."""
    positions = []
    for item in items:
        if item.kind != "multiple-choice" or len(item.fields["options"]) != n_options:
            continue
        right = [k for k, o in enumerate(item.shown_options()) if o["correct"]]
        if len(right) == 1:
            positions += right
    return positions


def spread_problem(positions: list[int], n_options: int = 4) -> str:
    """'' when the right answers use every position and no position holds half of them."""
    counts = [positions.count(k) for k in range(n_options)]
    if min(counts) == 0 or max(counts) > len(positions) / 2:
        return f"right answers by shown position: {counts}"
    return ""


def test_right_answers_spread_over_the_shown_positions():
    positions = right_answer_positions(list(ITEMS.values()))
    assert len(positions) >= 8, "too few single-answer multiple-choice items to judge the spread"
    assert spread_problem(positions) == ""


def test_the_widget_shows_the_options_in_the_seeded_order():
    item = next(i for i in ITEMS.values() if i.kind == "multiple-choice" and not i.placeholders())
    assert item.shown_options() == item.shown_options()  # the same on every run
    assert sorted(map(str, item.shown_options())) == sorted(map(str, item.fields["options"]))
    shown = re.findall(r'class="recall-choice".*?<summary[^>]*>(.*?)</summary>', str(recall.render(item)))
    assert shown == [recall.render_text(o["text"]) for o in item.shown_options()]


def test_the_spread_check_catches_answers_always_last():
    planted = [recall.Item(f"X{k}", "x.yml", {"kind": "multiple-choice", "question": "q", "options": [
        {"text": t, "correct": t == "d", "why": "w"} for t in "abcd"]}) for k in range(12)]
    always_last = [3] * 12
    assert spread_problem(always_last) != ""
    assert spread_problem(right_answer_positions(planted)) == ""  # shuffled by id, they spread


# Every chapter asks at least this many recall items (a chapter with one or two cannot test the
# traps of its own material).
MIN_ITEMS_PER_CHAPTER = 4


def thin_chapters(notebooks: dict[str, dict]) -> dict[str, int]:
    """Chapter -> number of recall items it shows, for chapters below MIN_ITEMS_PER_CHAPTER."""
    counts = {stem: len({i for c in nb["cells"] if c["cell_type"] == "code" for i in _recall_ids(c)})
              for stem, nb in notebooks.items()}
    return {stem: n for stem, n in counts.items() if n < MIN_ITEMS_PER_CHAPTER}


def test_every_chapter_asks_at_least_four_items():
    assert thin_chapters({s: json.loads(p.read_text()) for s, p in NOTEBOOKS.items()}) == {}


def test_the_thin_chapter_check_sees_a_planted_chapter():
    cell = {"cell_type": "code", "source": ['recall("E4")\n']}
    assert thin_chapters({"09_wordpiece": {"cells": [cell, cell]}}) == {"09_wordpiece": 1}
