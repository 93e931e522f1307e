"""Execute the book's chapters in place and stamp each with what it was executed against.

The site renders the outputs committed in `notebooks/` (it executes nothing), and nbval re-executes
every chapter in `make test` to prove that the checked outputs are what the current code prints.
This script is how an author refreshes those outputs after changing a chapter or the library:

    make execute                      # the chapters that are stale (what check() finds)
    make execute ALL=1                # every chapter
    make execute NB=notebooks/07_inside_bert.ipynb

Each executed notebook gets `metadata.fill_in_the_blank.executed`, a stamp of what its outputs
were made from, each part as narrow as what can change them:

- ``code_sha256``: its code cells;
- ``modules``: every ``mlm_lib`` module its kernel imported, hashed by its code without docstrings
  or comments (:func:`code_digest`), so that rewording a docstring stales nothing;
- ``printed``: every library object a cell printed with ``inspect.getsource``, hashed by its
  source text, docstring and comments included (:func:`printed_digest`);
- ``files``: every file under ``mlm_lib/`` the kernel read (results files, the shipped models,
  recall items), seen through Python's audit hook (``open``, and ``mlm_lib.files.READ_EVENT`` for
  reads that bypass it, such as safetensors'), and ``listed``: the asset folders it listed;
- ``seconds``: how long it took (``scripts/longest_first.py`` schedules nbval by it).

`tests/content/test_notebooks.py` runs :func:`check`, which recomputes each part and fails when a
chapter's outputs are older than what they were made from, so the site never shows stale outputs;
`make execute` re-executes exactly the chapters it names.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from mlm_lib.book.recall import CHAPTER_ENV
from mlm_lib.files import READ_EVENT

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "mlm_lib"
STAMP_KEY = "fill_in_the_blank"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
FIX = "re-execute it: make execute NB={}"
# A stall (a lost kernel reply) should cost a minute or two, not five: the longest cell of any
# chapter takes under 60 s on 2 cores (the timing summary of `make test` shows each chapter).
CELL_TIMEOUT_S = 120
# A printed object's key in the stamp: "<file>::<qualified name>" ("<file>::" for a whole module).
PRINTED_SEP = "::"
# Run silently (no execution count, no output) in the chapter's kernel before its first cell: watch
# what the chapter reads from the library and whose source it prints. Audit hooks see every open()
# and folder listing; a cell's call of inspect.getsource is recorded by wrapping it.
WATCH = r"""
def _fitb_watch(library, read_event):
    import inspect, os, sys
    seen = {"read": set(), "written": set(), "listed": set(), "printed": set()}
    prefix = library + os.sep
    writes = os.O_WRONLY | os.O_RDWR

    def under(path):
        if isinstance(path, int):
            return None
        path = os.path.abspath(os.fsdecode(path))
        return path if path.startswith(prefix) else None

    def hook(event, args):
        try:
            record(event, args)
        except Exception:  # an audit hook that raises would fail the chapter's own open()
            pass

    def record(event, args):
        if event == "open":
            path = under(args[0])
            if path:
                mode, flags = args[1], args[2] or 0
                written = any(c in mode for c in "wax+") if mode else bool(flags & writes)
                seen["written" if written else "read"].add(path)
        elif event == read_event:
            path = under(args[0])
            if path:
                seen["read"].add(path)
        elif event == "os.rename":  # os.replace too: an atomic save's rename into place writes
            path = under(args[1])
            if path:
                seen["written"].add(path)
        elif event in ("os.listdir", "os.scandir"):
            path = under(args[0] if args[0] is not None else ".")
            if path:
                seen["listed"].add(path)

    sys.addaudithook(hook)
    getsource = inspect.getsource

    def recorded_getsource(obj):
        text = getsource(obj)
        if sys._getframe(1).f_globals.get("__name__") == "__main__":  # a cell's own call
            target = inspect.unwrap(getattr(obj, "__func__", obj))
            path = under(inspect.getsourcefile(target) or "")
            if path:
                name = "" if inspect.ismodule(target) else getattr(target, "__qualname__", "")
                seen["printed"].add((path, name))
        return text

    inspect.getsource = recorded_getsource
    return seen


_fitb_seen = _fitb_watch(%r, %r)
del _fitb_watch
"""
# Run after the chapter, in its kernel, as a cell that is then removed: what did it import, read,
# write, list and print?
REPORT = ("import sys as _s, json as _j\n"
          "print(_j.dumps({'modules': sorted(getattr(m, '__file__', None) or '' for n, m in "
          "list(_s.modules.items()) if n == 'mlm_lib' or n.startswith('mlm_lib.')),\n"
          "    **{k: sorted(v) for k, v in _fitb_seen.items()}}))")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_hash(nb: nbformat.NotebookNode) -> str:
    """The hash of a notebook's code cells, in order: what its outputs depend on."""
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    return sha256_bytes(json.dumps(sources).encode())


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def _canonical(node: Any) -> Any:
    """An AST as plain data, leaving out empty fields: ``ast.dump``'s text differs between Python
    versions (3.13 drops empty fields, 3.12 added ``type_params``), this does not."""
    if isinstance(node, ast.AST):
        fields = {f: _canonical(getattr(node, f, None)) for f in node._fields}
        return [type(node).__name__, {f: v for f, v in fields.items() if v not in (None, [])}]
    if isinstance(node, list):
        return [_canonical(n) for n in node]
    if isinstance(node, (bytes, complex)) or node is Ellipsis:
        return repr(node)
    return node


# Digests of the same source are asked for once per chapter that reads it (and many times over by
# the tests that ask which edits stale which chapters): parse each text once.
SOURCE_DIGESTS_CACHED = 1024


@lru_cache(maxsize=SOURCE_DIGESTS_CACHED)
def code_digest(source: bytes) -> str:
    """The hash of a module's code, blind to its docstrings, comments and layout: an edit that
    cannot change what the module does cannot make a chapter stale."""
    tree = _without_docstrings(ast.parse(source))
    return sha256_bytes(json.dumps(_canonical(tree)).encode())


def object_source(source: str, qualname: str) -> str | None:
    """The source text of the function or class ``qualname`` (``Class.method``) in a module's
    ``source``, decorators included, as ``inspect.getsource`` prints it; the whole module for
    ``""`` or a name defined inside a function (``<locals>``); None when it is not there."""
    if not qualname or "<locals>" in qualname:
        return source
    scope: list[ast.stmt] = ast.parse(source).body
    node = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
        scope = node.body
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return "\n".join(source.splitlines()[first - 1: node.end_lineno])


@lru_cache(maxsize=SOURCE_DIGESTS_CACHED)
def printed_digest(source: bytes, qualname: str) -> str | None:
    """The hash of one printed object's source text (None when the object is gone)."""
    text = object_source(source.decode("utf-8"), qualname)
    return None if text is None else sha256_bytes(text.encode())


def listing_digest(folder: Path) -> str:
    """The hash of a folder's entry names: a file added to a folder a chapter lists changes it."""
    return sha256_bytes(json.dumps(sorted(os.listdir(folder))).encode())


def _rel(path: Path | str) -> str:
    return Path(path).resolve().relative_to(ROOT).as_posix()


def _is_package_or_cache(folder: Path) -> bool:
    """Python's import system lists the library's packages and caches; those listings are the
    imports' (stamped as ``modules``), not the chapter's."""
    return (folder / "__init__.py").exists() or folder.name == "__pycache__"


def stamp_of(report: dict[str, list], code_sha256: str, seconds: float) -> dict[str, Any]:
    """The stamp of one execution from what its kernel reported (:data:`REPORT`).

    Files the chapter wrote itself (the models chapters 11 and 12 save, renamed into place as a
    folder) are its outputs, not its inputs, and neither are folders it wrote into; Python files
    are stamped as modules."""
    written = {Path(p) for p in report["written"]}
    wrote_into = {p.parent for p in written}

    def output(path: Path) -> bool:
        return path in written or any(parent in written for parent in path.parents)

    read = [Path(p) for p in report["read"]]
    files = [p for p in read if p.is_file() and not output(p) and p.suffix not in (".py", ".pyc")]
    listed = [Path(p) for p in report["listed"]]
    listed = [p for p in listed
              if p.is_dir() and p not in wrote_into and not output(p) and not _is_package_or_cache(p)]
    printed = {}
    for file, name in report["printed"]:
        digest = printed_digest(Path(file).read_bytes(), name)
        if digest is not None:
            printed[f"{_rel(file)}{PRINTED_SEP}{name}"] = digest
    return {
        "code_sha256": code_sha256,
        "modules": {_rel(m): code_digest(Path(m).read_bytes()) for m in sorted(set(report["modules"]))},
        "printed": dict(sorted(printed.items())),
        "files": {_rel(f): sha256_bytes(f.read_bytes()) for f in sorted(set(files))},
        "listed": {_rel(d): listing_digest(d) for d in sorted(set(listed))},
        "seconds": round(seconds, 1),
    }


def _read_bytes(path: Path) -> bytes:
    return path.read_bytes()


def check(nb: nbformat.NotebookNode, path: Path,
          read: Callable[[Path], bytes] = _read_bytes) -> list[str]:
    """Every reason this notebook's stored outputs cannot be trusted (empty when they can).

    ``read`` gives a library file's bytes as they are now; a test passes another to ask which
    chapters an edit would make stale, without making it."""
    problems = []
    name = path.relative_to(ROOT).as_posix()
    fix = FIX.format(name)
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
    if not stamp or "modules" not in stamp:
        problems.append(f"{name}: no execution stamp (or one of an older kind); {fix}")
        return problems
    if stamp["code_sha256"] != code_hash(nb):
        problems.append(f"{name}: a code cell changed since it was executed; {fix}")

    def changed(rel: str, digest: Callable[[bytes], str | None], stamped: str, what: str) -> None:
        file = ROOT / rel
        if not file.is_file():
            problems.append(f"{name}: executed against {rel}, which no longer exists; {fix}")
        elif digest(read(file)) != stamped:
            problems.append(f"{name}: older than {what}, which changed since; {fix}")

    for rel, stamped in stamp["modules"].items():
        changed(rel, code_digest, stamped, f"the code of {rel}")
    for key, stamped in stamp["printed"].items():
        rel, _, qualname = key.partition(PRINTED_SEP)
        changed(rel, lambda b, q=qualname: printed_digest(b, q), stamped,
                f"the printed source of {qualname or 'module'} in {rel}")
    for rel, stamped in stamp["files"].items():
        changed(rel, sha256_bytes, stamped, rel)
    for rel, stamped in stamp["listed"].items():
        folder = ROOT / rel
        if not folder.is_dir() or listing_digest(folder) != stamped:
            problems.append(f"{name}: older than the list of files in {rel}, which changed since; {fix}")
    return problems


def chapters() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def stale_chapters(paths: list[Path] | None = None,
                   read: Callable[[Path], bytes] = _read_bytes) -> list[Path]:
    """The chapters whose stored outputs :func:`check` does not trust."""
    return [p for p in (paths or chapters()) if check(nbformat.read(p, as_version=4), p, read)]


def coalesce_streams(nb: nbformat.NotebookNode) -> None:
    """Join each cell's consecutive prints to one stream into one output: how the kernel's
    messages split them depends on timing, and would change the file at every execution."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        joined: list[nbformat.NotebookNode] = []
        for out in cell.outputs:
            last = joined[-1] if joined else None
            if (out.output_type == "stream" and last is not None and last.output_type == "stream"
                    and last.name == out.name):
                last.text = "".join(last.text) + "".join(out.text)
            else:
                joined.append(out)
        cell.outputs = joined


WIDGET_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def shown_widgets(nb: nbformat.NotebookNode) -> list[str]:
    """The model ids of the widgets the chapter shows, in a fixed order: each view in the order
    of the outputs, each followed by the models it refers to (layout, style, children, a nested
    output's views), depth first in the order of its sorted state. The kernel's own order is lost
    once the notebook is written (nbformat sorts the keys)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    order: list[str] = []

    def visit(i: str) -> None:
        if i in state and i not in order:
            order.append(i)
            for j in WIDGET_ID.findall(json.dumps(state[i], sort_keys=True)):
                visit(j)

    for cell in nb.cells:
        if cell.cell_type == "code":
            for i in WIDGET_ID.findall(json.dumps(cell.outputs, sort_keys=True)):
                visit(i)
    return order


def drop_unshown_widgets(nb: nbformat.NotebookNode) -> None:
    """Keep the state of the widgets the chapter shows (:func:`shown_widgets`), not of those a
    library made and never displayed (transformers' and datasets' progress bars, with their
    speeds)."""
    widgets = nb.metadata.get("widgets", {})
    state = widgets.get(WIDGET_STATE, {}).get("state", {})
    kept = set(shown_widgets(nb))
    for i in [i for i in state if i not in kept]:
        del state[i]
    if WIDGET_STATE in widgets and not state:
        del widgets[WIDGET_STATE]
    if "widgets" in nb.metadata and not widgets:
        del nb.metadata["widgets"]


def stable_widget_ids(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """The notebook with its widgets' random model ids replaced by ids derived from the chapter's
    name and each widget's place in :func:`shown_widgets`' order, which the chapter's code fixes:
    an execution that draws the same widgets stores the same ids."""
    stable = {old: hashlib.sha256(f"{name}/{i}".encode()).hexdigest()[:32]
              for i, old in enumerate(shown_widgets(nb))}
    if not stable:
        return nb
    text = WIDGET_ID.sub(lambda m: stable.get(m.group(0), m.group(0)), json.dumps(nb, ensure_ascii=False))
    return nbformat.from_dict(json.loads(text))


def execute(path: Path, timeout: int = CELL_TIMEOUT_S) -> float:
    """Execute one notebook in place (outputs, widget state, stamp); return the seconds taken.

    Nothing that changes from one execution to the next without the code changing is kept: no
    per-cell timestamps (the stamp keeps the chapter's total), prints joined however the kernel's
    messages split them, no widget the chapter does not show, widget ids derived from the chapter
    (re-executing unchanged code rewrites only what its code prints differently: timings, speeds)."""
    nb = nbformat.read(path, as_version=4)
    n_cells = len(nb.cells)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            record_timing=False, resources={"metadata": {"path": str(path.parent)}})

    async def watch(notebook: nbformat.NotebookNode) -> None:
        reply = await client.async_wait_for_reply(
            client.kc.execute(WATCH % (str(LIBRARY), READ_EVENT), silent=True, store_history=False))
        if reply is None or reply["content"]["status"] != "ok":
            raise RuntimeError(f"{path.name}: the kernel could not start watching its reads: {reply}")

    client.on_notebook_start = watch
    start = time.perf_counter()
    client.execute(env={**os.environ, CHAPTER_ENV: path.stem})  # its recall items: its own file
    seconds = time.perf_counter() - start
    report_cell = nb.cells.pop()
    assert len(nb.cells) == n_cells
    report = json.loads(report_cell.outputs[0]["text"])
    report["modules"] = [m for m in report["modules"] if m]
    outside = [m for m in report["modules"] if LIBRARY not in Path(m).resolve().parents]
    if outside:
        raise SystemExit(f"{path.name} imported mlm_lib from {outside[0]}, not from this checkout: "
                         "install it with `pip install -e .`")
    coalesce_streams(nb)
    drop_unshown_widgets(nb)
    nb = stable_widget_ids(nb, path.stem)
    nb.metadata[STAMP_KEY] = {"executed": stamp_of(report, code_hash(nb), seconds)}
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
