"""The models chapters 11 and 12 save for the book's site (mlm_lib.book.chapter_models)."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.book import chapter_models
from mlm_lib.book.chapter_models import CHAPTER_MODEL_NAMES, load_chapter_model, save_chapter_model
from mlm_lib.config import BertConfig
from mlm_lib.finetune import BertClassifier
from mlm_lib.model import BertForPreTraining
from mlm_lib.numerics import max_diff

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)
# float16 keeps 11 significant bits: each stored weight moves by at most 2^-11 of itself, and the
# label probabilities of this one-layer model by far less than this bound.
FP16_PROB_TOL = 1e-2


@pytest.fixture
def into_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(chapter_models, "CHAPTER_MODELS", tmp_path)
    return tmp_path


def test_a_classifier_comes_back_with_its_labels_and_its_answers(into_tmp):
    model = BertClassifier.from_scratch(CONFIG, num_labels=3, seed=1).eval()
    folder = save_chapter_model("classifier-random", model, ["a", "b", "c"])
    assert folder == into_tmp / "classifier-random"
    back = load_chapter_model("classifier-random")
    assert isinstance(back, BertClassifier) and back.label_names == ["a", "b", "c"]
    ids = torch.randint(5, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = max_diff(back(ids).softmax(-1), model(ids).softmax(-1))
    assert 0 < diff <= FP16_PROB_TOL, "stored in float16: close, and not a copy of the float32 weights"


def test_a_pretraining_model_comes_back_as_one(into_tmp):
    save_chapter_model("nsp", BertForPreTraining(CONFIG, seed=0))
    assert isinstance(load_chapter_model("nsp"), BertForPreTraining)


@pytest.mark.parametrize("labels", [None, ["a", "b"]], ids=["no labels", "too few labels"])
def test_a_classifier_needs_one_name_per_label(into_tmp, labels):
    with pytest.raises(ValueError, match="label_names"):
        save_chapter_model("classifier-random", BertClassifier.from_scratch(CONFIG, 3), labels)


def test_unknown_and_missing_models_are_named(into_tmp):
    with pytest.raises(ValueError, match="unknown chapter model 'ner'"):
        save_chapter_model("ner", BertForPreTraining(CONFIG))
    with pytest.raises(FileNotFoundError, match="execute the chapter"):
        load_chapter_model("nsp")


def test_the_committed_models_are_the_chapters(tok):
    for name in CHAPTER_MODEL_NAMES:
        model = load_chapter_model(name)
        assert model.config.vocab_size == tok.vocab_size, name
    assert load_chapter_model("classifier-pretrained").label_names == [
        "American Revolutionary War", "Abraham Lincoln", "Albania", "Amphibian"]
