"""Three toy 'articles' whose sentences each name their subject, so that "which article is this
sentence from?" is learnable in a few steps: the library's fine-tuning tests
(tests/lib/test_finetune.py) build the task with :func:`toy_task`, the library alone; the book's
``article_task`` (tests/book/test_finetune_book.py) draws the same one."""

from __future__ import annotations

import random

from mlm_lib.corpus import Document
from mlm_lib.finetune import LabelledSet


def toy_documents() -> list[Document]:
    """Three 'articles' whose sentences each name their subject, so the task is learnable."""
    subjects = {"Rivers": "river", "Music": "music", "Stars": "star"}
    docs = []
    for title, word in subjects.items():
        sents = [f"the {word} number {i} is described in this long sentence" for i in range(40)]
        sents += ["short one", "the river of music and stars appears in every article here"]
        docs.append(Document(title, sents))
    return docs


def toy_task(per_article: int = 30, n_test: int = 9, seed: int = 0) -> tuple[LabelledSet, LabelledSet]:
    """The toy articles as a balanced task, built with the library alone: from each article (by
    title), ``per_article`` of its distinct sentences of at least six words, the first ``n_test``
    drawn held out, the training set shuffled: the draws of the book's ``article_task`` with the
    same seed, 30 per article and a test fraction of 0.3 (tests/book/test_finetune_book.py)."""
    rng = random.Random(seed)
    docs = sorted(toy_documents(), key=lambda d: d.title)
    train: list[tuple[str, int]] = []
    test: list[tuple[str, int]] = []
    for label, d in enumerate(docs):
        pool = sorted({s for s in d.sentences if len(s.split()) >= 6})
        for k, s in enumerate(rng.sample(pool, per_article)):
            (test if k < n_test else train).append((s, label))
    rng.shuffle(train)
    names = [d.title for d in docs]
    return (LabelledSet([s for s, _ in train], [y for _, y in train], names),
            LabelledSet([s for s, _ in test], [y for _, y in test], names))
