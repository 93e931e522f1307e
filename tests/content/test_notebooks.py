"""The committed chapters are what the site shows, so they must be complete and current.

The site renders the outputs stored in `notebooks/` and executes nothing; nbval re-executes every
chapter and compares the checked cells. This test closes the gap between the two: every chapter is
fully executed, in order, without errors, with the widget state its outputs need, and no older
than its own code or the library files it imported (`scripts/execute_notebooks.py` stamps both,
and its ``check`` is what this test and `make execute` call stale).
"""

from __future__ import annotations

import re
from pathlib import Path

import execute_notebooks
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
WIDGET_VIEW = execute_notebooks.WIDGET_VIEW
# The check that `make execute` also runs to choose the chapters it re-executes: one definition.
check = execute_notebooks.check
code_hash_of = execute_notebooks.code_hash


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_complete_and_current(path):
    problems = check(nbformat.read(path, as_version=4), path)
    assert not problems, "\n".join(problems)


def test_the_check_catches_each_kind_of_staleness(tmp_path):
    """Plant each fault in a copy of a committed chapter and see the check name it."""
    path = NOTEBOOKS[0]
    good = nbformat.read(path, as_version=4)
    assert check(good, path) == []

    def fault(edit):
        nb = nbformat.reads(nbformat.writes(good), as_version=4)  # a deep copy
        edit(nb)
        return " ".join(check(nb, path))

    code = [i for i, c in enumerate(good.cells) if c.cell_type == "code"]
    assert "changed since it was executed" in fault(lambda nb: nb.cells[code[0]].__setitem__(
        "source", nb.cells[code[0]].source + "\n# edited"))
    assert "not executed top to bottom" in fault(lambda nb: nb.cells[code[-1]].__setitem__(
        "execution_count", None))
    assert "no execution stamp" in fault(lambda nb: nb.metadata.pop(execute_notebooks.STAMP_KEY))

    def older_library(nb):
        modules = nb.metadata[execute_notebooks.STAMP_KEY]["executed"]["modules"]
        modules[next(iter(modules))] = "0" * 64
    assert "older than the code of mlm_lib/" in fault(older_library)

    own_items = f"mlm_lib/book/assets/recall/{path.stem}.yml"
    def older_items(nb):
        nb.metadata[execute_notebooks.STAMP_KEY]["executed"]["files"][own_items] = "0" * 64
    assert f"older than {own_items}" in fault(older_items)
    # The chapter reads its own items only: another chapter's and the gym's are not in its stamp.
    stamped = good.metadata[execute_notebooks.STAMP_KEY]["executed"]["files"]
    assert own_items in stamped and not any(f.startswith("mlm_lib/book/assets/recall/") and f != own_items
                                            for f in stamped)

    def older_print(nb):
        printed = nb.metadata[execute_notebooks.STAMP_KEY]["executed"]["printed"]
        printed[next(iter(printed))] = "0" * 64
    if good.metadata[execute_notebooks.STAMP_KEY]["executed"]["printed"]:
        assert "older than the printed source of" in fault(older_print)

    def an_old_stamp(nb):
        nb.metadata[execute_notebooks.STAMP_KEY]["executed"] = {"code_sha256": code_hash_of(nb)}
    assert "one of an older kind" in fault(an_old_stamp)

    def no_widget_state(nb):
        nb.metadata.pop("widgets", None)
    if any(WIDGET_VIEW in o.get("data", {}) for c in good.cells for o in c.get("outputs", [])):
        assert "without saved widget state" in fault(no_widget_state)

    def an_error(nb):
        nb.cells[code[0]].outputs.append(nbformat.v4.new_output("error", ename="ValueError",
                                                                 evalue="x", traceback=[]))
    assert "stored an error" in fault(an_error)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_test_machinery_in_the_readers_way(path):
    """nbval reads the cell tag ``nbval-check-output`` and the coverage test reads the
    ``demonstrates`` metadata, so no code cell a reader reads opens with a test's comment."""
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        found = re.findall(r"^\s*#\s*(NBVAL_[A-Z_]+|Demonstrates:.*)$", cell.source, re.M)
        assert not found, f"{path.name} cell {i}: {found[0]!r} belongs in the cell's tags or metadata"
