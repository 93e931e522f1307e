"""Execute the book's chapters in place and stamp each with what it was executed against.

The site renders the outputs committed in `notebooks/` (it executes nothing), and nbval re-executes
every chapter in `make test` to prove that the checked outputs are what the current code prints.
This script is how an author refreshes those outputs after changing a chapter or the library:

    make execute                      # the chapters that are stale (what check() finds)
    make execute ALL=1                # every chapter
    make execute NB=notebooks/07_inside_bert.ipynb

Each executed notebook gets `metadata.fill_in_the_blank.executed`: a hash of its code cells and
a hash of every `mlm_lib` file the kernel imported (plus the library's assets: the shipped model,
its vocabulary and recipes, the results files and the chapter's own recall items).
`tests/content/test_notebooks.py` runs :func:`check`, which recomputes both and fails when a chapter's
outputs are older than its code or than the library under it, so the site can never show stale
outputs. A chapter's stamp covers only the modules its cells import, directly or through the
library, so an edit of the training code leaves the chapters that only load a model current.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "mlm_lib"
STAMP_KEY = "fill_in_the_blank"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FIX = "re-execute it: make execute NB={}"
# A stall (a lost kernel reply) should cost a minute or two, not five: the longest cell of any
# chapter takes under 60 s on 2 cores (the timing summary of `make test` shows each chapter).
CELL_TIMEOUT_S = 120
# Run after the chapter, in its kernel, then removed: which mlm_lib modules did it import?
PROBE = ("import sys as _s, json as _j\n"
         "print(_j.dumps(sorted(getattr(m, '__file__', None) or '' for n, m in list(_s.modules.items())"
         " if n == 'mlm_lib' or n.startswith('mlm_lib.'))))")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_hash(nb: nbformat.NotebookNode) -> str:
    """The hash of a notebook's code cells, in order: what its outputs depend on."""
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    return sha256_bytes(json.dumps(sources).encode())


def asset_files(chapter: Path) -> list[Path]:
    """The library's assets a chapter's outputs can depend on: all of them (``mlm_lib/assets``,
    ``mlm_lib/book/assets``), except the recall items of other chapters and of the gym (a chapter
    renders only its own, from recall/<chapter>.yml), and the models chapters save
    (``mlm_lib.book.chapter_models``: what a chapter writes, not reads)."""
    book = LIBRARY / "book" / "assets"
    recall, saved = book / "recall", book / "chapter-models"
    files = [*(LIBRARY / "assets").rglob("*"), *book.rglob("*")]
    return sorted(p for p in files if p.is_file() and saved not in p.parents
                  and (p.parent != recall or p.stem == chapter.stem))


def file_hashes(paths: list[Path]) -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): sha256_bytes(p.read_bytes()) for p in sorted(set(paths))}


def file_digest(path: Path) -> str:
    """The hash a stamp keeps of one library file."""
    return sha256_bytes(path.read_bytes())


def check(nb: nbformat.NotebookNode, path: Path,
          digest: Callable[[Path], str] = file_digest) -> list[str]:
    """Every reason this notebook's stored outputs cannot be trusted (empty when they can).

    ``digest`` hashes a library file as it is now; a test passes another to ask which chapters an
    edit would make stale, without making it."""
    problems = []
    name = path.relative_to(ROOT).as_posix()
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        problems.append(f"{name}: not executed top to bottom in one kernel (execution counts {counts})")
    for c in code:
        for out in c.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"{name}: cell {c.get('execution_count')} stored an error ({out.get('ename')})")
    views = {out["data"][WIDGET_VIEW]["model_id"] for c in code for out in c.get("outputs", [])
             if WIDGET_VIEW in out.get("data", {})}
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    missing = sorted(views - set(state))
    if missing:
        problems.append(f"{name}: {len(missing)} widget view(s) without saved widget state "
                        f"(the site would draw nothing), e.g. {missing[0]}")
    stamp = nb.metadata.get(STAMP_KEY, {}).get("executed")
    if not stamp:
        problems.append(f"{name}: no execution stamp; {FIX.format(name)}")
        return problems
    if stamp["code_sha256"] != code_hash(nb):
        problems.append(f"{name}: a code cell changed since it was executed; {FIX.format(name)}")
    for rel, stamped in stamp["library_sha256"].items():
        file = ROOT / rel
        if not file.is_file():
            problems.append(f"{name}: executed against {rel}, which no longer exists; {FIX.format(name)}")
        elif digest(file) != stamped:
            problems.append(f"{name}: older than {rel}, which changed since; {FIX.format(name)}")
    for asset in asset_files(path):
        rel = asset.relative_to(ROOT).as_posix()
        if rel not in stamp["library_sha256"]:
            problems.append(f"{name}: executed before {rel} existed; {FIX.format(name)}")
    return problems


def chapters() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def stale_chapters(paths: list[Path] | None = None,
                   digest: Callable[[Path], str] = file_digest) -> list[Path]:
    """The chapters whose stored outputs :func:`check` does not trust."""
    return [p for p in (paths or chapters()) if check(nbformat.read(p, as_version=4), p, digest)]


def execute(path: Path, timeout: int = CELL_TIMEOUT_S) -> float:
    """Execute one notebook in place (outputs, widget state, stamp); return the seconds taken."""
    nb = nbformat.read(path, as_version=4)
    n_cells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    probe = nb.cells.pop()
    assert len(nb.cells) == n_cells
    modules = [Path(f) for f in json.loads(probe.outputs[0]["text"]) if f]
    outside = [m for m in modules if LIBRARY not in m.resolve().parents]
    if outside:
        raise SystemExit(f"{path.name} imported mlm_lib from {outside[0]}, not from this checkout: "
                         "install it with `pip install -e .`")
    nb.metadata[STAMP_KEY] = {"executed": {
        "code_sha256": code_hash(nb),
        "library_sha256": file_hashes([m.resolve() for m in modules] + asset_files(path)),
    }}
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to execute (default: the stale chapters in notebooks/)")
    parser.add_argument("--all", action="store_true", help="every chapter, stale or not")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT_S, help="seconds per cell")
    args = parser.parse_args(argv)
    if args.notebooks:
        paths = args.notebooks
    elif args.all:
        paths = chapters()
    else:
        paths = stale_chapters()
        print(f"{len(paths)} of {len(chapters())} chapters are stale"
              + "".join(f"\n  {p.name}" for p in paths), flush=True)
    for path in paths:
        seconds = execute(path.resolve(), args.timeout)
        print(f"{path.name}: executed in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
