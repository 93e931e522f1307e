"""Chapter 12's domain adaptation: the book's model continued on Python's own documentation.

The book's model read Wikipedia. Continuing its masked-LM training on text of another domain
(Gururangan et al. 2020 call it domain-adaptive pretraining) should lower its loss there, and may
cost it some of what it knew. The other domain is ``pydoc_data.topics``, the documentation every
Python carries (``mlm_lib.corpus.load_python_docs``), frozen here as the copy of Python 3.11.7
(``PYTHON_DOCS``) so that the results do not move with the Python that runs them:

    python -m mlm_lib.book.domain   # rewrite the frozen copy from this Python's pydoc_data

The experiment's two arms (:data:`DOMAIN_ARMS`) are the book's model as it is and continued
for CONTINUE's steps on the docs (:func:`continue_on_python_docs`), each scored on held-out text of
both domains (:func:`domain_metrics`): ``python -m mlm_lib.book.experiments domain``.
"""

from __future__ import annotations

import functools
import gzip
import json
import sys
from pathlib import Path

import torch

from mlm_lib.book.book_model import ASSETS, book_model, book_tokenizer
from mlm_lib.book.chapter_runs import CONTINUE, MicroRun, chapter_data, score, train_micro
from mlm_lib.corpus import Document, load_python_docs
from mlm_lib.masking import BERT_CORRUPTION
from mlm_lib.pretraining import PreparedData, prepare_data

PYTHON_DOCS = ASSETS / "python-docs-topics.json.gz"
# A fifth of the 79 topics held out: whole topics, so no held-out sentence has a neighbour in training.
DOMAIN_VALID_FRACTION = 0.2
DOMAIN_ARMS = ("book model", "continued on Python's docs")


def python_docs() -> list[Document]:
    """The frozen copy of Python 3.11.7's ``pydoc_data.topics`` as documents, one per topic."""
    return load_python_docs(json.loads(gzip.decompress(PYTHON_DOCS.read_bytes())))


@functools.lru_cache(maxsize=2)
def domain_data(max_seq_length: int = 64) -> PreparedData:
    """Python's documentation cut into examples with the book's tokenizer (cached per process)."""
    return prepare_data(python_docs(), book_tokenizer(), max_seq_length=max_seq_length,
                        short_seq_prob=0.0, nsp=False, seed=0, valid_fraction=DOMAIN_VALID_FRACTION)


def continue_on_python_docs(seed: int) -> MicroRun:
    """The book's model continued for CONTINUE's steps, BERT's corruption, on Python's docs."""
    return train_micro(BERT_CORRUPTION, seed=seed, data=domain_data(), start_from=book_model(),
                       **CONTINUE)


def domain_metrics(model: torch.nn.Module) -> dict[str, float]:
    """Held-out blanks of both domains: Python's docs (the new one) and Wikipedia (the old one)."""
    python, wiki = score(model, domain_data()), score(model, chapter_data())
    return {"python_loss": python["mlm_loss"], "python_acc": python["mlm_acc"],
            "wiki_loss": wiki["mlm_loss"], "wiki_acc": wiki["mlm_acc"]}


def domain_arm_metrics(arm: str, seed: int) -> dict[str, float]:
    model = book_model() if arm == DOMAIN_ARMS[0] else continue_on_python_docs(seed).model
    return domain_metrics(model)


def write_python_docs(path: Path = PYTHON_DOCS) -> Path:
    """Freeze this Python's ``pydoc_data.topics`` (the same bytes for the same Python)."""
    from pydoc_data.topics import topics

    raw = json.dumps(topics, sort_keys=True, ensure_ascii=False).encode("utf-8")
    path.write_bytes(gzip.compress(raw, mtime=0))
    return path


if __name__ == "__main__":
    print(f"wrote {write_python_docs()} from Python {sys.version.split()[0]}")
