"""Chapter 6's experiment: what the corruption recipe and the mask rate change.

Each arm continues the book's model for CONTINUE's steps with one :class:`~mlm_lib.masking.Corruption`
and is scored on three kinds of held-out test (:data:`TESTS`): real blanks, blanks whose token is
shown, and blanks holding a wrong token. ``python -m mlm_lib.book.experiments corruption`` runs
every arm over several seeds; the chapter runs seed 0 live.
"""

from __future__ import annotations

from mlm_lib.book.chapter_runs import continue_book_model, score
from mlm_lib.masking import BERT_CORRUPTION, EVAL_CORRUPTION, Corruption

TESTS = {"mask": EVAL_CORRUPTION,                                   # real blanks
         "untouched": Corruption(mask=0.0, random=0.0, keep=1.0),  # report the token shown
         "random": Corruption(mask=0.0, random=1.0, keep=0.0)}     # repair a wrong token
CORRUPTION_ARMS = {"80/10/10": BERT_CORRUPTION, "100% [MASK]": EVAL_CORRUPTION,
        "rate 0.30": Corruption(select=0.3), "rate 0.50": Corruption(select=0.5),
        "rate 0.80": Corruption(select=0.8)}


def corruption_metrics(arm: str, seed: int) -> dict[str, float]:
    """Accuracy on each of :data:`TESTS` (``mask_acc``...) and the loss on real blanks."""
    run = continue_book_model(CORRUPTION_ARMS[arm], seed)
    metrics = {f"{name}_acc": score(run.model, run.data, test)["mlm_acc"]
               for name, test in TESTS.items()}
    return {**metrics, "mlm_loss": score(run.model, run.data)["mlm_loss"]}
