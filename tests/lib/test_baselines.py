"""Count baselines: hand-checkable predictions, back-off, and bad input."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.baselines import CountBaselines

CLS, SEP, MASK, PAD = 2, 3, 4, 0
SPECIAL = [PAD, 1, CLS, SEP, MASK]


def fitted() -> CountBaselines:
    # token 6 is the most frequent; after 5 comes 7 (twice) more than 8; between 9 and 7 comes 8
    seqs = [[CLS, 5, 7, 6, SEP], [CLS, 5, 7, 6, 6, SEP], [CLS, 9, 8, 7, SEP], [CLS, 5, 8, 6, SEP],
            [CLS, 6, 6, SEP]]
    return CountBaselines.fit(seqs, vocab_size=12, special_ids=SPECIAL)


def test_unigram_bigram_and_both_neighbours():
    b = fitted()
    assert b.unigram == 6
    ids = torch.tensor([[CLS, 5, MASK, 6, SEP],     # left 5 -> 7; (5, 6) seen with 7 twice, 8 once
                        [CLS, 9, MASK, 7, SEP],     # both (9, 7) -> 8
                        [CLS, 11, MASK, 10, SEP]])  # unseen left and pair -> unigram 6
    masked = ids == MASK
    p = b.predict(ids, masked)
    assert p["unigram"].tolist() == [6, 6, 6]
    assert p["left_bigram"].tolist() == [7, 8, 6]
    assert p["both_neighbours"].tolist() == [7, 8, 6]


def test_both_neighbours_uses_the_right_side():
    b = CountBaselines.fit([[1, 5, 7, 2], [1, 5, 8, 3], [1, 5, 8, 3]], vocab_size=10, special_ids=[0, 1, 2, 3, 4])
    ids = torch.tensor([[1, 5, 4, 2], [1, 5, 4, 3]])
    p = b.predict(ids, ids == 4)
    assert p["left_bigram"].tolist() == [8, 8]  # only the left side: 8 is more frequent after 5
    assert p["both_neighbours"].tolist() == [7, 8]  # the right neighbour disambiguates


def test_masked_neighbour_backs_off_and_padding_is_no_neighbour():
    b = fitted()
    ids = torch.tensor([[CLS, MASK, MASK, 6, SEP, PAD]])
    masked = torch.tensor([[False, True, True, False, False, False]])
    p = b.predict(ids, masked, attention_mask=(ids != PAD).long())
    # position 1: left [CLS] seen (followed by 5 three times); position 2: left is [MASK], unseen
    assert p["left_bigram"].tolist() == [5, 6]


def test_accuracy_counts_on_the_same_positions():
    b = fitted()
    ids = torch.tensor([[CLS, 5, MASK, 6, SEP], [CLS, 9, MASK, 7, SEP]])
    labels = torch.tensor([[-100, -100, 7, -100, -100], [-100, -100, 6, -100, -100]])
    acc = b.accuracy(ids, ids == MASK, labels)
    assert acc == {"unigram": (1, 2), "left_bigram": (1, 2), "both_neighbours": (1, 2)}


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="out of range"):
        CountBaselines.fit([[1, 50]], vocab_size=10)
    with pytest.raises(ValueError, match="empty"):
        CountBaselines.fit([], vocab_size=10)
    with pytest.raises(ValueError, match="fit"):
        CountBaselines(vocab_size=10).predict(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        fitted().predict(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.bool))
