"""Chapter 11's experiment: does adding NSP (or ALBERT's SOP) to MLM change what the encoder learns?

Each arm continues the book's model for CONTINUE's steps on sentence pairs, with MLM alone or
with a pair head's loss added (:data:`NSP_ARMS`), and is scored by :func:`pair_metrics`: held-out
blanks, the pair head on held-out pairs of both tasks, and which of chapter 11's four kinds of B
it calls IsNext. ``python -m mlm_lib.book.experiments nsp`` runs them over several seeds.
"""

from __future__ import annotations

import torch

from mlm_lib.batches import masked_batches
from mlm_lib.book.chapter_runs import B_KINDS, answered_is_next, chapter_data, continue_book_model
from mlm_lib.corpus import load_wikipedia, train_valid_split
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.pretraining import SPLIT_SEED, VALID_FRACTION
from mlm_lib.train import evaluate_mlm

# The pair task trained with MLM (None: MLM alone, on the NSP pairs).
NSP_ARMS = {"MLM + NSP": "nsp", "MLM alone": None, "MLM + SOP": "sop"}


def is_next_metric(kind: str) -> str:
    """The results file's name for the share of B of ``kind`` answered IsNext."""
    return "is_next_" + kind.replace(",", "").replace(" ", "_")


def pair_metrics(model: torch.nn.Module) -> dict[str, float]:
    """Held-out blanks of the NSP pairs (the same for every arm); the pair head's accuracy on
    held-out pairs of both tasks (``nsp_acc``, ``sop_acc``; "IsNext" read as "in order" for
    SOP); and the share of each of chapter 11's four kinds of B it answers IsNext."""
    scores = {}
    for task in ("nsp", "sop"):
        data = chapter_data(model.config.max_position_embeddings, nsp=True, pair_task=task)
        scores[task] = evaluate_mlm(model, masked_batches(data.valid_examples, data.tokenizer),
                                    nsp=True)
    _, held_docs = train_valid_split(load_wikipedia(), valid_fraction=VALID_FRACTION, seed=SPLIT_SEED)
    kinds = answered_is_next(model, data.tokenizer, held_docs)
    return {"mlm_acc": scores["nsp"]["mlm_acc"], "mlm_loss": scores["nsp"]["mlm_loss"],
            "nsp_acc": scores["nsp"]["nsp_acc"], "sop_acc": scores["sop"]["nsp_acc"],
            **{is_next_metric(k): kinds[k] for k in B_KINDS}}


def nsp_arm_metrics(arm: str, seed: int) -> dict[str, float]:
    task = NSP_ARMS[arm]
    run = continue_book_model(BERT_CORRUPTION, seed, pairs=True, nsp=task is not None,
                              pair_task=task or "nsp")
    return pair_metrics(run.model)
