"""What ships inside the package, under ``mlm_lib/assets``: a small pretrained BERT and its recipes.

- ``book-model/``: the book's model (2 layers x 128, masked LM only, fp16 safetensors, 3 MB) with
  the ``vocab.txt`` it was trained with (8,000 lowercase WordPiece pieces of the Wikipedia
  excerpt). It is what ``python -m mlm_lib fill-mask`` and ``eval`` load when given no ``--model``,
  and the vocabulary ``train`` uses when given no ``--vocab``.
- ``recipes/<name>.json``: the training options that built it, one file per stage (``book-32``,
  then ``book``), read by ``train --config`` and named by ``train --preset``.

Every file is found through :func:`asset`, so that a wheel, an sdist and the repository agree on
where they are. Reading them needs neither the training code nor the book's machinery.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlm_lib.tokenizer import WordPieceTokenizer

ASSETS = Path(__file__).resolve().parent / "assets"
MODEL_DIR_NAME = "book-model"
RECIPES = ("book-32", "book")  # the two stages of the shipped model, in the order they run


def asset(*parts: str) -> Path:
    """The path of a file or folder shipped under ``mlm_lib/assets`` (it may not exist)."""
    return ASSETS.joinpath(*parts)


def default_model_dir() -> Path:
    """The checkpoint folder of the shipped model."""
    return asset(MODEL_DIR_NAME)


def default_vocab() -> Path:
    """The shipped vocabulary: the ``vocab.txt`` saved with the shipped model (one file, so that
    the model and the tokenizer can never disagree)."""
    return default_model_dir() / "vocab.txt"


def default_tokenizer() -> WordPieceTokenizer:
    """The tokenizer of the shipped vocabulary (lowercasing, as it was trained)."""
    return WordPieceTokenizer.from_vocab_file(default_vocab(), do_lower_case=True)


def recipe_file(name: str) -> Path:
    """The JSON file of a shipped recipe (``train --config`` reads it)."""
    if name not in RECIPES:
        raise ValueError(f"no shipped recipe {name!r}; the recipes are {', '.join(RECIPES)}")
    return asset("recipes", f"{name}.json")


def recipe(name: str) -> dict[str, Any]:
    """A shipped recipe as the dict of training options it holds (a fresh copy each call)."""
    return json.loads(recipe_file(name).read_text(encoding="utf-8"))
