"""Write the first code cell of every chapter: it installs ``mlm_lib`` where it is missing.

A chapter opened on Colab, on Binder or in a bare Jupyter has no ``mlm_lib``, so its first import
would fail. The cell right after the chapter's title installs the library, with the book's extra
packages (``mlm_lib[book]``), from the book's repository at the version the page was built from,
prints one line, and lets the chapter go on without a restart. Where ``mlm_lib`` is importable (the
book's own environment, ``make lab``, nbval) it does nothing and prints nothing. The environment
variable ``MLM_LIB_INSTALL`` replaces the install source with any pip requirement (a wheel's path,
a fork, a branch). The cell is hidden on the site, where there is nothing to install.

    python scripts/first_cell.py           # write or update the cell in every chapter
    python scripts/first_cell.py --check   # exit 1 if a chapter's cell is missing or different

Running it again changes nothing. After a version bump it rewrites the cell, so the chapters must
be re-executed (``make execute``).
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CELL_ID = "1f5c0a11"  # the same id in every chapter, so the cell is found again by its id
TAGS = ["remove-cell"]  # the static site has nothing to install
ENV_VAR = "MLM_LIB_INSTALL"

TEMPLATE = '''\
# On Colab, Binder or a fresh Jupyter: install the book's library, mlm_lib, if it is missing.
import importlib, importlib.util, os, subprocess, sys

BOOK = "{repository}"
if importlib.util.find_spec("mlm_lib") is None:
    source = os.environ.get("{env_var}", f"mlm_lib[book] @ git+{{BOOK}}@v{version}")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", source],
                         capture_output=True, text=True)
    if pip.returncode:
        raise RuntimeError(f"pip could not install {{source}}:\\n{{pip.stderr}}")
    importlib.invalidate_caches()
    import mlm_lib
    print(f"Installed mlm_lib {{mlm_lib.__version__}} from {{source}}")'''


def library_version() -> str:
    """``mlm_lib.__version__``, read without importing the library (which would import torch)."""
    tree = ast.parse((ROOT / "mlm_lib" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError("mlm_lib/__init__.py sets no __version__")


def repository_url() -> str:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["project"]["urls"]["Repository"]


def cell_source(version: str | None = None) -> str:
    return TEMPLATE.format(env_var=ENV_VAR, repository=repository_url(),
                           version=version or library_version())


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def title_index(cells: list[dict]) -> int:
    """The chapter's title cell: the first Markdown cell that opens with a level-1 heading."""
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).lstrip().startswith("# "):
            return i
    raise ValueError("no title cell (a Markdown cell starting with '# ')")


def is_install_cell(cell: dict) -> bool:
    return cell.get("id") == CELL_ID or (cell["cell_type"] == "code"
                                         and f'"{ENV_VAR}"' in "".join(cell["source"]))


def updated(nb: dict, source: str) -> dict:
    """The notebook with exactly one install cell, right after the title, holding ``source``."""
    nb = copy.deepcopy(nb)
    existing = [c for c in nb["cells"] if is_install_cell(c)]
    cell = existing[0] if existing else {"cell_type": "code", "execution_count": None,
                                         "id": CELL_ID, "metadata": {}, "outputs": [], "source": []}
    if "".join(cell["source"]) != source:
        cell.update(source=_lines(source), execution_count=None, outputs=[])
    cell["id"] = CELL_ID
    cell["metadata"]["tags"] = TAGS
    cells = [c for c in nb["cells"] if not is_install_cell(c)]
    cells.insert(title_index(cells) + 1, cell)
    return {**nb, "cells": cells}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    source = cell_source()
    stale = []
    for path in CHAPTERS:
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        new = updated(nb, source)
        if new == nb:
            continue
        stale.append(path.relative_to(ROOT).as_posix())
        if not args.check:
            path.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    verb = "differ" if args.check else "updated"
    print(f"{len(stale)} chapter(s) {verb}" + (": " + ", ".join(stale) if stale else ""))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
