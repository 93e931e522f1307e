"""Models that chapters train live, kept so that the book's site runs the model its prose describes.

Chapter 11 continues the book's model on sentence pairs with NSP, chapter 12 fine-tunes two
classifiers; a page without a kernel cannot train them. Each chapter saves its seed-0 models here
(:func:`save_chapter_model`), in float16 as the book's model is stored (3 MB each), and
``mlm_lib.book.browser_model`` exports them for the site with the book's model. The chapter's own
widget reads the saved copy back (:func:`load_chapter_model`), so the notebook and the page ask the
same weights; the chapter prints how far float16 moved its answers.

These folders are outputs of the chapters, not inputs: executing a chapter writes them again (the
same bytes on the same arithmetic), and they are not part of any chapter's execution stamp. With
``MLM_BOOK_CHAPTER_MODELS`` set to a folder, chapters save there and read back from there instead:
``make test-notebooks`` does, so that a test run, whose threads and CPU may round differently from
the run that made the committed files, never rewrites them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from mlm_lib.book.book_model import ASSETS
from mlm_lib.checkpoint import load_checkpoint, save_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.finetune import BertClassifier
from mlm_lib.inference import load_model
from mlm_lib.model import BertForPreTraining, BertModel

# Where chapters save their models: the package's assets, or the folder the environment names.
CHAPTER_MODELS_ENV = "MLM_BOOK_CHAPTER_MODELS"
CHAPTER_MODELS = Path(os.environ.get(CHAPTER_MODELS_ENV) or ASSETS / "chapter-models")
# name -> what the chapter trained; the site's controls name the same files
CHAPTER_MODEL_NAMES = {
    "nsp": "chapter 11: the book's model continued 150 steps on pairs with MLM + NSP, seed 0",
    "classifier-pretrained": "chapter 12: the article classifier on the pretrained encoder, seed 0",
    "classifier-random": "chapter 12: the article classifier on a random encoder, seed 0",
}
STORED_DTYPE = torch.float16
CLASSIFIER = "classifier"


def chapter_model_dir(name: str) -> Path:
    if name not in CHAPTER_MODEL_NAMES:
        raise ValueError(f"unknown chapter model {name!r}; choose one of {sorted(CHAPTER_MODEL_NAMES)}")
    return CHAPTER_MODELS / name


def save_chapter_model(name: str, model: BertForPreTraining | BertClassifier,
                       label_names: list[str] | None = None) -> Path:
    """Store ``model`` (a pretraining model, or a classifier with its ``label_names``) as ``name``."""
    folder = chapter_model_dir(name)
    extra: dict[str, Any] = {"about": CHAPTER_MODEL_NAMES[name]}
    if isinstance(model, BertClassifier):
        if label_names is None or len(label_names) != model.num_labels:
            raise ValueError(f"a classifier with {model.num_labels} labels needs as many label_names, "
                             f"got {label_names!r}")
        extra.update(kind=CLASSIFIER, label_names=list(label_names))
    elif not isinstance(model, BertForPreTraining):
        raise ValueError(f"expected a BertForPreTraining or a BertClassifier, got {type(model).__name__}")
    return save_checkpoint(folder, model, model.config.to_dict(), extra=extra, dtype=STORED_DTYPE)


def load_chapter_model(name: str) -> BertForPreTraining | BertClassifier:
    """The saved model in eval mode, in float32; a classifier carries ``label_names``."""
    folder = chapter_model_dir(name)
    if not (folder / "checkpoint.json").exists():
        raise FileNotFoundError(f"{folder} is missing: execute the chapter that trains {name!r} "
                                f"({CHAPTER_MODEL_NAMES[name]})")
    ck = load_checkpoint(folder, weights_only=True)
    if ck.extra.get("kind") != CLASSIFIER:
        return load_model(folder)
    labels = ck.extra["label_names"]
    model = BertClassifier(BertModel(BertConfig.from_dict(ck.config)), num_labels=len(labels))
    model.load_state_dict({k: v.float() for k, v in ck.state_dict.items()})
    model.label_names = labels
    return model.eval()
