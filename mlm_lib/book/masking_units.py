"""Chapter 9's experiment: M chosen per piece, per whole word, or in SpanBERT's spans.

Each arm continues the book's model (which was trained per piece) for CONTINUE's steps and is
scored on held-out blanks of both kinds, single pieces and whole words (:func:`masking_metrics`).
``python -m mlm_lib.book.experiments masking`` runs them over several seeds.
"""

from __future__ import annotations

import torch

from mlm_lib.book.book_model import book_model
from mlm_lib.book.chapter_runs import chapter_data, continue_book_model, score
from mlm_lib.masking import BERT_CORRUPTION, SPANBERT_CORRUPTION, WHOLE_WORD_CORRUPTION, Corruption

MASKING_ARMS = {"book model": None, "per piece": BERT_CORRUPTION,
        "whole word": WHOLE_WORD_CORRUPTION, "spans (SpanBERT)": SPANBERT_CORRUPTION}
WORD_BLANKS = Corruption(mask=1.0, random=0.0, keep=0.0, whole_word=True)


def masking_metrics(model: torch.nn.Module) -> dict[str, float]:
    """Held-out blanks chosen per piece and per whole word (all [MASK]), the same for every model."""
    data = chapter_data()
    piece, word = score(model, data), score(model, data, WORD_BLANKS)
    return {"piece_acc": piece["mlm_acc"], "piece_loss": piece["mlm_loss"],
            "word_acc": word["mlm_acc"], "word_loss": word["mlm_loss"]}


def masking_arm_metrics(arm: str, seed: int) -> dict[str, float]:
    recipe = MASKING_ARMS[arm]
    model = book_model() if recipe is None else continue_book_model(recipe, seed).model
    return masking_metrics(model)
