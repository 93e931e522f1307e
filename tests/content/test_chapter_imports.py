"""What a chapter imports decides what stales it (``scripts/execute_notebooks.py``), so no chapter
imports the registry of every experiment (``mlm_lib.book.experiments``, which imports a dozen book
modules): a chapter takes ``reproduces`` from ``mlm_lib.book.results`` and its arms and metrics
from its own experiment's module (``corruption``, ``leak``, ``masking_units``, ``nsp``, ``domain``,
``generation``, ``which_article``, ``task_shapes``, ``transfer``). Read from the code: the modules
a chapter's imports reach, closed over the library's own imports (``scripts/import_closure.py``).
"""

from __future__ import annotations

from pathlib import Path

import import_closure
import pytest

REGISTRY = "mlm_lib/book/experiments.py"
MODULES = import_closure.library_modules()


def reaches_registry(source: str) -> bool:
    """Whether code importing what ``source`` imports runs the experiment registry."""
    names = import_closure.closure(import_closure.imported_names(source), MODULES)
    return any(MODULES[n].as_posix().endswith(REGISTRY) for n in names)


@pytest.mark.parametrize("path", import_closure.CHAPTERS, ids=lambda p: p.stem)
def test_no_chapter_reaches_the_experiment_registry(path: Path):
    assert not reaches_registry(import_closure.chapter_source(path)), (
        f"{path.name} imports {REGISTRY}, directly or through a module it imports: take "
        "`reproduces` from mlm_lib.book.results and the arms from the chapter's own module")


def test_the_check_sees_a_planted_import():
    assert reaches_registry("from mlm_lib.book.experiments import reproduces\n")
    assert reaches_registry("import mlm_lib.book.experiments as e\n")
    assert not reaches_registry("from mlm_lib.book.results import reproduces\n")
    assert not reaches_registry("from mlm_lib.book.nsp import NSP_ARMS, pair_metrics\n")
