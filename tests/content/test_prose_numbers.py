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
"""

from __future__ import annotations

import json
import re
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
            linked = [n for chapter in LINKED_CHAPTER.findall(sentence)
                      for n in _printed_numbers(_outputs(json.loads(
                          (ROOT / "notebooks" / chapter).read_text())))]
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
    assert not bad, "numbers in the prose that no output shows:\n" + "\n".join(
        f"  cell {i}: {n!r} in: {s}" for i, n, s in bad)


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
