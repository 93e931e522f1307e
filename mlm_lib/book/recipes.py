"""The book's recipes as training configs, for the code and the chapters that train.

The recipes themselves are data (``mlm_lib/assets/recipes/*.json``, ``BOOK_RECIPE`` and
``BOOK_RECIPE_32`` in :mod:`mlm_lib.book.book_model`), which a chapter that only loads the book's
model can read without importing the training code; this module is where they meet it.
"""

from __future__ import annotations

from typing import Any

from mlm_lib.book.book_model import BOOK_RECIPE
from mlm_lib.train import TrainConfig


def book_train_config(**overrides: Any) -> TrainConfig:
    """The :class:`~mlm_lib.train.TrainConfig` of the book's model (its last stage)."""
    return TrainConfig.from_dict({**BOOK_RECIPE, **overrides})
