"""The span head on windows of a context longer than the model (trained on the windows that hold
the answer, answered over all of them), and the tagger scored CoNLL's way."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.config import BertConfig
from mlm_lib.finetune import FinetuneConfig, finetune
from mlm_lib.tasks import (BertSpanHead, BertTokenClassifier, TaggedSet, predict_answers,
                           predict_tags, squad_scores, tagging_scores, windows_for)

NOUNS = ["river", "town", "sea", "hill", "road", "wall"]


def tiny_config(vocab_size: int, positions: int = 32) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64,
                      max_position_embeddings=positions, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, initializer_range=0.2)


def long_examples():
    """Contexts of 20 words, the answer's word anywhere in them: longer than one 16-position
    window, so the answer is found only by reading every window."""
    questions, contexts, answers = [], [], []
    for i in range(36):
        word = NOUNS[i % 6]
        filler = ["by", "the", "old", "and", "at", "night", "we", "saw"]
        words = [filler[(i + k) % 8] for k in range(20)]
        at = (i * 7) % 20
        words[at] = word
        context = " ".join(words)
        first = len(" ".join(words[:at])) + (1 if at else 0)
        questions.append(f"the {word}")
        contexts.append(context)
        answers.append((first, first + len(word)))
    return questions, contexts, answers


def test_window_sets_keep_the_answered_windows_for_training(tok):
    q, c, a = long_examples()
    every = windows_for(tok, q, c, a, max_length=16, stride=4)
    answered = windows_for(tok, q, c, a, max_length=16, stride=4, answered_only=True)
    assert len(every) > len(answered) >= len(q)
    assert set(answered.example) == set(range(len(q)))
    b = answered.batch(tok, range(len(answered)), max_length=16)
    ids = b["input_ids"]
    for k, w in enumerate(answered.windows):
        piece = tok.decode(ids[k, b["start_positions"][k]:b["end_positions"][k] + 1])
        assert piece == c[answered.example[k]][slice(*a[answered.example[k]])]
    with pytest.raises(ValueError, match="without its answer"):
        every.batch(tok, range(len(every)), max_length=16)
    with pytest.raises(ValueError, match="longer than max_length"):
        answered.batch(tok, [0], max_length=8)


def test_the_span_head_finds_answers_over_windows(tok):
    q, c, a = long_examples()
    train = windows_for(tok, q, c, a, max_length=16, stride=4, answered_only=True)
    model = BertSpanHead.from_scratch(tiny_config(tok.vocab_size), seed=0)
    before = predict_answers(model, tok, q, c, max_length=16, stride=4, max_answer_pieces=3)
    cfg = FinetuneConfig(epochs=12, batch_size=16, lr=1e-2, max_length=16, progress=False)
    model = finetune(model, tok, train, cfg).model
    answers = predict_answers(model, tok, q, c, max_length=16, stride=4, max_answer_pieces=3)
    truths = [[ctx[f:e]] for ctx, (f, e) in zip(c, a)]
    scores = squad_scores([n[0].text if n else "" for n in answers], truths)
    assert scores["exact_match"] >= 0.9 and scores["f1"] >= scores["exact_match"]
    assert squad_scores([n[0].text for n in before], truths)["exact_match"] < 0.5
    assert all(ctx[x.first:x.end] == x.text for ctx, n in zip(c, answers) for x in n)


def test_tagging_scores_count_entities_and_cut_words_are_o(tok):
    words = [["the", "river", "town", "by", "the", "sea"]] * 8
    tags = [[0, 1, 2, 0, 0, 1]] * 8
    data = TaggedSet(words, tags, ["O", "B-PLACE", "I-PLACE"])
    model = BertTokenClassifier.from_scratch(tiny_config(tok.vocab_size), num_labels=3, seed=0)
    cfg = FinetuneConfig(epochs=20, batch_size=8, lr=1e-2, max_length=16, progress=False)
    model = finetune(model, tok, data, cfg).model
    scores = tagging_scores(model, tok, data, max_length=16)
    assert (scores["right"], scores["found"], scores["true"]) == (16, 16, 16)
    # room for "the river" only: "town" and "sea" get O, so "river town" is cut short, "sea" lost
    short = predict_tags(model, tok, words[:1], max_length=4)
    assert short == [[0, 1, 0, 0, 0, 0]]
    cut = tagging_scores(model, tok, data, max_length=4)
    assert (cut["right"], cut["found"], cut["true"]) == (0, 8, 16)
