"""What every test shares: the torch thread count, the shipped tokenizer, and the order in which
the longest test files start.

The browser tests' fixtures live in ``site/conftest.py`` and their helpers in ``site/browser.py``;
the shared helper modules (``toy_data``, ``padded``, ``live_reference``) sit beside this file,
importable by name (``pyproject.toml``'s ``pythonpath``). No test module imports a conftest.
"""

from __future__ import annotations

import os

import pytest
import torch

from mlm_lib.packaged import default_tokenizer
from mlm_lib.tokenizer import WordPieceTokenizer

# One thread per core of the 2-core reference machine, whatever this machine has: the timed
# checks (a model that loads in seconds, say) are calibrated there. Under pytest-xdist (`make
# test-lib`, two workers) one thread per worker: two threads each would spin against each other.
TORCH_THREADS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2

# The files whose tests take longest (fresh virtual environments, a results file reproduced, the
# tokenizer over the whole corpus, every chapter opened in JupyterLab, Vega under Node.js, two
# processes), longest first: with two workers they run beside the others instead of last, where
# one worker would finish them alone.
LONG_FIRST = ("test_install.py", "test_results.py", "test_tokenizer.py", "test_jupyterlab.py",
              "test_live.py", "test_ddp.py")

torch.set_num_threads(TORCH_THREADS)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist hands out the tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first, the rest in collection order (a stable sort: ``site/conftest.py``
    keeps a page's browser checks in the order it gives them)."""
    rest = len(LONG_FIRST)
    items.sort(key=lambda item: LONG_FIRST.index(item.path.name) if item.path.name in LONG_FIRST
               else rest)


@pytest.fixture(scope="session")
def tok() -> WordPieceTokenizer:
    """The library's shipped WordPiece tokenizer (the book's 8,000 pieces), loaded once. A library
    function, not ``mlm_lib.book``'s: tests/lib uses it (tests/lib/test_layout.py)."""
    return default_tokenizer()
