"""The prose cannot drift from the outputs.

Every number with a decimal point or a percent sign in a chapter's Markdown, and in the recall
items it shows (with the gym's items on the questions it demonstrates), must be one the
chapter printed in a cell that nbval checks (tagged ``nbval-check-output``; at the precision
written, or as a percentage of a printed fraction), or a number of a results file the chapter
loads, or a number printed in a checked cell of a chapter the sentence links to. Sentences that
cite a source (``{cite}``) and the constants listed below are exempt. A number that is derived (a
gap, a ratio) must therefore be printed by the cell it comes from, and a number that a live run
prints to the last digit, which differs from one CPU to another, cannot be quoted: print it at the
precision that holds on every CPU, in a checked cell, or quote a results file.

**Live digits.** The exercises' worked solutions are Markdown too, folded in ``<details>`` blocks
whose summary is "Solution", above the ``hide-cell`` code cell that works them; they are held to the
same rule. Integers are not held to it (most are settings: 150 steps, 12 layers), but none may
rest on a cell nbval does not check: an integer of two or more digits that an unchecked cell
(a ``hide-cell`` solution, a ``hide-input`` cell) prints is an error in the prose or a solution
unless a checked cell, a results file, a linked chapter's checked cells or a number literal of
the chapter's code (a setting) shows it too.

**Numbers in words.** A share or a ratio in words claims a measured value as digits do. A share
word (a third, two thirds, a quarter, three quarters, a fifth, a tenth, half, most, nearly all,
almost none) counts when a measured thing follows it, through "of" or a determiner for "most"
("almost half its attention", "most of the gap"; see ``MEASURED``); a ratio word (twice, doubles,
halves, triples, "N times") when a comparison or an object follows it ("twice the work", "ten
times smaller"). Headings and cited sentences are exempt, as for digits. Each such word is backed
when its clause (its sentence up to a ";" or ":") quotes a number the chapter printed by the rule
above (not a constant), or when a code cell right beside its Markdown cell (above or below, up
to the next Markdown cell) shows a value in the word's range (``SHARE_WORDS``, ``RATIO_WORDS``:
"half" is 0.40 to 0.60, "a third" 0.28 to 0.39, "most" 0.50 to 0.99, "N times" 0.85 N to
1.15 N): a checked output printing it (a share as a fraction or a percentage, a ratio with a
decimal point), or a number literal of the cell's source, for a word that states a setting ("a
fifth of the sentences" beside ``test_size=0.2``). A match by value can be a coincidence; looking
only beside the sentence keeps that rare. ``WORDS_NOT_MEASURED`` lists the exceptions, each with
its reason.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from mlm_lib.book import recall
from mlm_lib.book.results import load_results

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# A prose number: 0.234, 1,024.5, 15%, 15.3 %. Not part of a dotted version (2.13.0).
PROSE_NUMBER = re.compile(r"(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?\s?%|\d[\d,]*\.\d+)(?![\d]|\.\d)")
OUTPUT_NUMBER = re.compile(r"(?<![\w.])-?(\d[\d,]*(?:\.\d+)?)(\s?%)?")
# Numbers that name a place in a text, not a measurement: "section 4.1", "Appendix C.2".
REFERENCE = re.compile(r"(section|§|table|appendix|chapter|figure|version|python|torch|jupyter"
                       r"\s*book)\s*$", re.IGNORECASE)
LINKED_CHAPTER = re.compile(r"\]\((\d\d_[\w]+\.ipynb)")
LOADED_RESULTS = re.compile(r"load_results\(\s*[\"']([\w-]+)[\"']")

# Constants the prose may state without printing them, each with why it is a constant.
CONSTANTS = {
    "0.15", "15%",              # BERT's mask rate (the recipe's definition, chapter 6)
    "0.8", "0.1", "80%", "10%",  # BERT's 80/10/10 split of M
    "0.02",                     # BERT's initializer_range (its config)
    "8.99",                     # log 8000, the uniform guess over the book's vocabulary
    "0.5",                      # a coin's probability / one half
    "1.0", "100%",              # certainty, the whole
    "50%",                      # NSP's balanced IsNext / NotNext pairs
    "95%",                      # the level of every interval in the book (mlm_lib.stats.LEVEL)
}


CHECKED = "nbval-check-output"  # the tag of the cells whose outputs nbval compares


def _outputs(nb: dict) -> str:
    """The text of the outputs nbval checks (the other cells' digits may differ by CPU)."""
    parts = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or CHECKED not in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append("".join(out["text"]))
            for kind, value in out.get("data", {}).items():
                value = "".join(value) if isinstance(value, list) else value
                # A recall widget's text is written by hand, not computed: it proves nothing.
                if kind.startswith("text/") and 'class="recall ' not in value:
                    parts.append(value)
    return "\n".join(parts)


def _printed_numbers(text: str) -> list[tuple[Decimal, int]]:
    """Every number in ``text`` as (value, digits after the point); percents as fractions too."""
    found = []
    for m in OUTPUT_NUMBER.finditer(text):
        digits = m.group(1).replace(",", "")
        value = Decimal(digits)
        places = len(digits.split(".")[1]) if "." in digits else 0
        found.append((value, places))
        if m.group(2):  # 19.3% is also the fraction 0.193
            found.append((value / 100, places + 2))
        else:           # 0.193 is also 19.3%
            found.append((value * 100, max(places - 2, 0)))
    return found


def _results_numbers(name: str) -> list[tuple[Decimal, int]]:
    """The numbers of a results file at full precision: every run's metrics and each arm's mean."""
    results = load_results(name)
    values = [v for run in results.runs for v in run.metrics.values()]
    measured = {run.arm: run.metrics for run in results.runs}  # arms may measure different things
    values += [results.interval(arm, metric).mean for arm in results.arms
               for metric in measured[arm]]
    return [(Decimal(repr(float(v))), 17) for v in values]


def _supported(written: str, printed: list[tuple[Decimal, int]]) -> bool:
    """Was ``written`` printed, at least as precisely as written and rounding to it?"""
    digits = written.replace(",", "").replace(" ", "").rstrip("%")
    places = len(digits.split(".")[1]) if "." in digits else 0
    value, half = Decimal(digits), Decimal(5) * Decimal(10) ** -(places + 1)
    return any(p >= places and abs(x - value) <= half for x, p in printed)


def _sentences(markdown: str) -> list[str]:
    text = re.sub(r"\$\$.*?\$\$", " ", markdown, flags=re.S)  # formulas state no measurements
    text = re.sub(r"\$[^$\n]*\$", " ", text)
    text = re.sub(r"`[^`\n]*`", " ", text)                     # inline code is code
    text = re.sub(r"\]\((https?://[^)]*)\)", "]", text)         # link targets
    return [s for s in re.split(r"(?<=[.!?:])\s+(?=[A-Z*_(\[|])|\n\s*\n|\n\|", text) if s.strip()]


def _chapter_numbers(nb: dict) -> list[tuple[Decimal, int]]:
    """What a chapter shows: the numbers of its outputs and of the results files it loads."""
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    printed = _printed_numbers(_outputs(nb))
    for name in LOADED_RESULTS.findall(code):
        printed += _results_numbers(name)
    return printed


def _report(title: str, bad: list[tuple[int, str, str]]) -> str:
    """A failing check's message: each (cell, what was written, the sentence) on a line."""
    return title + ":\n" + "\n".join(f"  cell {i}: {w!r} in: {s}" for i, w, s in bad)


def _linked_numbers(sentence: str) -> list[tuple[Decimal, int]]:
    """The numbers printed in checked cells of the chapters a sentence links to."""
    return [n for chapter in LINKED_CHAPTER.findall(sentence)
            for n in _printed_numbers(_outputs(json.loads((ROOT / "notebooks" / chapter).read_text())))]


def unsupported_numbers(path: Path) -> list[tuple[int, str, str]]:
    """(cell index, number, sentence) for every prose number of ``path`` not backed by an output."""
    nb = json.loads(path.read_text())
    printed = _chapter_numbers(nb)
    bad = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for sentence in _sentences("".join(cell["source"])):
            if "{cite}" in sentence:
                continue
            linked = _linked_numbers(sentence)
            for m in PROSE_NUMBER.finditer(sentence):
                written = m.group(1)
                if written.replace(" ", "") in CONSTANTS or REFERENCE.search(sentence[:m.start()]):
                    continue
                if not _supported(written, printed + linked):
                    bad.append((index, written, " ".join(sentence.split())[:160]))
    return bad


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_number_in_the_prose_was_printed(path):
    bad = unsupported_numbers(path)
    assert not bad, _report("numbers in the prose that no output shows", bad)


def test_a_number_printed_only_by_an_unchecked_cell_is_caught(tmp_path):
    """The prose quotes a number that a cell prints, but nbval does not check that cell."""
    source = ROOT / "notebooks" / "06_corrupting_the_input.ipynb"
    nb = json.loads(source.read_text())
    unchecked = {"cell_type": "code", "metadata": {}, "source": ["print(0.4375)"], "execution_count": 1,
                 "outputs": [{"output_type": "stream", "name": "stdout", "text": ["0.4375\n"]}]}
    quoting = {"cell_type": "markdown", "metadata": {}, "source": ["It restored 0.4375 of them."]}
    nb["cells"] += [unchecked, quoting]
    planted = tmp_path / source.name
    planted.write_text(json.dumps(nb))
    assert {n for _, n, _ in unsupported_numbers(planted)} == {"0.4375"}
    unchecked["metadata"]["tags"] = [CHECKED]
    planted.write_text(json.dumps(nb))
    assert not unsupported_numbers(planted)


def test_a_planted_mismatch_is_caught(tmp_path):
    """Change one printed number in the prose of a chapter: the check must name it."""
    source = ROOT / "notebooks" / "06_corrupting_the_input.ipynb"
    nb = json.loads(source.read_text())
    assert not unsupported_numbers(source)
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown"
                and "restored" in "".join(c["source"]))
    cell["source"] = ["The model restored 0.437 of the blanks, 43.7% of them.\n"]
    planted = tmp_path / source.name
    planted.write_text(json.dumps(nb))
    found = {n for _, n, _ in unsupported_numbers(planted)}
    assert found == {"0.437", "43.7%"}


@pytest.mark.parametrize("written, printed, ok", [
    ("0.234", "accuracy 0.2341", True),
    ("0.234", "accuracy 0.236", False),
    ("23.4%", "accuracy 0.2341", True),
    ("0.193", "real token: 19.3%", True),
    ("0.23", "accuracy 0.2341", True),
    ("0.2341", "accuracy 0.23", False),   # more digits than were printed
    ("4.8", "loss 4.809", True),
    ("4.9", "loss 4.809", False),
])
def test_the_matching_rule(written, printed, ok):
    assert _supported(written, _printed_numbers(printed)) is ok


# ----------------------------------------------------------------------------- recall items
RECALL_CALL = re.compile(r"""\brecall\(\s*["']([^"']+)["']""")
PLACEHOLDER_TEXT = re.compile(r"\{\{[^}]*\}\}")  # a number the chapter passes in: computed


def _item_texts(item: recall.Item) -> list[str]:
    fields = item.fields
    texts = [v for k, v in fields.items() if k != "kind" and isinstance(v, str)]
    texts += [v for o in fields.get("options") or [] for v in o.values() if isinstance(v, str)]
    return [PLACEHOLDER_TEXT.sub(" ", t) for t in texts]


def chapter_items(path: Path) -> list[recall.Item]:
    """The recall items a chapter shows, and the gym's items on the questions it demonstrates."""
    nb = json.loads(path.read_text())
    items = recall.load_items()
    shown = {i for c in nb["cells"] if c["cell_type"] == "code"
             for i in RECALL_CALL.findall("".join(c["source"]))}
    coverage = yaml.safe_load((ROOT / "book" / "coverage.yml").read_text())
    gym = {f"{bank}.gym" for bank, row in coverage.items()
           if isinstance(row, dict) and Path(row.get("chapter", "")).stem == path.stem}
    return [items[i] for i in sorted(shown | (gym & set(items)))]


def unsupported_item_numbers(path: Path, items: list[recall.Item] | None = None
                             ) -> list[tuple[str, str, str]]:
    """(item id, number, sentence) for every number in the chapter's recall items that neither
    the chapter's outputs nor the results files it loads show."""
    printed = _chapter_numbers(json.loads(path.read_text()))
    bad = []
    for item in chapter_items(path) if items is None else items:
        accounted = _accounted_for(item)
        shown = printed + [n for chapter in item.fields.get("printed_in", [])
                           for n in _printed_numbers(_outputs(json.loads(
                               (ROOT / "notebooks" / f"{chapter}.ipynb").read_text())))]
        for sentence in (s for text in _item_texts(item) for s in _sentences(text)):
            for m in PROSE_NUMBER.finditer(sentence):
                written = m.group(1).replace(" ", "")
                if written in CONSTANTS or written in accounted or REFERENCE.search(sentence[:m.start()]):
                    continue
                if not _supported(written, shown):
                    bad.append((item.id, written, " ".join(sentence.split())[:160]))
    return bad


def _accounted_for(item: recall.Item) -> set[str]:
    """The numbers an item says it set, worked out or quoted (recall.check verifies the arithmetic)."""
    fields = item.fields
    quoted = [str(n) for numbers in fields.get("cited", {}).values() for n in numbers]
    return {str(n) for n in fields.get("given", [])} | {str(n) for n in fields.get("worked", {})} | set(quoted)


def test_cited_sources_are_in_the_bibliography():
    keys = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text(), re.M))
    cited = {key: item.id for item in recall.load_items().values() for key in item.fields.get("cited", {})}
    assert set(cited) <= keys, f"cited keys missing from book/references.bib: {set(cited) - keys}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_number_in_a_recall_item_was_printed(path):
    bad = unsupported_item_numbers(path)
    assert not bad, "numbers in recall items that the chapter does not print:\n" + "\n".join(
        f"  {i}: {n!r} in: {s}" for i, n, s in bad)


def test_a_planted_number_in_an_item_is_caught():
    source = ROOT / "notebooks" / "06_corrupting_the_input.ipynb"
    planted = recall.Item("X6.1", "06_corrupting_the_input.yml", {
        "kind": "reveal", "question": "How many were restored?",
        "answer": "Exactly 0.437 of them, 43.7%, and {{share:.1%}} of the rest."})
    found = {n for _, n, _ in unsupported_item_numbers(source, [planted])}
    assert found == {"0.437", "43.7%"}


# ----------------------------------------------------------------- live digits in the solutions
# An integer of two or more digits in the prose: 36, 57,344 (not 0.15, 15%, nor part of a version).
PROSE_INTEGER = re.compile(r"(?<![\w.\-/,#$])(\d{1,3}(?:,\d{3})+|\d{2,})(?![\w,]|\.\d|\s?%)")
PRINTED_INTEGER = re.compile(r"(?<![\w.\-+,])(\d{1,3}(?:,\d{3})+|\d+)(?![\w]|[.,]\d)")
SOLUTION = re.compile(r"<details>\s*<summary>\s*Solution\s*</summary>(.*?)</details>", re.S | re.I)


def _printed_text(cell: dict) -> str:
    """What a code cell prints (its streams and returned values; not figures or widgets)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append("".join(out["text"]))
        elif out.get("output_type") == "execute_result":
            value = out.get("data", {}).get("text/plain", "")
            parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def _integers(text: str) -> set[int]:
    return {int(m.group(1).replace(",", "")) for m in PRINTED_INTEGER.finditer(text)}


def _literals(cells: list[dict]) -> list[float]:
    """The number literals of the code cells' source: settings (steps=150, test_size=0.2), not
    outputs. Numbers inside strings and comments are not settings."""
    found = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO("".join(cell["source"])).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        for t in tokens:
            if t.type == tokenize.NUMBER and not t.string.lower().endswith("j"):
                try:
                    found.append(float(t.string.replace("_", "")))
                except ValueError:  # 0x1F, 0o17
                    found.append(float(int(t.string.replace("_", ""), 0)))
    return found


def _settings(cells: list[dict]) -> set[int]:
    """The integer literals of the chapter's code (steps=150, seeds 0-4)."""
    return {int(v) for v in _literals(cells) if v == int(v)}


def live_only_digits(path: Path) -> list[tuple[int, str, str]]:
    """(cell index, number, sentence) for each number of the Markdown, prose and exercise solutions
    alike, that a cell nbval does not check prints while nothing checked shows it: no checked
    cell, results file, linked chapter, setting in the chapter's code or constant. Decimals and
    percentages are held to the checked cells by ``unsupported_numbers`` already; this adds the
    integers, which a hidden solution cell prints as counts (27 pairs, 57,344 replacements)."""
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    unchecked = set().union(*[_integers(_printed_text(c)) for c in cells if c["cell_type"] == "code"
                              and CHECKED not in c.get("metadata", {}).get("tags", [])])
    shown = _integers(_outputs(nb)) | _settings(cells) | {
        int(x) for x, _ in _chapter_numbers(nb) if x == x.to_integral_value()}
    bad = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for sentence in _sentences("".join(cell["source"])):
            if "{cite}" in sentence:
                continue
            linked = {n for chapter in LINKED_CHAPTER.findall(sentence)
                      for n in _integers(_outputs(json.loads((ROOT / "notebooks" / chapter).read_text())))}
            sentence = re.sub(r"\]\([^)]*\)", "]", sentence)  # a link's target names a place
            for m in PROSE_INTEGER.finditer(sentence):
                value = int(m.group(1).replace(",", ""))
                if REFERENCE.search(sentence[:m.start()]) or value not in unchecked:
                    continue
                if value not in shown | linked:
                    bad.append((index, m.group(1), " ".join(sentence.split())[:160]))
    return bad


def solutions(path: Path) -> list[str]:
    """The worked solutions of a chapter's exercises: Markdown folded in ``<details>`` blocks
    whose summary is "Solution" (their cells are ``hide-cell`` code cells right below)."""
    return [s for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"
            for s in SOLUTION.findall("".join(c["source"]))]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_digit_rests_on_an_unchecked_cell(path):
    bad = live_only_digits(path)
    assert not bad, "numbers in the prose or a solution that only a cell nbval does not check prints:\n" + (
        "\n".join(f"  cell {i}: {n!r} in: {s}" for i, n, s in bad))


def _with_solution(nb: dict, printed: str, quoted: str, tags: list[str]) -> dict:
    """``nb`` with an exercise whose hidden solution cell prints ``printed`` and whose folded
    solution quotes ``quoted``."""
    exercise = {"cell_type": "markdown", "metadata": {}, "source": [
        "### Exercise 9: count them\n", "\n", "Count the restored blanks.\n", "\n",
        "<details>\n", "<summary>Solution</summary>\n", "\n", f"The cell below counts {quoted}.\n", "\n",
        "</details>\n"]}
    cell = {"cell_type": "code", "metadata": {"tags": tags}, "execution_count": 1,
            "source": ["# Solution to exercise 9\n", f"print({printed!r})"],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": [printed + "\n"]}]}
    return {**nb, "cells": nb["cells"] + [exercise, cell]}


def test_a_solution_quoting_an_unchecked_hidden_cell_is_caught(tmp_path):
    """A folded solution quotes what its hide-cell prints, and nbval does not check that cell."""
    source = ROOT / "notebooks" / "06_corrupting_the_input.ipynb"
    nb = json.loads(source.read_text())
    planted = tmp_path / source.name
    planted.write_text(json.dumps(_with_solution(nb, "restored 4,375 blanks, 0.4375 of them",
                                                 "4,375 restored blanks, 0.4375 of them", ["hide-cell"])))
    assert "4,375 restored blanks, 0.4375 of them" in solutions(planted)[-1]
    assert {n for _, n, _ in live_only_digits(planted)} == {"4,375"}
    assert {n for _, n, _ in unsupported_numbers(planted)} == {"0.4375"}
    planted.write_text(json.dumps(_with_solution(nb, "restored 4,375 blanks, 0.4375 of them",
                                                 "4,375 restored blanks, 0.4375 of them",
                                                 ["hide-cell", CHECKED])))
    assert not live_only_digits(planted) and not unsupported_numbers(planted)


def test_prose_quoting_an_unchecked_hide_input_cell_is_caught(tmp_path):
    source = ROOT / "notebooks" / "10_pretraining.ipynb"
    nb = json.loads(source.read_text())
    nb["cells"] += [{"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "execution_count": 1,
                     "source": ["print(n)"], "outputs": [{"output_type": "stream", "name": "stdout",
                                                          "text": ["8,734 sequences\n"]}]},
                    {"cell_type": "markdown", "metadata": {},
                     "source": ["The corpus gives 8,734 sequences\n",
                                "([chapter 6](06_corrupting_the_input.ipynb#x)).\n"]}]
    planted = tmp_path / source.name
    planted.write_text(json.dumps(nb))
    assert [n for _, n, _ in live_only_digits(planted)] == ["8,734"]


# ------------------------------------------------------------------- numbers written in words
# A share or a ratio written in words ("almost half its attention", "twice the work") claims a
# measured value as digits do. Each word with the values it can stand for: a share of a whole.
SHARE_WORDS = {
    r"(?:a|one) third": (0.28, 0.39), r"two thirds": (0.60, 0.72),
    r"(?:a|one) quarter": (0.20, 0.30), r"three quarters": (0.70, 0.80),
    r"(?:a|one) fifth": (0.17, 0.23), r"(?:a|one) tenth": (0.08, 0.12),
    r"(?:nearly|almost|virtually) all": (0.85, 1.0), r"(?:nearly|almost|virtually) none|hardly any": (0.0, 0.15),
    r"half": (0.40, 0.60), r"most": (0.50, 0.99),  # not 1: that is "all"
}
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "a hundred": 100, "a thousand": 1000}
# ... and a ratio of two values ("N times": from 0.85 N to 1.15 N; halving: 2, or a share of 0.5).
RATIO_WORDS = {r"twice|double[sd]?|doubling|halve[sd]?|halving": (1.7, 2.3), r"triple[sd]?|tripling": (2.6, 3.4)}
# What a measured share is a share of.
MEASURED = (r"attention|blanks?|mass|probabilit(?:y|ies)|loss(?:es)?|accuracy|F1|share|gap|difference|"
            r"advantage|lead|work|cost|tokens?|positions?|pairs?|sentences?|weights?|parameters?|seeds?|"
            r"labels?|errors?|predictions?|answers?|examples?|questions?|scores?|perplexity|runs?|pieces?|"
            r"gain|improvement")
_DETERMINER = r"of|as many|as much|the|its|their|these|those|this|that|all|an?|[\w’'-]+['’]s"
SHARE_CLAIM = re.compile(
    r"(?<!\bat )(?<!\bthe )\b(?P<word>" + "|".join(SHARE_WORDS) + r")\b"
    r"(?:(?:\s+(?:" + _DETERMINER + r"))+(?:\s+[\w’'-]+){0,2}?|(?<!most))\s+(?:" + MEASURED + r")\b", re.I)
RATIO_CLAIM = re.compile(
    r"\b(?P<word>" + "|".join(RATIO_WORDS) + r"|(?:" + "|".join(NUMBER_WORDS) + r"|\d[\d,]*(?:\.\d+)?)[ -]times)\b"
    r"\s+(?:as\s+\w+|the|its|their|larger|smaller|more|fewer|less|faster|slower|higher|lower|bigger|"
    r"longer|shorter)\b", re.I)
# (chapter, phrase): why a quantitative word in that phrase is no measurement. None is needed now:
# each word the chapters use is backed, or was rephrased to quote what it stands for.
WORDS_NOT_MEASURED: dict[tuple[str, str], str] = {}


def _word_ranges(word: str) -> list[tuple[str, float, float]]:
    """The values a quantitative word can stand for: ("share" or "ratio", lowest, highest)."""
    word = " ".join(word.lower().split())
    if re.fullmatch(r"halve[sd]?|halving", word):  # halving: a ratio of 2, or a share of one half
        return [("ratio", *RATIO_WORDS[next(iter(RATIO_WORDS))]), ("share", *SHARE_WORDS["half"])]
    for pattern, (low, high) in SHARE_WORDS.items():
        if re.fullmatch(pattern, word):
            return [("share", low, high)]
    for pattern, (low, high) in RATIO_WORDS.items():
        if re.fullmatch(pattern, word):
            return [("ratio", low, high)]
    times = word.replace("-", " ").rsplit(" times", 1)[0]
    n = NUMBER_WORDS.get(times) or float(times.replace(",", ""))
    return [("ratio", 0.85 * n, 1.15 * n)]


def word_claims(sentence: str) -> list[str]:
    """The quantitative words of a sentence that claim a measured share or ratio."""
    return [m.group("word") for regex in (SHARE_CLAIM, RATIO_CLAIM) for m in regex.finditer(sentence)]


def _quotes_a_printed_number(clause: str, printed: list[tuple[Decimal, int]]) -> bool:
    """Does the clause quote a number the chapter printed (a decimal, a percentage or an integer
    of two or more digits; not one of the constants)?"""
    written = [m.group(1) for m in PROSE_NUMBER.finditer(clause)] + [
        m.group(1) for m in PROSE_INTEGER.finditer(clause)]
    return any(w.replace(" ", "") not in CONSTANTS and _supported(w, printed) for w in written)


def _adjacent_values(cells: list[dict], index: int) -> dict[str, list[float]]:
    """What the code cells right above and right below a Markdown cell (up to the Markdown cells
    on either side) show: the values their checked outputs print, as shares (fractions, and
    percentages over 100) and as ratios (printed with a decimal point: an integer is a count, and
    a fraction's hundredfold is no ratio), and the numbers their source sets (test_size=0.2,
    lr / 10), which a word may state as settings."""
    near = []
    for step in (-1, 1):
        k = index + step
        while 0 <= k < len(cells) and cells[k]["cell_type"] == "code":
            near.append(cells[k])
            k += step
    values: dict[str, list[float]] = {"share": [], "ratio": []}
    for m in OUTPUT_NUMBER.finditer(_outputs({"cells": near})):
        value = float(m.group(1).replace(",", ""))
        if m.group(2):
            values["share"].append(value / 100)
        elif "." in m.group(1):
            values["ratio"].append(value)
            if value <= 1:
                values["share"].append(value)
    for value in _literals(near):
        values["ratio"].append(value)
        if value <= 1:
            values["share"].append(value)
    return values


def unbacked_words(path: Path) -> list[tuple[int, str, str]]:
    """(cell index, word, sentence) for each share or ratio in words in a chapter's Markdown that
    neither its clause backs with a printed number nor a checked cell next to it prints."""
    nb = json.loads(path.read_text())
    printed = _chapter_numbers(nb)
    bad = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        near = _adjacent_values(nb["cells"], index)
        for sentence in _sentences("".join(cell["source"])):
            flat = " ".join(sentence.split())
            if "{cite}" in sentence or flat.startswith("#"):  # a source's claim; a heading
                continue
            linked = _linked_numbers(sentence)
            for word in word_claims(flat):
                if any(chapter == path.stem and phrase in flat for chapter, phrase in WORDS_NOT_MEASURED):
                    continue
                clause = next(c for c in re.split(r"[;:]\s", flat) if word in c)
                if _quotes_a_printed_number(clause, printed + linked):
                    continue
                if not any(low <= v <= high for kind, low, high in _word_ranges(word) for v in near[kind]):
                    bad.append((index, word, flat[:200]))
    return bad


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_number_in_words_was_printed(path):
    bad = unbacked_words(path)
    assert not bad, _report("shares and ratios in words that no printed number backs", bad)


def _chapter(tmp_path: Path, printed: str, prose: str, source: str = "print(share)") -> Path:
    """A two-cell chapter: a checked code cell that prints ``printed``, then ``prose``."""
    path = tmp_path / "99_planted.ipynb"
    path.write_text(json.dumps({"cells": [
        {"cell_type": "code", "metadata": {"tags": [CHECKED]}, "execution_count": 1, "source": [source],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": [printed + "\n"]}]},
        {"cell_type": "markdown", "metadata": {}, "source": [prose]}]}))
    return path


def test_a_share_in_words_without_its_value_is_caught(tmp_path):
    prose = "About a third of its attention goes to `[CLS]`."
    assert [w for _, w, _ in unbacked_words(_chapter(tmp_path, "weight on [CLS]: 0.52", prose))] == ["a third"]
    assert unbacked_words(_chapter(tmp_path, "weight on [CLS]: 0.08 (of 1)", prose))
    assert not unbacked_words(_chapter(tmp_path, "weight on [CLS]: 0.334", prose))      # in [0.28, 0.39]
    assert not unbacked_words(_chapter(tmp_path, "weight on [CLS]: 33.4%", prose))      # a percentage
    assert not unbacked_words(_chapter(tmp_path, "weight on [CLS]: 0.52, on [SEP]: 0.29",
                                       "About a third of its attention (0.29) goes to `[SEP]`."))


def test_a_ratio_in_words_without_its_value_is_caught(tmp_path):
    prose = "The output layer does twice the encoder's work."
    assert unbacked_words(_chapter(tmp_path, "ratio 2.60", prose))
    assert unbacked_words(_chapter(tmp_path, "2 layers", prose))  # an integer is a count, not a ratio
    assert not unbacked_words(_chapter(tmp_path, "ratio 2.26", prose))
    assert unbacked_words(_chapter(tmp_path, "ratio 2.26", "It costs ten times more work."))


def test_a_setting_in_words_is_backed_by_the_code_that_sets_it(tmp_path):
    prose = "A fifth of the training sentences are held out."
    assert not unbacked_words(_chapter(tmp_path, "384 and 96", prose, "dev = split(test_size=0.2)"))
    assert unbacked_words(_chapter(tmp_path, "384 and 96", prose, 'dev = split(test_size="0.2")'))


@pytest.mark.parametrize("sentence", [
    "Hiding half of a word leaves the other half in view.",        # no measured noun
    "The output layer covers half the vocabulary.",                 # a definition
    "*low* appears five times, *lower* twice.",                     # a toy corpus's counts
    "Most readers skip the proofs; most projects call the collator.",
    "Take the most probable word; every exponent is at most 0.",
    "Half the time A and B are swapped.",
    "The sentence has *the* twice, and the seed is drawn twice over.",
])
def test_words_that_measure_nothing_are_not_claims(sentence):
    assert not word_claims(sentence)


def test_the_words_of_the_book_are_read_as_claims():
    """The real chapters' sentences are found, and chapter 7's "almost half" sits on its 0.445."""
    assert word_claims("Without the mask [CLS] would spend almost half its attention on padding.") == ["half"]
    assert word_claims("the model fills fewer than half as many of these blanks") == ["half"]
    assert word_claims("the output layer does more than twice the work") == ["twice"]
    assert word_claims("at a tenth of the recipe's rate") == []  # a rate is a setting, not a share
    path = ROOT / "notebooks" / "07_inside_bert.ipynb"
    cell = next(i for i, c in enumerate(json.loads(path.read_text())["cells"])
                if "almost half its attention" in "".join(c["source"]))
    assert 0.445 in _adjacent_values(json.loads(path.read_text())["cells"], cell)["share"]
    assert not unbacked_words(path)
