"""The per-token and span heads: their batches, their losses against a hand computation, that each
learns a task it can, and that bad input is named."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mlm_lib.config import BertConfig
from mlm_lib.finetune import FinetuneConfig, evaluate_task, finetune
from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.model import BertForPreTraining
from mlm_lib.tasks import BertSpanHead, BertTokenClassifier, TaggedSet, best_spans, windows_for


def tiny_config(vocab_size: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      initializer_range=0.2)


# ---------------------------------------------------------------- a label for every word

def test_tags_sit_on_the_first_piece_of_each_word(tok):
    words = ["the", "unaffordable", "river"]
    data = TaggedSet([words], [[0, 1, IGNORE_INDEX]], ["o", "x"])
    pieces = [tok.encode_ids(w) for w in words]
    assert len(pieces[1]) > 1  # a word of several pieces
    b = data.batch(tok, [0], max_length=32)
    assert b["input_ids"][0].tolist() == [tok.cls_id, *sum(pieces, []), tok.sep_id]
    expected = [IGNORE_INDEX, 0, 1] + [IGNORE_INDEX] * (len(pieces[1]) - 1) + [IGNORE_INDEX, IGNORE_INDEX]
    assert b["labels"][0].tolist() == expected
    short = data.batch(tok, [0], max_length=1 + len(pieces[0]) + 1)  # room for "the" only
    assert short["input_ids"][0].tolist() == [tok.cls_id, *pieces[0], tok.sep_id]


def test_tagging_loss_is_the_mean_over_labelled_positions_and_f1_leaves_out_label_0(tok):
    model = BertTokenClassifier.from_scratch(tiny_config(tok.vocab_size), num_labels=3, seed=0).eval()
    data = TaggedSet([["a", "river", "town"], ["the", "sea"]], [[0, 2, 1], [IGNORE_INDEX, 2]],
                     ["o", "x", "y"])
    b = data.batch(tok, [0, 1], max_length=16)
    with torch.no_grad():
        loss, sums = model.objective(b)
        logits = model(b["input_ids"], b["token_type_ids"], b["attention_mask"])
    keep = b["labels"] != IGNORE_INDEX
    terms = -logits.log_softmax(-1)[keep].gather(-1, b["labels"][keep].unsqueeze(-1))
    assert int(keep.sum()) == 4 and math.isclose(float(loss), float(terms.mean()), rel_tol=1e-5)
    pred, gold = logits.argmax(-1)[keep], b["labels"][keep]
    tp = int(((pred == gold) & (gold != 0)).sum())
    fp = int(((pred != gold) & (pred != 0)).sum())
    fn = int(((pred != gold) & (gold != 0)).sum())
    assert (int(sums["token_f1"][0]), int(sums["token_f1"][1])) == (2 * tp, 2 * tp + fp + fn)


def test_the_tagger_learns_which_words_are_tagged(tok):
    nouns, others = ["river", "town", "sea", "hill"], ["the", "a", "by", "of"]
    words = [[others[i % 4], nouns[i % 4], others[(i + 1) % 4], nouns[(i + 2) % 4]] for i in range(32)]
    tags = [[0, 1, 0, 1] for _ in words]
    data = TaggedSet(words, tags, ["o", "noun"])
    model = BertTokenClassifier.from_scratch(tiny_config(tok.vocab_size), num_labels=2, seed=0)
    before = evaluate_task(model, tok, data, max_length=16)["token_f1"]
    cfg = FinetuneConfig(epochs=8, batch_size=8, lr=1e-2, max_length=16, progress=False)
    after = evaluate_task(finetune(model, tok, data, cfg).model, tok, data, max_length=16)
    assert after["token_f1"] == 1.0 and after["accuracy"] == 1.0 and before < 1.0


def test_tagged_set_rejects_bad_input():
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        TaggedSet([["a", "b"]], [[0]], ["o", "x"])
    with pytest.raises(ValueError, match="outside"):
        TaggedSet([["a"]], [[2]], ["o", "x"])
    with pytest.raises(ValueError, match="num_labels"):
        BertTokenClassifier.from_scratch(tiny_config(100), num_labels=1)


# ---------------------------------------------------------------- a span of segment B

def test_span_loss_is_a_softmax_over_b_positions(tok):
    model = BertSpanHead.from_scratch(tiny_config(tok.vocab_size), seed=0).eval()
    data = windows_for(tok, ["the [MASK] flows"], ["a river flows"], [(2, 7)], max_length=16, stride=8)
    b = data.batch(tok, [0], max_length=16)
    with torch.no_grad():
        start, end = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], b["context_mask"])
        loss, _ = model.objective(b)
    outside = b["context_mask"][0] == 0
    assert torch.all(start[0, outside] == torch.finfo(start.dtype).min)
    assert math.isclose(float(start[0].softmax(-1)[~outside].sum()), 1.0, rel_tol=1e-6)
    by_hand = (F.cross_entropy(start, b["start_positions"]) + F.cross_entropy(end, b["end_positions"])) / 2
    assert math.isclose(float(loss), float(by_hand), rel_tol=1e-6)


def test_best_spans_keeps_start_before_end_and_within_the_longest_answer():
    start = torch.tensor([[-10.0, 5.0, 0.0, 0.0]])
    end = torch.tensor([[9.0, 0.0, 0.0, 1.0]])  # the best end lies before the best start
    s, e = best_spans(start, end)
    assert (int(s), int(e)) == (1, 3)
    s, e = best_spans(start, end, max_pieces=2)
    assert (int(s), int(e)) in {(1, 1), (1, 2)} and int(s) <= int(e)


def test_the_heads_keep_the_pretrained_encoder(tok):
    pre = BertForPreTraining(tiny_config(tok.vocab_size), seed=3)
    for head in (BertTokenClassifier.from_pretraining(pre, num_labels=2), BertSpanHead.from_pretraining(pre)):
        for p1, p2 in zip(pre.bert.parameters(), head.bert.parameters()):
            assert torch.equal(p1, p2) and p1.data_ptr() != p2.data_ptr()
