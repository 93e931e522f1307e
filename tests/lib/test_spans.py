"""Pieces and characters (offsets, word ids, label alignment), windows over a long context, the
n-best answer search, and SQuAD's and CoNLL's scores, on cases written by hand."""

from __future__ import annotations

import pytest
import torch

from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.metrics import (bio_entities, entity_scores, exact_match, normalize_answer,
                             squad_f1)
from mlm_lib.spans import (align_labels, char_span_to_pieces, encode_offsets,
                           encode_words, nbest_answers, question_windows, word_predictions)

TEXTS = [
    "Aristotle was born in Stagira, in 384 BC.",
    "The unaffordable river-crossing (1848) wasn't built.",
    "Café Müller's [MASK] opened; it closed [SEP] later.",
    "  spaces\tand\nnewlines  ",
    "",
    "İstanbul and Cafe\u0301 are hard for offsets.",
]


# ---------------------------------------------------------------- offsets and word ids

@pytest.mark.parametrize("text", TEXTS)
def test_offsets_encode_the_same_ids_as_the_tokenizer(tok, text):
    enc = encode_offsets(tok, text)
    assert enc.ids == tok.encode_ids(text)
    assert len(enc.offsets) == len(enc.word_ids) == len(enc.ids)
    assert enc.word_ids == sorted(enc.word_ids)


def test_offsets_point_at_each_pieces_characters(tok):
    text = "The unaffordable river-crossing, in Stagira."
    enc = encode_offsets(tok, text)
    pieces = tok.convert_ids_to_tokens(enc.ids)
    for piece, (a, b) in zip(pieces, enc.offsets):
        assert text[a:b].lower() == piece.removeprefix("##")
    # "unaffordable" is several pieces of one word; "-" and "," are words of their own
    una = [k for k, (a, b) in enumerate(enc.offsets) if 4 <= a < 16]
    assert len(una) > 1 and len({enc.word_ids[k] for k in una}) == 1
    assert text[slice(*enc.offsets[pieces.index("-")])] == "-"


def test_a_word_whose_length_changes_gives_every_piece_the_whole_word(tok):
    text = "Cafe\u0301 x"  # a decomposed accent: 5 characters, lowercased and stripped to 4
    enc = encode_offsets(tok, text)
    word0 = [o for o, w in zip(enc.offsets, enc.word_ids) if w == 0]
    assert word0 and all(o == (0, 5) for o in word0)


def test_a_literal_mask_stays_one_piece_with_its_characters(tok):
    text = "a [MASK] b"
    enc = encode_offsets(tok, text)
    assert enc.ids == [tok.encode_ids("a")[0], tok.mask_id, tok.encode_ids("b")[0]]
    assert enc.offsets[1] == (2, 8)


# ---------------------------------------------------------------- labels on pieces

def test_the_first_piece_carries_the_label_and_the_rest_are_ignored(tok):
    words = ["Lewis", "unaffordable", "acids"]
    ids, word_ids = encode_words(tok, words)
    assert len(tok.encode_ids("unaffordable")) > 1  # an entity split over pieces
    n1 = len(tok.encode_ids("unaffordable"))
    labels = align_labels([None, *word_ids, None], [1, 2, 0])
    assert labels == [IGNORE_INDEX, 1, 2] + [IGNORE_INDEX] * (n1 - 1) + [0, IGNORE_INDEX]
    # and back: each word's prediction is read at its first piece, a word cut off gets `missing`
    preds = [9, 1, 2] + [7] * (n1 - 1) + [0, 9]
    assert word_predictions([None, *word_ids, None], preds, 3) == [1, 2, 0]
    assert word_predictions([None, *word_ids[:2], None], [9, 1, 2, 9], 3, missing=0) == [1, 2, 0]


def test_char_span_to_pieces_covers_partial_words(tok):
    enc = encode_offsets(tok, "in Stagira, in 384 BC")
    first, last = char_span_to_pieces(enc.offsets, 3, 10)  # "Stagira"
    assert tok.decode(enc.ids[first:last + 1]) == "stagira"
    with pytest.raises(ValueError, match="no piece"):
        char_span_to_pieces(enc.offsets, 10, 10)


# ---------------------------------------------------------------- windows

CONTEXT = "one two three four five six seven eight nine ten eleven twelve"


def _answer(word: str) -> tuple[int, int]:
    i = CONTEXT.index(word)
    return i, i + len(word)


def test_windows_cover_the_context_with_the_stride_and_hold_the_question(tok):
    q = tok.encode_ids("which?")
    windows = question_windows(tok, "which?", CONTEXT, max_length=len(q) + 3 + 5, stride=3)
    n = len(tok.encode_ids(CONTEXT))
    assert n == 12
    assert [w.piece_start for w in windows] == [0, 3, 6, 9]
    for w in windows:
        assert len(w.input_ids) <= len(q) + 8
        assert w.input_ids[:len(q) + 2] == [tok.cls_id, *q, tok.sep_id]
        assert w.input_ids[-1] == tok.sep_id
        assert sum(w.context_mask) == len(w.input_ids) - len(q) - 3
        assert w.token_type_ids == [0] * (len(q) + 2) + [1] * (len(w.input_ids) - len(q) - 2)
    covered = {w.piece_start + k for w in windows for k in range(sum(w.context_mask))}
    assert covered == set(range(n))


def test_an_answer_at_a_window_boundary_is_whole_only_in_the_window_that_holds_it(tok):
    q = tok.encode_ids("which?")
    # room 5, stride 3: windows hold words 1-5, 4-8, 7-11, 10-12
    windows = question_windows(tok, "which?", CONTEXT, max_length=len(q) + 8, stride=3,
                               answer=(CONTEXT.index("five"), CONTEXT.index("six") + 3))
    # "five six" crosses the first window's end; the second holds it whole
    held = [k for k, w in enumerate(windows) if w.start_position is not None]
    assert held == [1]
    w = windows[1]
    assert w.offsets[w.start_position][0] == CONTEXT.index("five")
    assert w.offsets[w.end_position][1] == CONTEXT.index("six") + 3
    # the last word of the first window, exactly at its edge
    edge = question_windows(tok, "which?", CONTEXT, len(q) + 8, 3, answer=_answer("five"))
    assert [k for k, w in enumerate(edge) if w.start_position is not None] == [0, 1]
    assert edge[0].end_position == len(edge[0].input_ids) - 2  # just before the final [SEP]


def test_windows_refuse_a_stride_that_skips_pieces(tok):
    q = tok.encode_ids("which?")
    with pytest.raises(ValueError, match="stride"):
        question_windows(tok, "which?", CONTEXT, len(q) + 8, stride=6)
    with pytest.raises(ValueError, match="no room"):
        question_windows(tok, "which?", CONTEXT, len(q) + 3, stride=1)


# ---------------------------------------------------------------- n-best

def _logits(window, favour: dict[int, float]) -> torch.Tensor:
    out = torch.zeros(len(window.input_ids))
    for k, v in favour.items():
        out[k] = v
    return out


def test_nbest_drops_spans_outside_the_context_too_long_or_reversed(tok):
    q = tok.encode_ids("which?")
    windows = question_windows(tok, "which?", CONTEXT, len(q) + 8, stride=3)
    w0, w1 = windows[0], windows[1]
    c0 = len(q) + 2  # the first context position
    # window 0: [CLS] scores best as start, the final [SEP] best as end: both dropped;
    # a reversed pair (end before start) dropped; the valid best is "two three"
    s0 = _logits(w0, {0: 9.0, c0 + 1: 5.0, c0 + 3: 6.0})
    e0 = _logits(w0, {len(w0.input_ids) - 1: 9.0, c0 + 2: 4.0, c0 + 1: 3.0})
    # window 1: "seven eight", second best
    s1, e1 = _logits(w1, {c0 + 3: 4.2}), _logits(w1, {c0 + 4: 4.2})
    rest = [torch.zeros(len(w.input_ids)) for w in windows[2:]]
    answers = nbest_answers(windows, [s0, s1, *rest], [e0, e1, *rest], CONTEXT, n_best=5,
                            max_answer_pieces=3)
    assert answers[0].text == "two three" and answers[0].score == 9.0 and answers[0].window == 0
    # "four" (start 6) to "three" (end 4) would score 10 were reversed pairs kept
    assert answers[1].text == "seven eight" and answers[1].window == 1
    assert all(len(a.text.split()) <= 3 for a in answers)
    assert all(CONTEXT[a.first:a.end] == a.text for a in answers)
    assert [a.score for a in answers] == sorted((a.score for a in answers), reverse=True)


def test_nbest_is_empty_when_no_window_has_a_valid_pair(tok):
    q = tok.encode_ids("which?")
    windows = question_windows(tok, "which?", "one two", len(q) + 8, stride=3)
    w = windows[0]
    only_specials = _logits(w, {0: 9.0})
    # n_best=1: only [CLS] is among the candidates, so nothing is left
    assert nbest_answers(windows, [only_specials], [only_specials], "one two", n_best=1) == []


def test_the_same_characters_from_two_windows_count_once_at_their_best(tok):
    q = tok.encode_ids("which?")
    windows = question_windows(tok, "which?", CONTEXT, len(q) + 8, stride=3)
    c0 = len(q) + 2
    # "four" is in windows 0 (position c0+3) and 1 (position c0)
    scores = [torch.zeros(len(w.input_ids)) for w in windows]
    s, e = [x.clone() for x in scores], [x.clone() for x in scores]
    s[0][c0 + 3], e[0][c0 + 3], s[1][c0], e[1][c0] = 1.0, 1.0, 2.0, 2.0
    answers = nbest_answers(windows, s, e, CONTEXT, n_best=3, max_answer_pieces=1)
    fours = [a for a in answers if a.text == "four"]
    assert len(fours) == 1 and fours[0].score == 4.0 and fours[0].window == 1


# ---------------------------------------------------------------- SQuAD

@pytest.mark.parametrize("text, normal", [
    ("The Lewis acid.", "lewis acid"),
    ("an  apple, a pear", "apple pear"),
    ("Theology", "theology"),  # "the" only as a word
    ("", ""),
])
def test_squad_normalisation(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_and_f1_as_squad_defines_them():
    assert exact_match("the Lewis acids", ["Lewis acids"]) == 1.0
    assert exact_match("Lewis acid", ["Lewis acids"]) == 0.0
    # overlap 1 of 2 predicted, 1 of 3 true words: P 1/2, R 1/3, F1 0.4
    assert squad_f1("metal cations", ["all metal ions"]) == pytest.approx(0.4)
    # the best of several true answers
    assert squad_f1("metal cations", ["ions", "metal cations"]) == 1.0
    # words counted with multiplicity
    assert squad_f1("the the acid acid", ["acid"]) == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_an_empty_prediction_scores_only_against_an_empty_truth():
    assert exact_match("", ["Lewis"]) == 0.0 and squad_f1("", ["Lewis"]) == 0.0
    assert exact_match("", [""]) == 1.0 and squad_f1("the", [""]) == 1.0  # "the" normalises away
    assert squad_f1("Lewis", []) == 0.0


# ---------------------------------------------------------------- CoNLL

def test_bio_decoding_follows_conlleval():
    tags = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "I-PER", "B-ORG"]
    assert bio_entities(tags) == [("PER", 0, 1), ("LOC", 3, 4), ("LOC", 5, 5), ("PER", 6, 6),
                                  ("ORG", 7, 7)]
    assert bio_entities([]) == [] and bio_entities(["O", "O"]) == []
    with pytest.raises(ValueError, match="not O"):
        bio_entities(["X-PER"])


def test_entities_count_only_with_exact_span_and_type():
    truth = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"],       # PER cut short: wrong; LOC right
            ["B-LOC", "O"]]                      # right span, wrong type: wrong
    s = entity_scores(truth, pred)
    assert (s["right"], s["found"], s["true"]) == (1, 3, 3)
    assert s["precision"] == s["recall"] == s["f1"] == pytest.approx(1 / 3)


def test_empty_predictions_score_zero_not_nan():
    s = entity_scores([["B-X", "O"]], [["O", "O"]])
    assert (s["precision"], s["recall"], s["f1"], s["found"]) == (0.0, 0.0, 0.0, 0)
    none = entity_scores([["O"]], [["O"]])
    assert none["f1"] == 0.0 and none["true"] == 0
    with pytest.raises(ValueError, match="sentence 0"):
        entity_scores([["O"]], [["O", "O"]])
