"""The library's two rooms: ``mlm_lib`` (the BERT a teacher reuses) never imports ``mlm_lib.book``
(the book's machinery), and no module imports itself back through another, ``TYPE_CHECKING``
blocks included. The command line (``mlm_lib/__main__.py``) is part of the library: its defaults
(the shipped model, vocabulary and recipes) come from ``mlm_lib.packaged``."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_closure import imported_names

PACKAGE = Path(__file__).resolve().parents[2] / "mlm_lib"


def imported_modules(source: str, module: str) -> set[str]:
    """Every ``mlm_lib`` module that ``source`` (the text of ``module``) imports, anywhere in it
    (the reading ``scripts/import_closure.py`` measures the chapters' stamps with)."""
    return {m for m in imported_names(source, module) if m == "mlm_lib" or m.startswith("mlm_lib.")}


def library_modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package (``mlm_lib.book`` included)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def import_graph() -> dict[str, set[str]]:
    modules = library_modules()
    return {name: {m for m in imported_modules(path.read_text(), name) if m in modules and m != name}
            for name, path in modules.items()}


def core_modules_importing_book(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {name: {m for m in deps if m == "mlm_lib.book" or m.startswith("mlm_lib.book.")}
            for name, deps in graph.items()
            if not name.startswith("mlm_lib.book")
            and any(m == "mlm_lib.book" or m.startswith("mlm_lib.book.") for m in deps)}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_library_never_imports_the_book():
    offenders = core_modules_importing_book(import_graph())
    assert not offenders, f"core modules import the book's machinery: {offenders}"


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None, f"import cycle: {' -> '.join(find_cycle(import_graph()))}"


def test_the_checks_catch_a_planted_import():
    planted = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mlm_lib.book.recall import recall\n"
    modules = {"mlm_lib.loss", "mlm_lib.book.recall"}
    graph = {"mlm_lib.loss": imported_modules(planted, "mlm_lib.loss") & modules, "mlm_lib.book.recall": set()}
    assert core_modules_importing_book(graph) == {"mlm_lib.loss": {"mlm_lib.book.recall"}}
    assert core_modules_importing_book({"mlm_lib.__main__": {"mlm_lib.book.book_model"}}) == {
        "mlm_lib.__main__": {"mlm_lib.book.book_model"}}


def test_the_cycle_check_sees_type_checking_imports():
    a = "from mlm_lib.b import f\n"
    b = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mlm_lib.a import g\n"
    graph = {"mlm_lib.a": imported_modules(a, "mlm_lib.a"), "mlm_lib.b": imported_modules(b, "mlm_lib.b")}
    graph = {k: {m for m in v if m in graph} for k, v in graph.items()}
    assert find_cycle(graph) == ["mlm_lib.a", "mlm_lib.b", "mlm_lib.a"]


@pytest.mark.parametrize("relative, expected", [("from .loss import mlm_loss", "mlm_lib.loss"),
                                                ("from . import recall", "mlm_lib.book.recall")])
def test_relative_imports_are_resolved(relative, expected):
    module = "mlm_lib.book.live" if "recall" in relative else "mlm_lib.model"
    assert expected in imported_modules(relative, module)
