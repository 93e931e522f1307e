"""Which library files each chapter's stamp can cover, read from the code alone (no kernel).

A chapter is stamped (``scripts/execute_notebooks.py``) with every ``mlm_lib`` file its kernel
imported, so an edit of one file makes stale every chapter whose cells reach that file through
imports. This script computes the same set statically: the ``mlm_lib`` modules a chapter's code
cells import, closed over the imports inside ``mlm_lib`` (parent packages included, imports inside
functions included: an upper bound of what a kernel loads). It prints, for each chapter, whether
the static closure equals the committed stamp (the method's check), and how many chapters a
docstring edit of each given file would make stale, by the stamps and by the closures:

    python scripts/import_closure.py mlm_lib/train.py mlm_lib/loop.py mlm_lib/model.py mlm_lib/masking.py

It also says which chapters run the loop (:func:`training_chapters`): those whose cells use a
function or class of the library that reaches ``mlm_lib.loop``'s training loop or its evaluation
(``train_loop``, ``evaluate``: every training run and every held-out score of the library's runs
go through them), through the names its body uses (a call graph over names, read from the code).

Standard library only.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "mlm_lib"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STAMP_KEY = "fill_in_the_blank"


def library_modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    out = {}
    for path in LIBRARY.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def imported_names(source: str, module: str = "") -> set[str]:
    """Every dotted name ``source`` imports (``from a import b`` gives ``a`` and ``a.b``), anywhere
    in it; relative imports are resolved against ``module``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def with_parents(name: str) -> set[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def closure(names: set[str], modules: dict[str, Path]) -> set[str]:
    """The library modules that importing ``names`` runs, transitively."""
    todo = [p for n in names for p in with_parents(n) if p in modules]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in imported_names(modules[name].read_text(encoding="utf-8"), name):
            todo.extend(p for p in with_parents(dep) if p in modules and p not in seen)
    return seen


def chapter_source(path: Path) -> str:
    """A chapter's code cells as one Python text (IPython magics and shell lines left out)."""
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    lines = []
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines += [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def chapter_files(path: Path, modules: dict[str, Path]) -> set[str]:
    """The library files (relative paths) a chapter's imports reach, by the code."""
    names = closure(imported_names(chapter_source(path)), modules)
    return {modules[n].relative_to(ROOT).as_posix() for n in names}


def stamped_files(path: Path) -> set[str]:
    """The Python files of the library a chapter's stamp says its kernel imported."""
    stamp = json.loads(path.read_text(encoding="utf-8"))["metadata"].get(STAMP_KEY, {}).get("executed", {})
    return set(stamp.get("modules", {}))


LOOP_ENTRIES = (("mlm_lib.loop", "train_loop"), ("mlm_lib.loop", "evaluate"))
Name = tuple[str, str]  # (module, a top-level name defined in it)


def _bindings(tree: ast.Module, module: str, modules: dict[str, Path]) -> dict[str, Name | str]:
    """What each name bound by an import in ``tree`` refers to: a library module (a str) or a
    top-level name of one (a pair)."""
    out: dict[str, Name | str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in modules:
                    out[a.asname] = a.name
                elif a.name.split(".")[0] == "mlm_lib":
                    out["mlm_lib"] = "mlm_lib"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(module.split(".")[: -node.level] + ([base] if base else []))
            if base not in modules:
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                out[a.asname or a.name] = full if full in modules else (base, a.name)
    return out


def _references(node: ast.AST, module: str, bindings: dict[str, Name | str],
                defined: set[str]) -> set[Name]:
    """The library names that the code under ``node`` uses (``f``, ``mod.f``, ``pkg.mod.f``)."""
    found: set[Name] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            target = bindings.get(sub.id)
            if isinstance(target, tuple):
                found.add(target)
            elif target is None and sub.id in defined:
                found.add((module, sub.id))
        elif isinstance(sub, ast.Attribute):
            parts, base = [sub.attr], sub.value
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and isinstance(bindings.get(base.id), str):
                dotted = [bindings[base.id], *reversed(parts)]
                for i in range(len(dotted) - 1, 0, -1):  # the longest prefix that is a module
                    if ".".join(dotted[:i]) in _MODULE_NAMES:
                        found.add((".".join(dotted[:i]), dotted[i]))
                        break
    return found


_MODULE_NAMES: set[str] = set()


def name_graph(modules: dict[str, Path]) -> dict[Name, set[Name]]:
    """For each top-level function, class and assignment of the library, the library names its
    code uses."""
    _MODULE_NAMES.update(modules)
    graph: dict[Name, set[Name]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bindings = _bindings(tree, module, modules)
        tops: dict[str, ast.AST] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                tops[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tops.update({t.id: node.value for t in targets if isinstance(t, ast.Name)})
        for name, node in tops.items():
            graph[(module, name)] = _references(node, module, bindings, set(tops))
    return graph


def training_names(graph: dict[Name, set[Name]]) -> set[Name]:
    """The library names whose code reaches the loop's training or evaluation (both included)."""
    trains = set(LOOP_ENTRIES)
    changed = True
    while changed:
        changed = False
        for name, uses in graph.items():
            if name not in trains and uses & trains:
                trains.add(name)
                changed = True
    return trains


def training_calls(source: str, modules: dict[str, Path], trains: set[Name]) -> set[Name]:
    """The library names that ``source`` (a chapter's code) uses, outside its imports, that train."""
    tree = ast.parse(source)
    bindings = _bindings(tree, "__chapter__", modules)
    _MODULE_NAMES.update(modules)
    code = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
    return {ref for node in code for ref in _references(node, "__chapter__", bindings, set())} & trains


def training_chapters(paths: list[Path] = CHAPTERS) -> dict[str, set[Name]]:
    """The chapters that run the loop (train, or score through it), with the names they do it by."""
    modules = library_modules()
    trains = training_names(name_graph(modules))
    found = {p.stem: training_calls(chapter_source(p), modules, trains) for p in paths}
    return {stem: calls for stem, calls in found.items() if calls}


def main(argv: list[str]) -> int:
    modules = library_modules()
    static = {p.stem: chapter_files(p, modules) for p in CHAPTERS}
    stamped = {p.stem: stamped_files(p) for p in CHAPTERS}
    print(f"{'chapter':28s} {'stamped':>7s} {'static':>6s}  agree")
    for name in static:
        extra, missing = static[name] - stamped[name], stamped[name] - static[name]
        note = "yes" if not extra and not missing else f"static only {sorted(extra)}, stamp only {sorted(missing)}"
        print(f"{name:28s} {len(stamped[name]):7d} {len(static[name]):6d}  {note}")
    print(f"\nchapters made stale by an edit (of {len(CHAPTERS)}):")
    for file in argv:
        by_stamp = sorted(n for n, files in stamped.items() if file in files)
        by_code = sorted(n for n, files in static.items() if file in files)
        print(f"{file:22s} stamps {len(by_stamp):2d}, code {len(by_code):2d}: "
              + " ".join(n[:2] for n in by_code))
    print("\nthe chapters that run the loop (train or score through it), and through what:")
    for name, calls in training_chapters().items():
        print(f"{name:28s} " + ", ".join(sorted(f"{m.removeprefix('mlm_lib.')}.{n}" for m, n in calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
