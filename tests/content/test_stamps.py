"""A chapter's stamp covers the library files its cells load, so a small library edit re-executes
only the chapters that use what changed: a docstring edit of the training loop stales at most the
chapters that train, not every chapter that loads the book's model.

"The chapters that train" is read from the code (``scripts/import_closure.py``): the chapters whose
cells use a library function or class that reaches ``mlm_lib.loop.train_loop`` through the names
its code uses. "Made stale" is what ``execute_notebooks.check`` (the check of
``tests/content/test_notebooks.py`` and ``make execute``) says once a file's hash is that of the edited
text; the file itself is never edited.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import execute_notebooks
import import_closure
import nbformat

ROOT = Path(__file__).resolve().parents[2]
LOOP = ROOT / "mlm_lib" / "loop.py"


def with_docstring_edit(text: str) -> str:
    """``text`` with one word added to the first line of its module docstring."""
    start = text.index('"""') + 3
    edited = text[:start] + "Planted: " + text[start:]
    assert edited != text
    return edited


def made_stale(notebooks: dict[str, tuple[nbformat.NotebookNode, Path]], edited: Path,
               new_text: str) -> set[str]:
    """The notebooks that ``check`` finds a new problem with once ``edited`` holds ``new_text``."""
    new_digest = hashlib.sha256(new_text.encode("utf-8")).hexdigest()

    def digest(path: Path) -> str:
        return new_digest if path.resolve() == edited.resolve() else execute_notebooks.file_digest(path)

    return {name for name, (nb, path) in notebooks.items()
            if set(execute_notebooks.check(nb, path, digest)) - set(execute_notebooks.check(nb, path))}


def committed() -> dict[str, tuple[nbformat.NotebookNode, Path]]:
    return {p.stem: (nbformat.read(p, as_version=4), p) for p in execute_notebooks.chapters()}


def test_a_docstring_edit_of_the_loop_stales_only_the_chapters_that_train():
    stale = made_stale(committed(), LOOP, with_docstring_edit(LOOP.read_text(encoding="utf-8")))
    training = set(import_closure.training_chapters())
    assert stale, "no chapter's stamp covers mlm_lib/loop.py, yet chapters train with it"
    assert stale <= training, (f"chapters that do not train are stamped against mlm_lib/loop.py: "
                               f"{sorted(stale - training)}; they import training code they do not use")
    assert "10_pretraining" in stale  # the chapter that calls train() itself


def test_the_count_sees_a_chapter_that_imports_training_code_it_does_not_use():
    """Plant loop.py in the stamp of a chapter that only loads the book's model: the edit now
    stales it, and the code says it does not train."""
    notebooks = committed()
    nb, path = notebooks["01_words_and_symbols"]
    planted = nbformat.reads(nbformat.writes(nb), as_version=4)
    stamp = planted.metadata[execute_notebooks.STAMP_KEY]["executed"]["library_sha256"]
    stamp["mlm_lib/loop.py"] = execute_notebooks.file_digest(LOOP)
    edit = with_docstring_edit(LOOP.read_text(encoding="utf-8"))
    assert "01_words_and_symbols" in made_stale({"01_words_and_symbols": (planted, path)}, LOOP, edit)
    assert "01_words_and_symbols" not in import_closure.training_chapters([path])


def test_which_chapters_train_is_read_from_the_calls():
    modules = import_closure.library_modules()
    trains = import_closure.training_names(import_closure.name_graph(modules))
    calls = lambda source: import_closure.training_calls(source, modules, trains)  # noqa: E731
    assert calls("from mlm_lib.book.chapter_runs import train_micro\nrun = train_micro(seed=0)\n")
    assert calls("from mlm_lib import train\ntrain.train(m, t, x, c)\n") == {("mlm_lib.train", "train")}
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
