"""The development split that chooses (mlm_lib.book.dev_choice) and its results file."""

from __future__ import annotations

import pytest

from mlm_lib.book import dev_choice
from mlm_lib.book.dev_choice import ARMS, MAX_EPOCHS, RATES, TASKS, dev_split, split_arm
from mlm_lib.book.results import load_results
from mlm_lib.book.task_shapes import BERT_FINETUNE_LR, FINETUNE, QuestionSet
from mlm_lib.finetune import LabelledSet
from mlm_lib.tasks import TaggedSet


def test_a_fifth_is_held_out_and_nothing_is_in_both():
    pairs = LabelledSet([f"a{i}" for i in range(50)], [i % 2 for i in range(50)], ["x", "y"],
                        pairs=[f"b{i}" for i in range(50)])
    train, dev = dev_split(pairs)
    assert (len(train), len(dev)) == (40, 10)
    assert set(train.texts).isdisjoint(dev.texts)
    assert all(b == "b" + a[1:] for a, b in zip(dev.texts, dev.pairs))  # pairs stay together
    assert dev_split(pairs)[1].texts == dev.texts  # one split for every run seed

    tagged = TaggedSet([["w", str(i)] for i in range(10)], [[0, 1]] * 10, ["O", "B-X"])
    assert [len(s) for s in dev_split(tagged)] == [8, 2]

    # questions are held out by paragraph: no context is in both, however many questions it has
    contexts = [f"paragraph {i // 3}" for i in range(30)]
    questions = QuestionSet([f"q{i}" for i in range(30)], contexts, ["paragraph"] * 30, [0] * 30)
    q_train, q_dev = dev_split(questions)
    assert set(q_train.contexts).isdisjoint(q_dev.contexts)
    assert (len(q_train), len(q_dev)) == (24, 6)


def test_arms_and_grids():
    assert split_arm("span, second model") == ("span", "second model")
    with pytest.raises(ValueError, match="arm must be one of"):
        split_arm("span, bert-base-uncased")
    assert len(ARMS) == len(TASKS) * 2
    assert FINETUNE["lr"] in RATES[dev_choice.BOOK]  # the chapters' recipe is one of the choices
    assert BERT_FINETUNE_LR in RATES[dev_choice.SECOND]  # and BERT's largest rate (A.3)
    assert all(list(rates) == sorted(rates) for rates in RATES.values())  # a tie keeps the smaller


def test_each_run_chose_its_best_development_score_and_was_tested_once():
    results = load_results("dev_choice")
    assert results.arms == list(ARMS) and len(results.seeds) == 5
    for run in results.runs:
        task, checkpoint = split_arm(run.arm)
        m = run.metrics
        grid = {(lr, e): m[f"dev_score_lr{lr:g}_ep{e}"] for lr in RATES[checkpoint]
                for e in range(1, MAX_EPOCHS + 1)}
        best = max(grid.values())
        # the first of the rates (smallest) and epochs that reached the best development score
        first = min((lr, e) for lr in RATES[checkpoint] for e in range(1, MAX_EPOCHS + 1)
                    if grid[lr, e] == best
                    and all(grid[lr, k] < best for k in range(1, e)))
        assert (m["lr"], m["epoch"]) == first and m["dev_score"] == best, run.arm
        assert f"test_{TASKS[task]}" in m
        assert not any(k.startswith("test_") and "_lr" in k for k in m)  # no test score per rate
