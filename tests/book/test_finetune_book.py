"""The book's fine-tuning task (``mlm_lib.book.chapter_runs.article_task``): "which article is this
sentence from?", balanced, disjoint and seeded. The library's fine-tuning is tests/lib/test_finetune.py's."""

from __future__ import annotations

import pytest

from mlm_lib.book.chapter_runs import article_task
from toy_articles import toy_documents, toy_task


# ---------------------------------------------------------------- task

def test_article_task_is_balanced_disjoint_and_seeded():
    docs = toy_documents()
    train, test = article_task(docs, num_articles=3, per_article=30, test_fraction=0.2, seed=3)
    assert train.label_names == test.label_names
    assert sorted(train.label_names) == ["Music", "Rivers", "Stars"]
    assert train.counts() == [24, 24, 24] and test.counts() == [6, 6, 6]
    assert not set(train.texts) & set(test.texts)
    for text, y in zip(train.texts + test.texts, train.labels + test.labels):
        assert text in next(d for d in docs if d.title == train.label_names[y]).sentences
        assert len(text.split()) >= 6  # "short one" is never drawn
    again = article_task(docs, num_articles=3, per_article=30, test_fraction=0.2, seed=3)
    assert again[0].texts == train.texts and again[1].labels == test.labels
    other = article_task(docs, num_articles=3, per_article=30, test_fraction=0.2, seed=4)
    assert other[0].texts != train.texts


def test_article_task_by_title_and_errors():
    docs = toy_documents()
    train, test = article_task(docs, titles=["Stars", "Rivers"], per_article=10)
    assert train.label_names == ["Stars", "Rivers"]
    assert set(train.labels) == {0, 1}
    with pytest.raises(ValueError, match="no article titled"):
        article_task(docs, titles=["Stars", "Oceans"])
    with pytest.raises(ValueError, match="too many"):
        article_task(docs, num_articles=2, per_article=500)
    with pytest.raises(ValueError, match="num_articles"):
        article_task(docs, num_articles=1)
    with pytest.raises(ValueError, match="test_fraction"):
        article_task(docs, test_fraction=1.0)


def test_article_task_draws_the_library_tests_toy_task():
    """tests/lib/test_finetune.py trains on toy_task (the library alone): the book's task, drawn the same way."""
    for seed in (0, 1):
        ours, book = toy_task(seed=seed), article_task(toy_documents(), num_articles=3, per_article=30, seed=seed)
        for a, b in zip(ours, book):
            assert (a.texts, a.labels, a.label_names) == (b.texts, b.labels, b.label_names)
