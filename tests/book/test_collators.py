"""mlm_lib.book.collators: Google's masking step, rewritten on ids, keeps the script's rules, and
the counts that chapters 6 and 9 print read what each recipe did from its output alone."""

from __future__ import annotations

import random

import pytest
import torch

from mlm_lib.book.collators import (GOOGLE_MAX_PREDICTIONS, Corrupted, count, google_masking,
                                    piece_words, run_collator, run_google, run_mask_tokens,
                                    spaced_words, special_draws, words_cut)
from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.masking import BERT_CORRUPTION, WHOLE_WORD_CORRUPTION, Corruption
from mlm_lib.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

PIECES = ["the", "cat", "sat", "on", "mat", "photo", "##syn", "##thesis", "un", "##happy", ",", "."]


@pytest.fixture(scope="module")
def tok() -> WordPieceTokenizer:
    return WordPieceTokenizer(list(SPECIAL_TOKENS) + PIECES)


def _sentences(tok: WordPieceTokenizer, n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    words = ["the cat", "sat on", "the mat", "photosynthesis", "unhappy", ",", "."]
    return [tok.encode(" ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))).input_ids
            for _ in range(n)]


def test_google_takes_exactly_its_count_and_never_cls_or_sep(tok):
    rng = random.Random(0)
    for ids in _sentences(tok, 200):
        corrupted, labels = google_masking(ids, tok, rng)
        chosen = [i for i, label in enumerate(labels) if label != IGNORE_INDEX]
        assert len(chosen) == min(GOOGLE_MAX_PREDICTIONS, max(1, round(0.15 * len(ids))))
        assert all(ids[i] not in (tok.cls_id, tok.sep_id) for i in chosen)
        assert all(labels[i] == ids[i] for i in chosen)
        assert all(corrupted[i] == ids[i] for i in range(len(ids)) if i not in chosen)


def test_google_cap_binds_on_long_sequences(tok):
    ids = [tok.cls_id] + tok.convert_tokens_to_ids(["the"] * 300) + [tok.sep_id]
    _, labels = google_masking(ids, tok, random.Random(1))
    assert sum(label != IGNORE_INDEX for label in labels) == GOOGLE_MAX_PREDICTIONS


def test_google_whole_words_are_chosen_whole(tok):
    rng = random.Random(3)
    for ids in _sentences(tok, 300, seed=3):
        _, labels = google_masking(ids, tok, rng, whole_word=True)
        tokens = tok.convert_ids_to_tokens(ids)
        for i in range(1, len(ids)):
            if tokens[i].startswith("##"):  # a continuation shares its word's fate
                assert (labels[i] == IGNORE_INDEX) == (labels[i - 1] == IGNORE_INDEX)


def test_google_draws_random_tokens_from_the_whole_vocabulary(tok):
    """The probe of the chapters: everything chosen, everything random. Specials appear in about
    5/17 of the draws here; ``mask_tokens`` (by default) never draws one."""
    seqs = _sentences(tok, 400)
    google = run_google(seqs, tok, seed=0, rate=1.0, max_predictions=100, mask=0.0, keep=0.0)
    specials, draws = special_draws(google, tok)
    assert draws == sum(len(s) - 2 for s in seqs)
    assert 0.2 < specials / draws < 0.4
    ours = run_mask_tokens(seqs, tok, Corruption(select=1.0, mask=0.0, random=1.0, keep=0.0), seed=0)
    assert special_draws(ours, tok) == (0, draws)


def test_counts_read_the_recipe_back(tok):
    seqs = _sentences(tok, 3000)
    c = count(run_google(seqs, tok, seed=0), tok)
    assert c.chosen == int(c.google_count.sum()) and bool((c.per_sequence == c.google_count).all())
    assert c.special_chosen == 0 and c.masked + c.random + c.kept == c.chosen
    assert abs(c.masked / c.chosen - 0.8) < 0.03
    lib = count(run_mask_tokens(seqs, tok, BERT_CORRUPTION, seed=0), tok)
    assert abs(lib.chosen / lib.ordinary - 0.15) < 0.02 and lib.special_chosen == 0
    assert int((lib.per_sequence == 0).sum()) > 0  # one coin per token: some sequences get none


def test_a_fake_collator_is_stacked_row_by_row(tok):
    """run_collator pads, batches and stacks; an example's attention mask marks its padding."""
    seqs = _sentences(tok, 10)
    width = max(map(len, seqs))

    def mask_first_word(batch):
        longest = max(len(e["input_ids"]) for e in batch)  # a collator pads to its batch's longest
        ids = torch.tensor([e["input_ids"] + [tok.pad_id] * (longest - len(e["input_ids"])) for e in batch])
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, 1], ids[:, 1] = ids[:, 1], tok.mask_id
        return {"input_ids": ids, "labels": labels}

    out = run_collator(mask_first_word, [{"input_ids": s} for s in seqs], tok.pad_id, batch_size=3)
    assert out.corrupted.shape == (10, width)
    assert bool((out.corrupted[:, 1] == tok.mask_id).all())
    assert count(out, tok).chosen == 10
    padded = [{"input_ids": s + [tok.pad_id] * 3, "attention_mask": [1] * len(s) + [0] * 3} for s in seqs]
    assert torch.equal(run_collator(mask_first_word, padded, tok.pad_id).attention_mask, out.attention_mask)


def test_words_cut_and_the_two_word_definitions(tok):
    ids = torch.tensor([tok.encode("photosynthesis, the cat").input_ids])
    # [CLS] photo ##syn ##thesis , the cat [SEP]; "photosynthesis," is one spaced word
    offsets = torch.tensor([[(0, 0), (0, 5), (5, 8), (8, 14), (14, 15), (16, 19), (20, 23), (0, 0)]])
    special = torch.isin(ids, torch.tensor(sorted(tok.special_ids)))
    pieces, spaced = piece_words(ids, tok), spaced_words(offsets, special)
    real = ~special
    in_m = torch.tensor([[False, True, True, True, False, False, True, False]])
    assert words_cut(in_m, pieces, real) == 0   # photosynthesis whole, "," apart
    assert words_cut(in_m, spaced, real) == 1   # "photosynthesis," without its comma
    half = torch.tensor([[False, True, False, False, False, False, False, False]])
    assert words_cut(half, pieces, real) == 1


def test_whole_word_library_masking_never_cuts_a_piece_word(tok):
    seqs = _sentences(tok, 500)
    out = run_mask_tokens(seqs, tok, WHOLE_WORD_CORRUPTION, seed=0)
    assert count(out, tok, words={"##-words": piece_words(out.original, tok)}).cut["##-words"] == 0


def test_corrupted_is_one_shape(tok):
    out = run_google(_sentences(tok, 5), tok, seed=0)
    assert isinstance(out, Corrupted)
    assert out.original.shape == out.corrupted.shape == out.labels.shape == out.attention_mask.shape
