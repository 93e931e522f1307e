"""The library's two rooms: ``mlm_lib`` (the BERT a teacher reuses) never imports ``mlm_lib.book``
(the book's machinery), and no module imports itself back through another, ``TYPE_CHECKING``
blocks included. The command line (``mlm_lib/__main__.py``) is part of the library: its defaults
(the shipped model, vocabulary and recipes) come from ``mlm_lib.packaged``.

The library's tests keep to the library too: no file of tests/lib, nor tests/conftest.py, nor a
helper module they import from the tests' ``pythonpath`` (``toy_data``, ``padded``, ...), imports
``mlm_lib.book``, anywhere in it (inside a function included). A test of the book's machinery
belongs in tests/book; the install and package-data tests (the network, the book's assets) in
tests/install.

One home per name: a name many files use (``BertConfig``, ``IGNORE_INDEX``) is defined once and
imported from that module only, and no module imports another's private (``_``) name."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from import_closure import imported_names

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mlm_lib"
TESTS = ROOT / "tests"
# Where the tests' helper modules are importable by name from (pyproject.toml's pytest pythonpath).
PYTHONPATH = [ROOT / p for p in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
              ["tool"]["pytest"]["ini_options"]["pythonpath"]]


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


# ---------------------------------------------------------------- tests/lib: the library alone

def is_book(module: str) -> bool:
    return module == "mlm_lib.book" or module.startswith("mlm_lib.book.")


def helper_file(name: str, pythonpath: list[Path]) -> Path | None:
    """The file of the top-level module of ``name`` found on ``pythonpath`` (a helper beside the
    tests, a script), or None (an installed package, the standard library)."""
    top = name.split(".")[0]
    for folder in pythonpath:
        for path in (folder / f"{top}.py", folder / top / "__init__.py"):
            if path.is_file():
                return path
    return None


def lib_test_files(tests: Path, pythonpath: list[Path]) -> list[Path]:
    """Every Python file that a run of ``tests/lib`` loads from the repository: its own, the
    ``conftest.py`` files above it, and the helper modules they import from ``pythonpath``,
    followed through the helpers' own imports."""
    todo = sorted((tests / "lib").rglob("*.py")) + [p for p in (tests / "conftest.py",) if p.is_file()]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_names(path.read_text(encoding="utf-8")):
            helper = helper_file(name, pythonpath)
            if helper is not None and helper not in seen:
                todo.append(helper)
    return sorted(seen)


def files_importing_book(files: list[Path], root: Path) -> dict[str, set[str]]:
    """File (relative to ``root``) -> the ``mlm_lib.book`` modules it imports anywhere in it
    (module level, inside a function, under ``TYPE_CHECKING``), for each file that imports one."""
    out = {}
    for path in files:
        book = {m for m in imported_names(path.read_text(encoding="utf-8")) if is_book(m)}
        if book:
            out[path.relative_to(root).as_posix()] = book
    return out


def test_the_library_tests_never_import_the_book():
    files = lib_test_files(TESTS, PYTHONPATH)
    names = {p.relative_to(ROOT).as_posix() for p in files}
    # the walk reaches the shared helpers (were it blind to them, the check would prove little)
    assert {"tests/conftest.py", "tests/toy_data.py", "tests/padded.py", "tests/lib/test_layout.py"} <= names
    offenders = files_importing_book(files, ROOT)
    assert not offenders, (f"tests/lib must test the library alone; these import the book's machinery "
                           f"(move the test to tests/book, or use mlm_lib.packaged): {offenders}")


def test_the_library_tests_have_no_install_or_package_data_test():
    # the network and the book's assets: tests/install (make test-install)
    assert not list((TESTS / "lib").glob("test_install*.py")) + list((TESTS / "lib").glob("test_package_data*.py"))
    assert (TESTS / "install" / "test_install.py").is_file() and (TESTS / "install" / "test_package_data.py").is_file()


def test_the_tests_check_catches_planted_book_imports(tmp_path):
    tests = tmp_path / "tests"
    (tests / "lib").mkdir(parents=True)
    (tests / "conftest.py").write_text("import pytest\nfrom mlm_lib.packaged import default_tokenizer\n")
    (tests / "lib" / "test_top.py").write_text("from mlm_lib.book.book_model import book_tokenizer\n")
    (tests / "lib" / "test_clean.py").write_text(
        "import torch\nimport mlm_lib.bookish\nfrom mlm_lib import model\nfrom planted_helper import f\n")
    # a helper module beside the tests, imported by a test, whose book import hides in a function
    (tests / "planted_helper.py").write_text("def f():\n    import mlm_lib.book.recall\n    return 1\n")
    (tests / "unused_helper.py").write_text("from mlm_lib import book\n")  # no test imports it
    files = lib_test_files(tests, [tests])
    assert [p.relative_to(tests).as_posix() for p in files] == [
        "conftest.py", "lib/test_clean.py", "lib/test_top.py", "planted_helper.py"]
    assert files_importing_book(files, tests) == {
        "lib/test_top.py": {"mlm_lib.book.book_model", "mlm_lib.book.book_model.book_tokenizer"},
        "planted_helper.py": {"mlm_lib.book.recall"}}
    # ``from mlm_lib import book`` names the package too
    assert files_importing_book([tests / "unused_helper.py"], tests) == {"unused_helper.py": {"mlm_lib.book"}}


# ---------------------------------------------------------------- one home per name

# A name the repository's code uses in many places, and the one module that defines it: every
# import takes it from there (the chapters keep the imports they were written with).
HOMES = {"BertConfig": "mlm_lib.config", "IGNORE_INDEX": "mlm_lib.loss"}
CODE = [ROOT / folder for folder in ("mlm_lib", "tests", "scripts", "benchmarks")]


def code_files(folders: list[Path]) -> dict[Path, str]:
    """Every Python file of ``folders`` -> its module name (relative imports resolve against
    it; empty outside the package)."""
    modules = {path: name for name, path in library_modules().items()}
    return {path: modules.get(path, "") for folder in folders for path in sorted(folder.rglob("*.py"))}


def misplaced_imports(source: str, module: str = "") -> set[str]:
    """``module.name`` for each name of ``HOMES`` that ``source`` imports from a library module
    other than the name's home, anywhere in it."""
    out = set()
    for dotted in imported_names(source, module):
        origin, _, name = dotted.rpartition(".")
        if origin.startswith("mlm_lib") and name in HOMES and origin != HOMES[name]:
            out.add(dotted)
    return out


def private_imports(source: str, module: str) -> set[str]:
    """``other.name`` for each name starting with ``_`` that ``source`` (the text of ``module``)
    imports from another ``mlm_lib`` module: a private name stays in its module, and a name
    another module needs is public, with a docstring that says why."""
    out = set()
    for dotted in imported_names(source, module):
        origin, _, name = dotted.rpartition(".")
        dunder = name.startswith("__") and name.endswith("__")
        if origin.startswith("mlm_lib") and origin != module and name.startswith("_") and not dunder:
            out.add(dotted)
    return out


def definers(name: str, sources: dict[str, str]) -> list[str]:
    """The modules (of ``sources``: module -> text) that define ``name`` at their top level: by
    an assignment, a ``def`` or a ``class``."""
    out = []
    for module, source in sorted(sources.items()):
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = {node.name}
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            else:
                continue
            if name in defined:
                out.append(module)
                break
    return out


def test_each_shared_name_is_imported_from_its_home():
    offenders = {path.relative_to(ROOT).as_posix(): found for path, module in code_files(CODE).items()
                 if (found := misplaced_imports(path.read_text(encoding="utf-8"), module))}
    assert not offenders, f"import these from their home ({HOMES}): {offenders}"


def test_no_private_name_crosses_a_module():
    offenders = {name: found for name, path in library_modules().items()
                 if (found := private_imports(path.read_text(encoding="utf-8"), name))}
    assert not offenders, f"private names imported from another module (make them public): {offenders}"


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_shared_name_is_defined_once_in_its_home(name):
    sources = {module: path.read_text(encoding="utf-8") for module, path in library_modules().items()}
    assert definers(name, sources) == [HOMES[name]]


def test_the_home_checks_catch_planted_cases():
    planted = ("from mlm_lib.model import BertConfig, BertModel\nfrom mlm_lib.config import BertConfig\n"
               "from transformers import BertConfig\ndef f():\n    from mlm_lib.masking import IGNORE_INDEX\n")
    assert misplaced_imports(planted) == {"mlm_lib.model.BertConfig", "mlm_lib.masking.IGNORE_INDEX"}
    assert misplaced_imports("from .model import BertConfig\n", "mlm_lib.train") == {"mlm_lib.model.BertConfig"}
    twice = {"mlm_lib.loss": "IGNORE_INDEX = -100\n", "mlm_lib.masking": "IGNORE_INDEX: int = -100\n",
             "mlm_lib.spans": "from mlm_lib.loss import IGNORE_INDEX\n", "mlm_lib.x": "def IGNORE_INDEX(): ...\n"}
    assert definers("IGNORE_INDEX", twice) == ["mlm_lib.loss", "mlm_lib.masking", "mlm_lib.x"]


def test_the_private_check_catches_planted_imports():
    planted = ("from mlm_lib.spans import _words_with_positions\nimport mlm_lib.__main__\n"
               "from mlm_lib.tokenizer import _SPECIAL_RE, word_spans\nfrom mlm_lib import __version__\n"
               "def f():\n    from .diagram import _arrow_marker\n")
    assert private_imports(planted, "mlm_lib.book.wiki_links") == {
        "mlm_lib.spans._words_with_positions", "mlm_lib.tokenizer._SPECIAL_RE", "mlm_lib.book.diagram._arrow_marker"}
