"""Fine-tuning: the classifier on [CLS], the labelled sets, the loop and its evaluation (the book's
article task, ``mlm_lib.book.chapter_runs.article_task``, is tests/book/test_finetune_book.py's)."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.config import BertConfig
from mlm_lib.finetune import (BertClassifier, FinetuneConfig, LabelledSet, evaluate_task,
                              finetune, head_parameters, predict)
from mlm_lib.model import BertForPreTraining
from toy_articles import toy_task


def tiny_config(vocab_size: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      initializer_range=0.2)  # a wide init learns the toy task in a few steps


# ---------------------------------------------------------------- labelled sets

def test_labelled_set_rejects_labels_it_cannot_hold():
    # formerly the end of test_article_task_by_title_and_errors (now in tests/book/test_finetune_book.py)
    with pytest.raises(ValueError, match="outside"):
        LabelledSet(["a"], [2], ["x", "y"])
    with pytest.raises(ValueError, match="labels"):
        LabelledSet(["a", "b"], [0], ["x", "y"])


# ---------------------------------------------------------------- model

def test_from_pretraining_keeps_the_encoder_and_drops_the_heads(tok):
    pre = BertForPreTraining(tiny_config(tok.vocab_size), seed=1)
    clf = BertClassifier.from_pretraining(pre, num_labels=3)
    names = {n for n, _ in clf.named_parameters()}
    assert not any(n.startswith("cls.") for n in names)  # no MLM or NSP head in the classifier
    for (n1, p1), (n2, p2) in zip(pre.bert.named_parameters(), clf.bert.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2)
        assert p1.data_ptr() != p2.data_ptr()  # a copy: fine-tuning leaves the original intact
    ids = torch.tensor([[tok.cls_id, 5, 6, tok.sep_id], [tok.cls_id, 7, tok.sep_id, tok.pad_id]])
    mask = (ids != tok.pad_id).long()
    assert clf.eval()(ids, attention_mask=mask).shape == (2, 3)
    counts = head_parameters(pre)
    h = pre.config.hidden_size
    assert counts["nsp_head"] == 2 * h + 2
    # transform (h*h + h), its LayerNorm (2h), output bias (V); the output matrix is tied
    assert counts["mlm_head"] == h * h + h + 2 * h + pre.config.vocab_size
    assert counts["encoder"] == sum(p.numel() for p in clf.bert.parameters())


def test_classifier_rejects_bad_arguments(tok):
    cfg = tiny_config(tok.vocab_size)
    with pytest.raises(ValueError, match="num_labels"):
        BertClassifier.from_scratch(cfg, num_labels=1)
    with pytest.raises(ValueError, match="BertForPreTraining"):
        BertClassifier.from_pretraining(BertClassifier.from_scratch(cfg, 2).bert, 2)
    with pytest.raises(ValueError, match="epochs"):
        FinetuneConfig(epochs=0)
    clf = BertClassifier.from_scratch(cfg, num_labels=2)
    with pytest.raises(ValueError, match="labels"):
        evaluate_task(clf, tok, LabelledSet(["a b"], [0], ["x", "y", "z"]))
    with pytest.raises(ValueError, match="empty"):
        finetune(clf, tok, LabelledSet([], [], ["x", "y"]), FinetuneConfig(progress=False))


# ---------------------------------------------------------------- training

def test_finetune_learns_a_separable_task_and_is_reproducible(tok):
    train, test = toy_task(seed=0)
    cfg = FinetuneConfig(epochs=6, batch_size=16, lr=1e-2, max_length=16, progress=False)

    def run() -> tuple[BertClassifier, list]:
        clf = BertClassifier.from_scratch(tiny_config(tok.vocab_size), num_labels=3, seed=0)
        before = evaluate_task(clf, tok, test, max_length=16)
        res = finetune(clf, tok, train, cfg, eval_set=test)
        return res.model, before, res

    model, before, res = run()
    evals = res.column("accuracy", kind="eval")
    assert len(evals) == cfg.epochs
    assert before["accuracy"] < 0.7
    assert evals[-1] == 1.0  # each sentence names its article's word: fully learnable
    losses = res.column("loss")
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3
    probs = predict(model, tok, ["the star number 99 is described in this long sentence"], 16)
    assert probs.shape == (1, 3) and abs(float(probs.sum()) - 1.0) < 1e-5
    assert train.label_names[int(probs.argmax())] == "Stars"
    model2, _, res2 = run()
    assert res2.column("loss") == losses
    for p1, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p1, p2)


def test_keep_best_returns_the_best_epochs_weights_and_changes_nothing_else(tok):
    train, test = toy_task(seed=0)
    cfg = FinetuneConfig(epochs=4, batch_size=16, lr=1e-2, max_length=16, progress=False)
    fresh = lambda: BertClassifier.from_scratch(tiny_config(tok.vocab_size), num_labels=3, seed=0)
    plain = finetune(fresh(), tok, train, cfg)
    # a planted score that peaks at epoch 2: the weights returned are epoch 2's, not the last
    planted = iter([0.1, 0.9, 0.5, 0.9])
    weights: list[dict[str, torch.Tensor]] = []

    def score(model: torch.nn.Module) -> float:
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
        model.eval()  # as a scorer that predicts would; finetune must put training back on
        return next(planted)

    best = finetune(fresh(), tok, train, cfg, keep_best=score)
    assert best.best_epoch == 2 and plain.best_epoch is None
    assert best.history.columns("score", kind="select")["score"] == [0.1, 0.9, 0.5, 0.9]
    assert all(torch.equal(v, weights[1][k]) for k, v in best.model.state_dict().items())
    assert not all(torch.equal(v, weights[3][k]) for k, v in best.model.state_dict().items())
    # scoring between epochs draws no randomness and leaves dropout on: the same steps either way
    assert best.column("loss") == plain.column("loss")
    assert all(torch.equal(v, weights[3][k]) for k, v in plain.model.state_dict().items())


def test_a_pair_set_puts_b_in_segment_one(tok):
    pairs = LabelledSet(["the river runs"], [1], ["other", "same"], pairs=["the river floods"])
    b = pairs.batch(tok, [0], max_length=16)
    types, ids = b["token_type_ids"][0].tolist(), b["input_ids"][0].tolist()
    n_a = len(tok.encode_ids("the river runs")) + 2  # [CLS] A [SEP]
    assert types == [0] * n_a + [1] * (len(ids) - n_a)
    assert ids[n_a - 1] == tok.sep_id and ids[-1] == tok.sep_id and b["labels"].tolist() == [1]
    with pytest.raises(ValueError, match="pairs"):
        LabelledSet(["a", "b"], [0, 1], ["x", "y"], pairs=["c"])
