"""Chapter 15's question: does ELECTRA's discriminator make a better encoder to fine-tune than
MLM does, at the same training budget?

Both arms continue the book's model on the articles it read, with the same steps, batches,
learning rate and warm-up (:mod:`mlm_lib.book.replaced_tokens`' recipe): one with MLM (BERT's
corruption, the loss on M), the other as ELECTRA's discriminator, detecting the book's model's
samples at every position. The two encoders then go through the same fine-tuning as the book's
encoder: chapter 12's classifier (which article, read and unread) and chapter 13's three heads
(unread articles). Neither continuation trains the pooler, which the classifiers read; it is the
book's model's, untrained by MLM, in both arms.
"""

from __future__ import annotations

import copy
import functools

from mlm_lib.book import replaced_tokens, which_article
from mlm_lib.book.book_model import book_model
from mlm_lib.book.chapter_runs import chapter_data, train_micro
from mlm_lib.book.task_shapes import TASKS, task_run
from mlm_lib.finetune import BertClassifier
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.model import BertForPreTraining

ARMS = ("MLM-continued encoder", "ELECTRA-continued encoder")
BUDGET = {"steps": replaced_tokens.STEPS, "batch_size": replaced_tokens.BATCH_SIZE,
          "lr": replaced_tokens.LR, "warmup_steps": replaced_tokens.WARMUP_STEPS}


@functools.lru_cache(maxsize=2)
def continued_encoder(arm: str, seed: int) -> BertForPreTraining:
    """The book's model continued BUDGET's steps as ``arm`` says. The ELECTRA arm's discriminator
    encoder is put back into a copy of the book's model, whose heads the fine-tuning drops."""
    if arm == ARMS[0]:
        return train_micro(BERT_CORRUPTION, seed=seed, data=chapter_data(replaced_tokens.SEQ_LENGTH),
                           start_from=book_model(), **BUDGET).model.eval()
    if arm == ARMS[1]:
        detector = replaced_tokens.train_discriminator("book model", replaced_tokens.STARTS[0],
                                                       seed).detector
        model = copy.deepcopy(book_model())
        model.bert.load_state_dict(detector.bert.state_dict())
        return model.eval()
    raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")


def transfer_metrics(arm: str, seed: int) -> dict[str, float]:
    """``arm``'s encoder fine-tuned on chapter 12's task (``read_acc``, ``unread_acc``) and on
    chapter 13's three (``pair_accuracy``, ``tagging_f1``, ``span_exact_match``, ...), with
    ``seed`` for the continuation, the new weights and the data order."""
    encoder = continued_encoder(arm, seed)
    metrics = {}
    for name, (train, test) in (("read", which_article.read_task()),
                                ("unread", which_article.unread_task())):
        model = BertClassifier.from_pretraining(encoder, len(train.label_names), seed=seed)
        metrics[f"{name}_acc"] = which_article.final_accuracy(model, seed, train, test)
    for task, shape in TASKS.items():
        scores = task_run(task, encoder, seed)[1]
        metrics.update({f"{task}_{m}": scores[m] for m in shape.measures})
    return metrics
