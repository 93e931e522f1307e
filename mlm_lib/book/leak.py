"""Chapter 7's experiment: does a model that sees the answer at its blanks learn to infer it?

One arm keeps the chosen token in place (the answer leaks), the other shows [MASK]; both continue
the book's model for CONTINUE's steps. ``python -m mlm_lib.book.experiments leak`` runs them over
several seeds; the chapter runs seed 0 live.
"""

from __future__ import annotations

from mlm_lib.book.chapter_runs import continue_book_model, score
from mlm_lib.book.corruption import TESTS
from mlm_lib.masking import EVAL_CORRUPTION

LEAK_ARMS = {"token kept (leak)": TESTS["untouched"], "[MASK]": EVAL_CORRUPTION}


def leak_metrics(arm: str, seed: int) -> dict[str, float]:
    """The last training loss, and accuracy and loss on real held-out blanks."""
    run = continue_book_model(LEAK_ARMS[arm], seed)
    held_out = score(run.model, run.data)
    return {"final_train_loss": run.train_curve()[1][-1], "mlm_acc": held_out["mlm_acc"],
            "mlm_loss": held_out["mlm_loss"]}
