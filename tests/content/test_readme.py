"""The README's library table says which functions the chapters print (their source, with
``inspect.getsource``): it must name exactly those, chapter by chapter."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def printed_by_chapters() -> set[tuple[str, int]]:
    """(the printed object's last dotted names, chapter) for every ``getsource(...)`` in a chapter's
    code: ``BertLayer.forward`` for ``getsource(BertLayer.forward)``, ``next_sentence_pair`` for
    ``getsource(pretraining.next_sentence_pair)``."""
    found = set()
    for path in NOTEBOOKS:
        chapter = int(path.name[:2])
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
                        == "getsource" and node.args):
                    parts = ast.unparse(node.args[0]).split(".")
                    name = ".".join(parts[-2:]) if parts[-2:-1] and parts[-2][:1].isupper() else parts[-1]
                    found.add((name, chapter))
    return found


def _chapters(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def readme_says_printed(readme: str) -> set[tuple[str, int]]:
    """(name, chapter) from the third column of the README's ``| module | what | chapters print |``
    table: ``\\`a\\`, \\`b\\` (7), \\`c\\` (5)`` names a and b in chapter 7, c in chapter 5."""
    table = readme.split("| module | what | chapters print |", 1)[1].split("\n\n", 1)[0]
    said = set()
    for row in table.splitlines()[2:]:
        cell = row.rstrip().rstrip("|").rsplit("|", 1)[-1]
        for names, chapters in re.findall(r"((?:`[\w.]+`(?:,\s*)?)+)\s*\(([\d,\s-]+)\)", cell):
            for name in re.findall(r"`([\w.]+)`", names):
                said |= {(name, c) for c in _chapters(chapters)}
    return said


def test_the_readme_names_what_each_chapter_prints():
    said = readme_says_printed((ROOT / "README.md").read_text(encoding="utf-8"))
    printed = printed_by_chapters()
    core = {(n, c) for n, c in printed if f"`{n.split('.')[0]}`" not in BOOK_ONLY}
    assert said - printed == set(), f"the README says chapters print these, and they do not: {sorted(said - printed)}"
    assert core - said == set(), f"chapters print these, and the README's table does not say so: {sorted(core - said)}"


# Printed by chapters, but defined in mlm_lib.book (the README's table is of the library's modules).
BOOK_ONLY = {"`train_micro`", "`frozen_classifier`", "`layer_forward`"}


def test_the_check_sees_a_planted_difference():
    readme = "| module | what | chapters print |\n|---|---|---|\n| `x` | y | `a.b`, `c` (1-2), `d` (5) |\n\n"
    assert readme_says_printed(readme) == {("a.b", 1), ("a.b", 2), ("c", 1), ("c", 2), ("d", 5)}


def test_every_library_name_the_readme_gives_exists():
    """A name like ``mlm_lib.finetune.finetune`` in the README is one a reader can import."""
    import importlib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = []
    for dotted in sorted(set(re.findall(r"`(mlm_lib(?:\.\w+)+)", readme))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert not missing, f"the README names what the library does not have: {missing}"
