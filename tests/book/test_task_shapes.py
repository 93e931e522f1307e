"""Chapter 13's pair diagnostics read the NSP head the right way round."""

import pytest
import torch

from mlm_lib.book.book_model import book_model
from mlm_lib.book.task_shapes import ENCODERS, PAIR_LABELS, nsp_head_accuracy, task_model
from mlm_lib.finetune import LabelledSet
from mlm_lib.model import BertForPreTraining

PAIRS = LabelledSet(["the river runs through the old town .", "the king was crowned in the city ."] * 3,
                    [1, 0, 1, 1, 0, 1], PAIR_LABELS,
                    pairs=["its bridge was built in stone .", "the match ended without a goal ."] * 3)


def _saying(column: int) -> BertForPreTraining:
    """A model whose NSP head always answers ``column`` (0 IsNext, 1 NotNext)."""
    model = BertForPreTraining(book_model().config, seed=0)
    with torch.no_grad():
        model.cls.seq_relationship.weight.zero_()
        model.cls.seq_relationship.bias.copy_(torch.tensor([5.0, -5.0] if column == 0 else [-5.0, 5.0]))
    return model


def test_is_next_is_read_as_same_article():
    same = PAIR_LABELS.index("same article")
    share_same = sum(y == same for y in PAIRS.labels) / len(PAIRS)
    assert nsp_head_accuracy(_saying(0), PAIRS) == pytest.approx(share_same)
    assert nsp_head_accuracy(_saying(1), PAIRS) == pytest.approx(1 - share_same)


def test_an_unknown_encoder_is_named():
    with pytest.raises(ValueError, match="encoder must be one of"):
        task_model("pair", "an encoder", 0)
    assert len(ENCODERS) == 3


def test_the_second_encoder_fine_tunes_on_its_own_vocabulary():
    from mlm_lib.book.second_model import regrown_model
    from mlm_lib.book.task_shapes import SECOND_ENCODER, task_data, tokenizer_for

    head = task_model("span", SECOND_ENCODER, 0)
    start = regrown_model().bert.state_dict()
    assert all(torch.equal(v, start[k]) for k, v in head.bert.state_dict().items())
    tok = tokenizer_for(SECOND_ENCODER)
    assert tok.vocab_size == 30522 and tokenizer_for(ENCODERS[0]).vocab_size == 8000
    windows = task_data("span")[1].windows(tokenizer=tok)
    ids = windows.batch(tok, range(4), 64)["input_ids"]
    assert int(ids.max()) >= 8000, "cut with the book's vocabulary, not the second model's"


def test_only_the_bert_rate_arm_changes_the_rate():
    from mlm_lib.book.second_model import regrown_model
    from mlm_lib.book.task_shapes import (BERT_FINETUNE_LR, EXPERIMENT_ENCODERS, FINETUNE,
                                          SECOND_AT_BERT_RATE, SECOND_ENCODER, finetune_settings,
                                          tokenizer_for)

    assert finetune_settings(SECOND_AT_BERT_RATE) == {**FINETUNE, "lr": BERT_FINETUNE_LR}
    assert BERT_FINETUNE_LR < FINETUNE["lr"]
    for encoder in EXPERIMENT_ENCODERS:
        if encoder != SECOND_AT_BERT_RATE:
            assert finetune_settings(encoder) == FINETUNE
    assert finetune_settings(regrown_model()) == FINETUNE  # a model passed in: the recipe's rate
    assert tokenizer_for(SECOND_AT_BERT_RATE) is tokenizer_for(SECOND_ENCODER)
    head = task_model("pair", SECOND_AT_BERT_RATE, 0)
    start = regrown_model().bert.state_dict()
    assert all(torch.equal(v, start[k]) for k, v in head.bert.state_dict().items())
