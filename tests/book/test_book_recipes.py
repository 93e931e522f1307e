"""The book names the library's shipped recipes (``mlm_lib/assets/recipes``, checked against their
former Python definitions in tests/lib/test_recipes.py): ``BOOK_RECIPE_32`` and ``BOOK_RECIPE``
(``mlm_lib.book.book_model``) are them, and ``book_train_config`` (``mlm_lib.book.recipes``) is the
TrainConfig that the CLI's ``--preset book`` gives."""

from __future__ import annotations

from mlm_lib.__main__ import build_parser, train_config_from_args
from mlm_lib.book.book_model import BOOK_MODEL_DIR, BOOK_RECIPE, BOOK_RECIPE_32
from mlm_lib.book.recipes import book_train_config
from mlm_lib.checkpoint import load_checkpoint
from mlm_lib.packaged import default_model_dir, recipe
from mlm_lib.train import TrainConfig


def test_the_book_names_the_same_recipes():
    assert TrainConfig(**BOOK_RECIPE_32) == TrainConfig.from_dict(recipe("book-32"))
    assert book_train_config() == TrainConfig.from_dict(recipe("book")) == TrainConfig(**BOOK_RECIPE)
    assert book_train_config(max_steps=3).max_steps == 3
    assert BOOK_MODEL_DIR == default_model_dir()
    stored = load_checkpoint(BOOK_MODEL_DIR, weights_only=True).extra["train_config"]
    assert TrainConfig.from_dict(stored) == book_train_config(progress=stored["progress"])


def test_the_cli_book_preset_is_book_train_config():
    # formerly the end of tests/lib/test_cli.py's test_config_file_then_flags
    book = train_config_from_args(build_parser().parse_args(["train", "--out", "x", "--preset", "book"]))
    assert book == book_train_config()
