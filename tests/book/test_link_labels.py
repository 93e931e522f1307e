"""The tagger on the editors' links and on the propagated ones (the link_labels results)."""

from __future__ import annotations

import pytest

from mlm_lib.book.results import load_results
from mlm_lib.book.task_shapes import ENCODERS, LABEL_ARMS, SECOND_ENCODER, label_metrics


def test_an_unknown_arm_is_refused():
    with pytest.raises(ValueError, match="arm must be one of"):
        label_metrics("pretrained encoder, gold labels", 0)


def test_the_editors_links_arms_are_the_task_shapes_taggers_seed_for_seed():
    """Same files, recipe and seeds as chapter 13's tagging runs: the same scores, so the two files
    cannot drift apart unnoticed."""
    labels, shapes = load_results("link_labels"), load_results("task_shapes")
    assert labels.arms == list(LABEL_ARMS)
    for encoder in (ENCODERS[0], SECOND_ENCODER):
        assert labels.values(f"{encoder}, editors' links", "f1") == pytest.approx(
            shapes.values(encoder, "tagging_f1"), abs=1e-12)
