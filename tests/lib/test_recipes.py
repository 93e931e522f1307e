"""The book's recipes are JSON files shipped with the library (``mlm_lib/assets/recipes``): the CLI's
presets ``book-32`` and ``book`` resolve to them, ``train --config`` reads them, and they give the
very TrainConfigs the shipped model was trained with (the recipes' former Python definitions,
copied here, and the config stored in the model's checkpoint). That ``mlm_lib.book`` names the
same recipes is tests/book/test_book_recipes.py's."""

from __future__ import annotations

import json

import pytest

from mlm_lib.__main__ import build_parser, train_config_from_args
from mlm_lib.checkpoint import load_checkpoint
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.packaged import RECIPES, default_model_dir, recipe, recipe_file
from mlm_lib.train import TrainConfig

# mlm_lib/book/book_model.py's recipes as Python literals, before they became JSON files.
FORMER_BOOK_RECIPE_32 = dict(
    preset="tiny",
    model={"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
           "intermediate_size": 512, "hidden_dropout_prob": 0.0,
           "attention_probs_dropout_prob": 0.0, "initializer_range": 0.1},
    max_seq_length=32, short_seq_prob=0.0, nsp=False, position_init="sinusoidal",
    corruption=BERT_CORRUPTION,
    batch_size=128, lr=3e-3, warmup_steps=30, max_steps=6000, unigram_bias_init=True,
    weight_decay=0.01, clip_grad_norm=1.0, log_every=100, eval_every=0, save_every=1000, seed=0,
    device="cpu", amp=False, threads=2,
)
FORMER_BOOK_RECIPE = dict(
    FORMER_BOOK_RECIPE_32, max_seq_length=64, batch_size=64, lr=1e-3, warmup_steps=30, max_steps=1500,
    unigram_bias_init=False, save_every=500, init_from="runs/book-32/step-00006000",
)
FORMER = {"book-32": FORMER_BOOK_RECIPE_32, "book": FORMER_BOOK_RECIPE}


def cli_config(*args: str) -> TrainConfig:
    return train_config_from_args(build_parser().parse_args(["train", "--out", "x", *args]))


@pytest.mark.parametrize("name", RECIPES)
def test_the_json_recipes_give_the_former_train_configs(name):
    expected = TrainConfig(**FORMER[name])
    assert TrainConfig.from_dict(recipe(name)) == expected
    assert cli_config("--preset", name) == expected
    assert cli_config("--config", str(recipe_file(name))) == expected
    assert cli_config("--preset", "mini", "--config", str(recipe_file(name))) == expected


def test_the_shipped_model_was_trained_with_its_recipe():
    stored = load_checkpoint(default_model_dir(), weights_only=True).extra["train_config"]
    assert TrainConfig.from_dict(stored) == TrainConfig(**{**FORMER_BOOK_RECIPE, "progress": stored["progress"]})


def test_a_recipe_is_a_fresh_copy_and_a_wrong_name_is_named():
    recipe("book")["model"]["hidden_size"] = 1
    assert recipe("book")["model"]["hidden_size"] == 128
    with pytest.raises(ValueError, match="book-32, book"):
        recipe("bert-base")
    assert json.loads(recipe_file("book").read_text())["init_from"] == "runs/book-32/step-00006000"
