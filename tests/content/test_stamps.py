"""A chapter's stamp covers what its outputs were made from and nothing more, so an edit re-executes
only the chapters it can change (``scripts/execute_notebooks.py`` says what a stamp holds):

- a results file stales only the chapters that read it;
- a docstring or comment edit to a function no chapter prints stales no chapter;
- an edit to a printed function stales exactly the chapters that print it;
- a code edit of the training loop stales at most the chapters that run it (train, or score through it).

"Made stale" is what ``execute_notebooks.check`` (the check of ``tests/content/test_notebooks.py``
and ``make execute``) says once a file holds the edited text; no file is ever edited. Each expected
set is read from the chapters' code, not from the stamps: which chapters name a results file, which
call ``inspect.getsource`` on a function, which train (``scripts/import_closure.py``).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import execute_notebooks
import import_closure
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "mlm_lib"
RESULTS = sorted((LIBRARY / "book" / "assets" / "results").glob("*.json"))
# The files whose edits the stamps are meant to make cheap (the list, and the loss).
CORE = ["model.py", "masking.py", "loop.py", "tokenizer.py", "loss.py"]

Notebooks = dict[str, tuple[nbformat.NotebookNode, Path]]


def committed() -> Notebooks:
    return {p.stem: (nbformat.read(p, as_version=4), p) for p in execute_notebooks.chapters()}


NOTEBOOKS = committed()


@functools.cache
def committed_bytes(path: Path) -> bytes:
    """A file's bytes as committed, read once: the same object each time, so the stamp's digests
    of it are computed once (``execute_notebooks`` caches them by the bytes)."""
    return path.read_bytes()


@functools.cache
def committed_problems(name: str) -> frozenset[str]:
    nb, path = NOTEBOOKS[name]
    return frozenset(execute_notebooks.check(nb, path, committed_bytes))


def problems_now(name: str, nb: nbformat.NotebookNode, path: Path) -> frozenset[str]:
    if name in NOTEBOOKS and NOTEBOOKS[name][0] is nb:
        return committed_problems(name)
    return frozenset(execute_notebooks.check(nb, path, committed_bytes))


def made_stale(notebooks: Notebooks, edited: Path, new: bytes) -> set[str]:
    """The notebooks that ``check`` finds a new problem with once ``edited`` holds ``new``."""
    edited = edited.resolve()

    def read(path: Path) -> bytes:
        path = path.resolve()
        return new if path == edited else committed_bytes(path)

    return {name for name, (nb, path) in notebooks.items()
            if set(execute_notebooks.check(nb, path, read)) - problems_now(name, nb, path)}


def edit_body_of(source: str, qualname: str, edit: Callable[[ast.AST, list[str]], None]) -> str:
    """``source`` with ``edit`` applied to the lines of function ``qualname`` (by its AST node)."""
    scope, node = ast.parse(source).body, None
    for part in qualname.split("."):
        node = next(n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
        scope = node.body
    lines = source.splitlines(keepends=True)
    edit(node, lines)
    return "".join(lines)


def plant_comment(node: ast.AST, lines: list[str]) -> None:
    """A comment line as the body's first line: the printed text changes, the code does not."""
    first = node.body[0]
    indent = re.match(r"\s*", lines[first.lineno - 1]).group(0)
    lines.insert(first.lineno - 1, f"{indent}# planted comment\n")


def plant_in_docstring(node: ast.AST, lines: list[str]) -> None:
    doc = node.body[0]
    i = doc.lineno - 1
    lines[i] = lines[i].replace('"""', '"""Planted. ', 1)


def has_docstring(node: ast.AST) -> bool:
    return bool(node.body) and isinstance(node.body[0], ast.Expr) and isinstance(
        getattr(node.body[0], "value", None), ast.Constant) and isinstance(node.body[0].value.value, str)


def printed_keys() -> dict[str, set[str]]:
    """Each printed object's stamp key, with the chapters whose stamps say they print it."""
    keys: dict[str, set[str]] = {}
    for name, (nb, _) in NOTEBOOKS.items():
        for key in nb.metadata[execute_notebooks.STAMP_KEY]["executed"]["printed"]:
            keys.setdefault(key, set()).add(name)
    return keys


def functions_with_docstrings(source: str) -> list[str]:
    """The qualified names of the module's functions and methods that have a docstring."""
    out = []
    for node in ast.parse(source).body:
        children = [(node.name, node)] if isinstance(node, ast.FunctionDef) else []
        if isinstance(node, ast.ClassDef):
            children = [(f"{node.name}.{n.name}", n) for n in node.body if isinstance(n, ast.FunctionDef)]
        out += [q for q, n in children if has_docstring(n)]
    return out


# --- results files -------------------------------------------------------------------------------

def chapters_naming(stem: str) -> set[str]:
    """The chapters whose code passes the results file's name to a call as its first argument
    (``load_results("electra")``, ``reproduces("electra", 0, live)``)."""
    found = set()
    for name, (nb, _) in NOTEBOOKS.items():
        for cell in nb.cells:
            if cell.cell_type == "code" and any(
                    isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant)
                    and n.args[0].value == stem for n in ast.walk(ast.parse(cell.source))):
                found.add(name)
    return found


@pytest.mark.parametrize("results", RESULTS, ids=lambda p: p.stem)
def test_a_results_file_edit_stales_only_the_chapters_that_read_it(results):
    stale = made_stale(NOTEBOOKS, results, results.read_bytes() + b"\n")
    assert stale == chapters_naming(results.stem), (
        f"an edit of {results.name} stales {sorted(stale)}; the chapters that name it are "
        f"{sorted(chapters_naming(results.stem))}")
    assert len(stale) < len(NOTEBOOKS) // 2


# --- docstrings, comments and printed sources -----------------------------------------------------

@pytest.mark.parametrize("file", CORE)
def test_a_docstring_edit_to_an_unprinted_function_stales_no_chapter(file):
    path = LIBRARY / file
    source = path.read_text(encoding="utf-8")
    printed = {key.partition("::")[2] for key in printed_keys() if key.startswith(f"mlm_lib/{file}::")}
    unprinted = [q for q in functions_with_docstrings(source) if q not in printed
                 and not any(p.startswith(q + ".") or q.startswith(p + ".") for p in printed)]
    assert unprinted, f"{file} has no unprinted function with a docstring to plant an edit in"
    for qualname in unprinted[:3]:
        edited = edit_body_of(source, qualname, plant_in_docstring)
        assert made_stale(NOTEBOOKS, path, edited.encode()) == set(), (
            f"a docstring edit of {file}'s {qualname}, which no chapter prints, stales chapters")
    module_doc = source.replace('"""', '"""Planted. ', 1)
    assert made_stale(NOTEBOOKS, path, module_doc.encode()) == set()


def library_names() -> dict[str, object]:
    """Every module of the library by its last name, and every class and function it defines by
    its name: what a chapter's ``getsource(X.y)`` can name."""
    names: dict[str, object] = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts)
                                         .removesuffix(".__init__"))
        names.setdefault(module.__name__.rsplit(".", 1)[-1], module)
        for key, value in vars(module).items():
            if (inspect.isclass(value) or inspect.isfunction(value)) and value.__module__ == module.__name__:
                names.setdefault(key, value)
    return names


def printed_qualname(expression: ast.expr, names: dict[str, object]) -> str | None:
    """The qualified name of the library object a ``getsource`` argument resolves to
    (``BertClassifier.from_pretraining`` is ``FinetunedBert.from_pretraining``, where it is defined)."""
    parts = ast.unparse(expression).split(".")
    obj = names.get(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    obj = inspect.unwrap(getattr(obj, "__func__", obj)) if obj is not None else None
    return getattr(obj, "__qualname__", None)


def printers_by_code(qualname: str) -> set[str]:
    """The chapters whose cells call ``getsource`` on the object ``qualname`` (read from the code,
    the name resolved through the library)."""
    names = library_names()
    found = set()
    for name, (nb, _) in NOTEBOOKS.items():
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            for node in ast.walk(ast.parse(cell.source)):
                if (isinstance(node, ast.Call) and node.args and "getsource" in ast.unparse(node.func)
                        and printed_qualname(node.args[0], names) == qualname):
                    found.add(name)
    return found


def test_every_printed_function_is_stamped_by_exactly_its_printers():
    keys = printed_keys()
    assert len(keys) >= 15, f"only {len(keys)} printed objects are stamped"
    for key, stamped in keys.items():
        assert stamped == printers_by_code(key.partition("::")[2]), key


@pytest.mark.parametrize("key", sorted(printed_keys()))
def test_an_edit_to_a_printed_function_stales_exactly_its_printers(key):
    rel, _, qualname = key.partition("::")
    path = ROOT / rel
    source = path.read_text(encoding="utf-8")
    stale = made_stale(NOTEBOOKS, path, edit_body_of(source, qualname, plant_comment).encode())
    assert stale == printers_by_code(qualname), (
        f"a comment planted in {qualname} stales {sorted(stale)}; "
        f"its printers are {sorted(printers_by_code(qualname))}")


def test_the_stamped_source_is_what_getsource_prints():
    """The stamp hashes a printed object's text as read from the file (no import): it must be the
    text ``inspect.getsource`` gives the chapter."""
    for key in printed_keys():
        rel, _, qualname = key.partition("::")
        module = importlib.import_module(rel.removesuffix(".py").replace("/", "."))
        obj = module
        for part in qualname.split("."):
            obj = getattr(obj, part)
        text = execute_notebooks.object_source((ROOT / rel).read_text(encoding="utf-8"), qualname)
        assert text == inspect.getsource(obj).rstrip("\n"), key


def test_the_code_digest_sees_code_and_ignores_docstrings_comments_and_layout():
    digest = lambda s: execute_notebooks.code_digest(s.encode())  # noqa: E731
    base = 'def f(x):\n    """Why."""\n    return x + 1\n'
    assert digest(base) == digest('def f(x):\n    """Why, reworded."""\n    # a comment\n    return x+1\n')
    assert digest(base) == digest("def f(x):\n    return (x + 1)\n")
    assert digest(base) != digest('def f(x):\n    """Why."""\n    return x + 2\n')
    assert digest(base) != digest('def f(y):\n    """Why."""\n    return y + 1\n')
    assert digest('X = "text"\n') != digest('X = "other text"\n')  # a string that is not a docstring


# --- training code --------------------------------------------------------------------------------

def with_code_edit(text: str) -> str:
    """``text`` with one statement added at the end: its code changes."""
    return text + "\n_PLANTED = 1\n"


def test_a_code_edit_of_the_loop_stales_only_the_chapters_that_run_it():
    loop = LIBRARY / "loop.py"
    stale = made_stale(NOTEBOOKS, loop, with_code_edit(loop.read_text(encoding="utf-8")).encode())
    training = set(import_closure.training_chapters())
    assert stale, "no chapter's stamp covers mlm_lib/loop.py, yet chapters train with it"
    assert stale <= training, (f"chapters that neither train nor score through the loop are stamped "
                               f"against mlm_lib/loop.py: {sorted(stale - training)}; they import "
                               "training code they do not use")
    assert "10_pretraining" in stale  # the chapter that calls train() itself


def test_the_count_sees_a_chapter_that_imports_training_code_it_does_not_use():
    """Plant loop.py in the stamp of a chapter that only loads the book's model: the edit now
    stales it, and the code says it does not train."""
    nb, path = NOTEBOOKS["01_words_and_symbols"]
    planted = nbformat.reads(nbformat.writes(nb), as_version=4)
    loop = LIBRARY / "loop.py"
    stamp = planted.metadata[execute_notebooks.STAMP_KEY]["executed"]["modules"]
    stamp["mlm_lib/loop.py"] = execute_notebooks.code_digest(loop.read_bytes())
    edit = with_code_edit(loop.read_text(encoding="utf-8")).encode()
    assert "01_words_and_symbols" in made_stale({"01_words_and_symbols": (planted, path)}, loop, edit)
    assert "01_words_and_symbols" not in import_closure.training_chapters([path])


def test_which_chapters_train_is_read_from_the_calls():
    modules = import_closure.library_modules()
    trains = import_closure.training_names(import_closure.name_graph(modules))
    calls = lambda source: import_closure.training_calls(source, modules, trains)  # noqa: E731
    assert calls("from mlm_lib.book.chapter_runs import train_micro\nrun = train_micro(seed=0)\n")
    assert calls("from mlm_lib import train\ntrain.train(m, t, x, c)\n") == {("mlm_lib.train", "train")}
    # scoring held-out blanks runs the loop's evaluation
    assert calls("from mlm_lib.train import evaluate_mlm\nscores = evaluate_mlm(m, b)\n")
    # importing a training module, or using what it defines without training, is not training
    assert not calls("from mlm_lib.train import TrainConfig\ncfg = TrainConfig()\n")
    assert not calls("from mlm_lib.book.book_model import book_model\nmodel = book_model()\n")


def test_stamps_cover_no_more_than_the_code_imports():
    """The static closure (the measuring method of scripts/import_closure.py) bounds what a kernel
    imported: a stamp naming a module the chapter's code cannot reach would mean an import the
    method does not see."""
    modules = import_closure.library_modules()
    for path in execute_notebooks.chapters():
        extra = import_closure.stamped_files(path) - import_closure.chapter_files(path, modules)
        assert not extra, f"{path.name}: stamped against {sorted(extra)}, which its code does not import"


def test_make_execute_re_executes_the_stale_chapters_only(monkeypatch, capsys):
    """``make execute`` runs the script without arguments: the chapters ``check`` calls stale, no
    other; ``ALL=1`` (``--all``) every chapter; ``NB=`` the one named."""
    executed: list[str] = []
    monkeypatch.setattr(execute_notebooks, "execute", lambda path, timeout: executed.append(path.stem) or 0.0)
    stale = [p.stem for p in execute_notebooks.chapters()
             if execute_notebooks.check(nbformat.read(p, as_version=4), p)]
    assert execute_notebooks.main([]) == 0
    assert executed == stale
    assert f"{len(stale)} of {len(execute_notebooks.chapters())} chapters are stale" in capsys.readouterr().out
    executed.clear()
    assert execute_notebooks.main(["--all"]) == 0
    assert executed == [p.stem for p in execute_notebooks.chapters()]
    executed.clear()
    assert execute_notebooks.main([str(execute_notebooks.chapters()[3])]) == 0
    assert executed == [execute_notebooks.chapters()[3].stem]


# --- what the watch in the kernel reports ----------------------------------------------------------

SAVE_AND_READ_BACK = """
import json, sys
from pathlib import Path
from mlm_lib.files import audit_read, replaced_atomically
library = Path(sys.argv[1])
with replaced_atomically(library / "saved") as tmp:  # as chapters 11 and 12 save their models
    tmp.mkdir()
    (tmp / "weights.bin").write_bytes(b"trained")
audit_read(library / "saved" / "weights.bin")  # read back, as safetensors does
(library / "saved" / "weights.bin").read_bytes()
(library / "input.json").read_text()
{report}
"""


def test_a_folder_the_chapter_saved_and_read_back_is_its_output_not_its_input(tmp_path, monkeypatch):
    """The kernel's watch (``WATCH``) sees the atomic save's rename into place, so the folder a
    chapter writes and reads back is never stamped: else every re-execution would stale it."""
    (tmp_path / "input.json").write_text("{}")
    code = execute_notebooks.WATCH % (str(tmp_path), execute_notebooks.READ_EVENT) + \
        SAVE_AND_READ_BACK.format(report=execute_notebooks.REPORT)
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(tmp_path / "saved" / "weights.bin") in report["read"]
    monkeypatch.setattr(execute_notebooks, "ROOT", tmp_path)
    stamp = execute_notebooks.stamp_of({**report, "modules": []}, "code", 1.0)
    assert list(stamp["files"]) == ["input.json"]


# --- What an execution stores: only what the code decides ---------------------------------------

def test_prints_split_by_the_kernel_are_stored_as_one_output():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1); print(2)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stdout", text=["b\n", "c\n"]),
        nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
        nbformat.v4.new_output("stream", name="stdout", text="d\n")])])
    execute_notebooks.coalesce_streams(nb)
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [
        ("stdout", "a\nb\nc\n"), ("stderr", "warning\n"), ("stdout", "d\n")]


def widget_notebook(ids: list[str]) -> nbformat.NotebookNode:
    """Two widgets as a kernel stores them: a slider whose layout is another model, and its view."""
    slider, layout = ids
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("interact(...)", outputs=[
        nbformat.v4.new_output("display_data", data={
            execute_notebooks.WIDGET_VIEW: {"model_id": slider, "version_major": 2}})])])
    state = {slider: {"state": {"layout": f"IPY_MODEL_{layout}"}}, layout: {"state": {}}}
    # as a written notebook holds them: sorted by id (the kernel's order is lost)
    nb.metadata["widgets"] = {execute_notebooks.WIDGET_STATE: {"state": dict(sorted(state.items()))}}
    return nb


def test_widget_ids_follow_the_chapter_not_the_execution():
    first = execute_notebooks.stable_widget_ids(widget_notebook(["a" * 32, "b" * 32]), "07_x")
    again = execute_notebooks.stable_widget_ids(widget_notebook(["d" * 32, "c" * 32]), "07_x")
    assert first.metadata == again.metadata and first.cells[0].outputs == again.cells[0].outputs
    state = first.metadata["widgets"][execute_notebooks.WIDGET_STATE]["state"]
    slider = first.cells[0].outputs[0].data[execute_notebooks.WIDGET_VIEW]["model_id"]
    layout = state[slider]["state"]["layout"].removeprefix("IPY_MODEL_")
    assert set(state) == {slider, layout} and slider not in ("a" * 32, "b" * 32)
    other = execute_notebooks.stable_widget_ids(widget_notebook(["a" * 32, "b" * 32]), "08_y")
    assert set(other.metadata["widgets"][execute_notebooks.WIDGET_STATE]["state"]).isdisjoint(state)


def test_only_the_widgets_a_chapter_shows_are_stored():
    nb = widget_notebook(["a" * 32, "b" * 32])
    state = nb.metadata["widgets"][execute_notebooks.WIDGET_STATE]["state"]
    state["c" * 32] = {"state": {"value": " 42/42 [00:00<00:00, 4421.26it/s]"}}  # a library's bar
    execute_notebooks.drop_unshown_widgets(nb)
    assert set(state) == {"a" * 32, "b" * 32}  # the slider shown, and the layout it refers to
    nb.cells[0].outputs = []
    execute_notebooks.drop_unshown_widgets(nb)
    assert "widgets" not in nb.metadata
