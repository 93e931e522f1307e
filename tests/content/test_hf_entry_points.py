"""A reader leaves able to use BERT the way projects do: the book's executed cells call the Hugging
Face entry points every project uses, not only mlm_lib.

The count reads the chapters' code cells that were executed (a stored execution count), parses them
(AST, so a name in a comment, a string or an import alone does not count) and resolves every call
through the cell's imports to a dotted name under transformers, datasets or tokenizers. An entry
point is that name up to its first class (``transformers.AutoTokenizer.from_pretrained`` counts as
``transformers.AutoTokenizer``), or the function itself (``transformers.pipeline``). Setting up the
libraries' logging and progress bars is not an entry point.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PACKAGES = ("transformers", "datasets", "tokenizers")
NOT_ENTRY_POINTS = re.compile(r"^(transformers\.(logging|utils)\.|datasets\.(disable_progress_bars|logging)\b)")
MIN_ENTRY_POINTS = 8
# What every project calls: each pattern must match at least one entry point of the book.
REQUIRED = {
    "pipeline": r"transformers\.pipeline",
    "AutoTokenizer": r"transformers\.AutoTokenizer",
    "AutoModelForMaskedLM": r"transformers\.AutoModelForMaskedLM",
    "a collator": r"transformers\.DataCollator\w*",
    "TrainingArguments": r"transformers\.TrainingArguments",
    "Trainer": r"transformers\.Trainer",
    "datasets.Dataset": r"datasets\.Dataset",
    "a tokenizers trainer": r"tokenizers\.trainers\.\w+",
}


def executed_code(path: Path) -> list[str]:
    """The sources of a chapter's code cells that ran (stored execution count), magics left out."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["\n".join(line for line in "".join(c["source"]).splitlines()
                      if not line.lstrip().startswith(("%", "!")))
            for c in cells if c["cell_type"] == "code" and c.get("execution_count") is not None]


def _dotted(node: ast.expr) -> list[str] | None:
    """["a", "b", "c"] for the expression a.b.c, None for anything else (a call's result, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _entry_point(name: str) -> str:
    """The dotted name up to its first class (a capitalised part), else the whole name."""
    parts = name.split(".")
    for k, part in enumerate(parts[1:], start=1):
        if part[:1].isupper():
            return ".".join(parts[:k + 1])
    return name


def entry_points(sources: list[str]) -> set[str]:
    """The distinct transformers / datasets / tokenizers entry points called in ``sources``, read
    in order as one program (a name imported in one cell is used in the next)."""
    aliases: dict[str, str] = {}  # local name -> dotted name in a package
    found = set()
    for source in sources:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in PACKAGES:
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.Assign, ast.For, ast.comprehension)):
                # a name bound anew (``models = {...}``) no longer means the package
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            aliases.pop(name.id, None)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (parts := _dotted(node.func)) and parts[0] in aliases:
                name = ".".join([aliases[parts[0]], *parts[1:]])
                if not NOT_ENTRY_POINTS.match(name):
                    found.add(_entry_point(name))
    return found


def book_entry_points() -> set[str]:
    return entry_points([s for path in CHAPTERS for s in executed_code(path)])


def missing(found: set[str]) -> list[str]:
    return [what for what, pattern in REQUIRED.items()
            if not any(re.fullmatch(pattern, name) for name in found)]


def test_the_book_calls_the_entry_points_projects_use():
    found = book_entry_points()
    assert not missing(found), f"no executed chapter cell calls {missing(found)}; found {sorted(found)}"
    assert len(found) >= MIN_ENTRY_POINTS, f"only {len(found)} entry points: {sorted(found)}"


def test_a_removed_call_is_missed():
    """Plant a removal: the chapters without their pipeline("fill-mask") calls fail the check."""
    sources = [s for path in CHAPTERS for s in executed_code(path)]
    assert "transformers.pipeline" in entry_points(sources)
    without = [s.replace("pipeline(", "print(") for s in sources]
    assert "pipeline" in missing(entry_points(without))


def test_only_calls_in_executed_cells_count(tmp_path):
    source = ("import datasets\nfrom transformers import AutoTokenizer as AT, Trainer\n"
              "import tokenizers.trainers\n# transformers.pipeline(...) in a comment\n"
              "text = 'AutoModelForMaskedLM.from_pretrained(folder)'\n"
              "tok = AT.from_pretrained('folder')\nrows = datasets.Dataset.from_dict({'a': [1]})\n"
              "t = tokenizers.trainers.WordPieceTrainer(vocab_size=10)\n"
              "datasets.disable_progress_bars()\n")
    assert entry_points([source]) == {"transformers.AutoTokenizer", "datasets.Dataset",
                                      "tokenizers.trainers.WordPieceTrainer"}
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": "from transformers import pipeline\npipeline('fill-mask')"},
                    {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [],
                     "source": "%time x = 1\nprint(x)"}]}
    path = tmp_path / "99_planted.ipynb"
    path.write_text(json.dumps(nb))
    assert executed_code(path) == ["print(x)"]
    assert entry_points(executed_code(path)) == set()
