"""Every item of the question bank has a home: a chapter section that teaches it, a cell that
demonstrates it (where it is a claim about behaviour), a recall widget in its chapter, and one in
the gym. The table is data: book/coverage.yml; the items are data too (mlm_lib/book/assets/recall/*.yml),
and the gym page is generated from both by its ``{recall-gym}`` blocks."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest
import recall_directive
import yaml

from mlm_lib.book.recall import load_items, recall

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "book" / "coverage.yml"
GYM = ROOT / "book" / "gym.md"

# The ids of the question bank, as in the book's map: symbols, formula, true/false, spot the
# error, why, edge cases, recall.
BANK_IDS = (
    [f"S{k}" for k in range(1, 8)] + [f"F{k}" for k in range(1, 5)] + [f"TF{k}" for k in range(1, 10)]
    + [f"SE{k}" for k in range(1, 8)] + [f"W{k}" for k in range(1, 7)] + [f"E{k}" for k in range(1, 10)]
    + ["R1"]
)


@lru_cache(maxsize=None)
def _table() -> dict:
    return yaml.safe_load(TABLE.read_text())


@lru_cache(maxsize=None)
def _notebook(path: str) -> dict:
    return json.loads((ROOT / path).read_text())


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _headings(nb: dict) -> list[str]:
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            out += [m.group(1).strip() for m in re.finditer(r"^#{1,4}\s+(.+)$", _source(cell), re.M)]
    return out


def _section_of_cells(nb: dict) -> list[tuple[str, dict]]:
    """Each cell with the heading it sits under."""
    current, out = "", []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            found = re.findall(r"^#{1,4}\s+(.+)$", _source(cell), re.M)
            if found:
                current = found[-1].strip()
        out.append((current, cell))
    return out


def _demonstrates(cell: dict) -> set[str]:
    """The bank items a code cell shows with running code: its ``demonstrates`` metadata (cell
    metadata, not a comment, so nothing of the test machinery stands in the reader's way)."""
    return set(cell.get("metadata", {}).get("demonstrates", []))


def _recall_items_in_outputs(nb: dict) -> set[str]:
    items = set()
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            items |= set(re.findall(r'data-item="([^"]+)"', html))
    return items


def test_the_table_covers_exactly_the_bank():
    assert sorted(_table()) == sorted(BANK_IDS), "book/coverage.yml must list every bank id once"


def _in_toc(chapter: str) -> bool:
    toc = (ROOT / "_toc.yml").read_text()
    return re.search(r"file:\s*%s\s*$" % re.escape(str(Path(chapter).with_suffix(""))), toc, re.M) is not None


def _gym_ids() -> list[str]:
    """The bank ids the gym asks, in the order of its ``{recall-gym}`` blocks."""
    ids: list[str] = []
    for block in re.findall(r"```\{recall-gym\}[^\n]*\n(.*?)```", GYM.read_text(), re.S):
        ids += block.split()
    return ids


def test_the_gym_asks_every_bank_item_once():
    assert sorted(_gym_ids()) == sorted(BANK_IDS)


@pytest.mark.parametrize("item", BANK_IDS)
def test_item_is_asked_in_the_gym(item):
    assert item in _gym_ids(), f"{item}: not in a {{recall-gym}} block of the gym"
    shown = recall_directive.gym_item(item)
    assert shown in (item, f"{item}.gym")
    assert f'data-item="{shown}"' in recall(shown).html


@pytest.mark.parametrize("item", BANK_IDS)
def test_item_has_a_home(item):
    row = _table()[item]
    chapter = row["chapter"]
    if row.get("status") == "pending":
        # honest bookkeeping: a pending item's chapter must not be in the book yet; once it is,
        # this test demands the full entry
        assert not _in_toc(chapter), f"{item}: {chapter} is in the book, so the item is no longer pending"
        pytest.skip(f"{item}: its chapter {chapter} is in preparation")
    assert _in_toc(chapter), f"{item}: {chapter} is not in _toc.yml"
    assert (ROOT / chapter).exists(), f"{item}: chapter {chapter} does not exist"
    nb = _notebook(chapter)

    # taught in a section of the chapter
    assert row["section"] in _headings(nb), f"{item}: no section {row['section']!r} in {chapter}"

    # demonstrated by a cell that ran (it has outputs), where the item is a claim about behaviour
    demo = row["demonstration"]
    if demo != "none":
        cells = [(sec, c) for sec, c in _section_of_cells(nb)
                 if c["cell_type"] == "code" and item in _demonstrates(c)]
        assert cells, f"{item}: no code cell in {chapter} has {item} in its 'demonstrates' metadata"
        assert any(c.get("outputs") for _, c in cells), f"{item}: its demonstrating cell has no output"
    else:
        assert row.get("why_no_demonstration"), f"{item}: no demonstration and no reason given"

    # asked in a recall widget in its chapter (written in the chapter's data file, rendered with
    # its id) ...
    data = load_items().get(item)
    assert data and data.file == Path(chapter).with_suffix(".yml").name, \
        f"{item}: not an item of {Path(chapter).with_suffix('.yml').name} in mlm_lib/book/assets/recall"
    assert item in _recall_items_in_outputs(nb), f"{item}: no recall widget with item={item!r} in {chapter}"
    # ... and in the gym, which links back to the chapter's section
    assert item in _gym_ids(), f"{item}: not asked in the gym"
    link = recall_directive.gym_link(item)
    assert Path(chapter).name in link, f"{item}: the gym's link after it does not point to {chapter}"
    anchor = row.get("anchor")
    if anchor:
        assert f"#{anchor})" in link, f"{item}: the gym's link should point to the section #{anchor}"
