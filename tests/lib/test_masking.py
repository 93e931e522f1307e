"""Masking: the rate and the 80/10/10 split within binomial bounds, the invariants, and the
exact draws that the chapters' checked outputs depend on."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mlm_lib.loss import IGNORE_INDEX
from mlm_lib.masking import (BERT_CORRUPTION, EVAL_CORRUPTION, GOOGLE_CORRUPTION, SPANBERT_CORRUPTION,
                             Corruption, mask_tokens, word_starts)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, CLS, SEP, MASK)
V = 1000


def make_batch(B: int, T: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """[CLS] tokens [SEP] [PAD]... rows with random lengths (right padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIAL), V, (B, T), generator=g)
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    pos = torch.arange(T).expand(B, T)
    attn = (pos < lengths[:, None]).long()
    ids[:, 0] = CLS
    ids[pos == (lengths[:, None] - 1)] = SEP
    ids[attn == 0] = PAD
    return ids, attn


def run(ids, attn=None, seed=0, **kw):
    return mask_tokens(ids, mask_token_id=MASK, vocab_size=V, special_ids=SPECIAL, attention_mask=attn,
                       generator=torch.Generator().manual_seed(seed), **kw)


def within_5_sigma(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1


def test_invariants_of_the_output():
    ids, attn = make_batch(64, 48)
    mb = run(ids, attn)
    cand = (attn == 1) & (ids != CLS) & (ids != SEP)
    assert not (mb.masked & ~cand).any()
    assert torch.equal(mb.masked, mb.replaced | mb.randomized | mb.kept)
    assert not (mb.replaced & mb.randomized).any() and not (mb.replaced & mb.kept).any()
    assert not (mb.randomized & mb.kept).any()
    assert torch.equal(mb.labels[mb.masked], ids[mb.masked])
    assert (mb.labels[~mb.masked] == IGNORE_INDEX).all()
    assert torch.equal(mb.input_ids[~mb.masked], ids[~mb.masked])
    assert (mb.input_ids[mb.replaced] == MASK).all()
    assert torch.equal(mb.input_ids[mb.kept], ids[mb.kept])
    rnd = mb.input_ids[mb.randomized]
    assert ((rnd >= len(SPECIAL)) & (rnd < V)).all()
    assert mb.num_masked == int(mb.masked.sum())


@pytest.mark.parametrize("rate,probs", [(0.15, (0.8, 0.1, 0.1)), (0.4, (0.5, 0.25, 0.25)), (0.05, (1.0, 0.0, 0.0))])
def test_rate_and_split_within_binomial_bounds(rate, probs):
    ids, attn = make_batch(512, 128, seed=1)
    n_cand = int(((attn == 1) & (ids != CLS) & (ids != SEP)).sum())
    for seed in range(3):
        mb = run(ids, attn, seed=seed, corruption=Corruption(rate, *probs))
        m = mb.num_masked
        assert within_5_sigma(m, n_cand, rate), (m, n_cand * rate)
        for part, p in zip((mb.replaced, mb.randomized, mb.kept), probs):
            assert within_5_sigma(int(part.sum()), m, p)


def test_random_tokens_are_uniform_over_non_special():
    ids = torch.full((400, 100), 500)
    mb = run(ids, corruption=Corruption(select=1.0, mask=0.0, random=1.0, keep=0.0))
    assert mb.randomized.all()
    counts = torch.bincount(mb.input_ids.flatten(), minlength=V).float()
    assert (counts[list(SPECIAL)] == 0).all()
    n, k = ids.numel(), V - len(SPECIAL)
    expected = n / k
    chi2 = float(((counts[len(SPECIAL):] - expected) ** 2 / expected).sum())
    assert abs(chi2 - (k - 1)) < 5 * math.sqrt(2 * (k - 1))  # chi-square with k-1 dof, 5 sigma


def test_rate_one_masks_every_real_token():
    ids, attn = make_batch(8, 20)
    mb = run(ids, attn, corruption=Corruption(select=1.0))
    assert torch.equal(mb.masked, (attn == 1) & (ids != CLS) & (ids != SEP))


def test_seeded_and_reproducible():
    ids, attn = make_batch(16, 32)
    a, b, c = run(ids, attn, seed=5), run(ids, attn, seed=5), run(ids, attn, seed=6)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.masked, b.masked)
    assert not torch.equal(a.masked, c.masked)


PIN_IDS = torch.tensor([[CLS, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, SEP],
                        [CLS, 21, 22, 23, 24, 25, 26, SEP, PAD, PAD, PAD, PAD],
                        [CLS, 31, 32, SEP, PAD, PAD, PAD, PAD, PAD, PAD, PAD, PAD]])
PIN_STARTS = torch.tensor([[1, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1]] * 3, dtype=torch.bool)


@pytest.mark.parametrize("seed,options,expected_ids,expected_kinds", [
    (0, dict(corruption=Corruption(select=0.5)),
     [[2, 4, 12, 13, 14, 4, 4, 17, 4, 4, 4, 3], [2, 4, 48, 4, 24, 25, 4, 3, 0, 0, 0, 0],
      [2, 31, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0]],
     [".M...MM.MMM.", ".MRM..M.....", "..M........."]),
    # row 2 draws nothing at 15% and gets its one blank from at_least_one
    (1, dict(corruption=EVAL_CORRUPTION, at_least_one=True),
     [[2, 11, 12, 13, 4, 15, 16, 17, 18, 19, 20, 3], [2, 4, 22, 23, 24, 25, 26, 3, 0, 0, 0, 0],
      [2, 31, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0]],
     ["....M.......", ".M..........", "..M........."]),
    # row 1 draws the words [21 ##22] and [24 ##25 ##26]; the cap of 3 tokens drops the first
    (2, dict(corruption=Corruption(select=0.4, mask=0.5, random=0.25, keep=0.25), whole_word_starts=PIN_STARTS,
             max_predictions=3, at_least_one=True),
     [[2, 11, 12, 13, 14, 15, 16, 17, 4, 22, 4, 3], [2, 21, 22, 23, 24, 25, 4, 3, 0, 0, 0, 0],
      [2, 27, 32, 3, 0, 0, 0, 0, 0, 0, 0, 0]],
     ["........MRM.", "....KKM.....", ".RK........."]),
])
def test_the_draws_are_pinned(seed, options, expected_ids, expected_kinds):
    """The chapters' checked outputs depend on these exact draws (recorded from the implementation
    with loose rate/mask_prob/random_prob/keep_prob arguments): a change that reorders or adds a
    random draw fails here. Kinds: M [MASK], R random token, K kept, . not in M."""
    mb = mask_tokens(PIN_IDS, mask_token_id=MASK, vocab_size=50, special_ids=SPECIAL,
                     attention_mask=(PIN_IDS != PAD).long(), generator=torch.Generator().manual_seed(seed),
                     **options)
    kinds = ["".join("M" if r else "R" if z else "K" if k else "." for r, z, k in zip(*row))
             for row in zip(mb.replaced.tolist(), mb.randomized.tolist(), mb.kept.tolist())]
    assert mb.input_ids.tolist() == expected_ids
    assert kinds == expected_kinds
    assert torch.equal(mb.labels, torch.where(mb.masked, PIN_IDS, IGNORE_INDEX))


def test_max_predictions_and_at_least_one():
    ids, attn = make_batch(256, 64, seed=2)
    mb = run(ids, attn, corruption=Corruption(select=0.5), max_predictions=5)
    assert int(mb.masked.sum(1).max()) <= 5
    assert (mb.masked.sum(1) == 5).float().mean() > 0.8  # most rows have more than 5 candidates
    short = torch.tensor([[CLS, 10, 11, SEP, PAD, PAD]] * 200)
    attn = (short != PAD).long()
    plain = run(short, attn, corruption=Corruption(select=0.05))
    assert (plain.masked.sum(1) == 0).any()
    forced = run(short, attn, corruption=Corruption(select=0.05), at_least_one=True)
    assert (forced.masked.sum(1) >= 1).all()
    assert not forced.masked[:, [0, 3, 4, 5]].any()
    only_specials = torch.tensor([[CLS, SEP, PAD]])
    assert run(only_specials, at_least_one=True).num_masked == 0


def test_whole_word_masking_masks_words_entirely():
    # words: [10 ##11 ##12] [13] [14 ##15] ... ; word starts mark the first piece
    T = 60
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, V, (128, T), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    starts = torch.rand((128, T), generator=g) < 0.4
    mb = run(ids, corruption=Corruption(select=0.3), whole_word_starts=starts, max_predictions=12)
    cand = (ids != CLS) & (ids != SEP)
    assert int(mb.masked.sum(1).max()) <= 12
    group = torch.cumsum((starts | ~cand).long(), dim=1)
    for row in range(128):
        for w in group[row][cand[row]].unique():
            in_word = (group[row] == w) & cand[row]
            vals = mb.masked[row][in_word]
            assert vals.all() or not vals.any()
    # the rate is about words: a word is chosen with probability `select`
    n_words = int(sum(group[r][cand[r]].unique().numel() for r in range(128)))
    mb = run(ids, corruption=Corruption(select=0.3), whole_word_starts=starts, seed=9)
    chosen = sum(group[r][mb.masked[r]].unique().numel() for r in range(128))
    assert within_5_sigma(chosen, n_words, 0.3)


def test_word_starts_from_ids():
    itos = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing", "the"]
    assert word_starts(torch.tensor([[2, 7, 5, 6, 3]]), itos).tolist() == [[True, True, True, False, True]]
    assert word_starts([["the", "##s"]]).tolist() == [[True, False]]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 30), st.integers(0, 2**31 - 1), st.floats(0.01, 1.0),
       st.booleans(), st.booleans(), st.one_of(st.none(), st.integers(1, 5)))
def test_never_touches_special_or_padding(B, T, seed, rate, wwm, at_least_one, cap):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 40, (B, T), generator=g)  # specials appear anywhere
    attn = (torch.rand((B, T), generator=g) < 0.8).long()
    starts = torch.rand((B, T), generator=g) < 0.5 if wwm else None
    mb = mask_tokens(ids, mask_token_id=MASK, vocab_size=40, special_ids=SPECIAL, attention_mask=attn,
                     corruption=Corruption(select=rate), whole_word_starts=starts, at_least_one=at_least_one,
                     max_predictions=cap, generator=g)
    protected = (attn == 0) | (ids < len(SPECIAL))
    assert not mb.masked[protected].any()
    assert torch.equal(mb.input_ids[protected], ids[protected])
    if cap is not None and not at_least_one:
        assert int(mb.masked.sum(1).max()) <= cap


def test_corruption_refuses_bad_recipes_and_names_the_field():
    for select in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="select"):
            Corruption(select=select)
    with pytest.raises(ValueError, match="sum to 1"):
        Corruption(mask=0.8, random=0.1, keep=0.2)
    for field in ("mask", "random", "keep"):
        shares = {"mask": 0.5, "random": 0.25, "keep": 0.25, field: 1.2}
        with pytest.raises(ValueError, match=rf"{field} must be in \[0, 1\]"):
            Corruption(**shares)
    with pytest.raises(ValueError, match="keep"):
        Corruption(mask=1.0, random=0.1, keep=float("nan"))
    keep = 1.0 - 0.7 - 0.1  # 0.20000000000000004, as chapter 6's sliders compute it: float noise passes
    Corruption(mask=0.7, random=1.0 - 0.7 - keep, keep=keep)


def test_the_two_recipes():
    assert BERT_CORRUPTION == Corruption(select=0.15, mask=0.8, random=0.1, keep=0.1)
    assert EVAL_CORRUPTION == Corruption(select=0.15, mask=1.0, random=0.0, keep=0.0)
    with pytest.raises(FrozenInstanceError):
        BERT_CORRUPTION.select = 0.3  # a shared default must not be changed by one caller
    ids, attn = make_batch(32, 40, seed=7)
    mb = run(ids, attn, corruption=EVAL_CORRUPTION)
    assert mb.num_masked > 0 and torch.equal(mb.replaced, mb.masked)


def test_bad_input_gets_clear_errors():
    ids, attn = make_batch(2, 10)
    with pytest.raises(TypeError, match="Corruption"):
        run(ids, attn, corruption=0.15)
    with pytest.raises(ValueError, match="batch, seq_len"):
        run(ids[0], None)
    with pytest.raises(ValueError, match="integer"):
        run(ids.float(), attn)
    with pytest.raises(ValueError, match=r"\[0, 1000\)"):
        run(ids + V, attn)
    with pytest.raises(ValueError, match="attention_mask shape"):
        run(ids, attn[:, :5])
    with pytest.raises(ValueError, match="whole_word_starts"):
        run(ids, attn, whole_word_starts=attn[:, :5].bool())
    with pytest.raises(ValueError, match="max_predictions"):
        run(ids, attn, max_predictions=0)
    with pytest.raises(ValueError, match="every vocabulary id is special"):
        mask_tokens(torch.tensor([[1, 2]]), mask_token_id=MASK, vocab_size=3, special_ids=(0, 1, 2))


def test_fixed_count_chooses_round_select_times_length_per_sequence():
    ids, attn = make_batch(64, 40, seed=5)
    mb = run(ids, attn, corruption=GOOGLE_CORRUPTION)
    lengths = attn.sum(1)  # [CLS] and [SEP] count, as in Google's create_pretraining_data.py
    expected = [max(1, round(0.15 * int(n))) for n in lengths]
    assert mb.masked.sum(1).tolist() == expected
    assert not (mb.masked & ((ids == CLS) | (ids == SEP) | (attn == 0))).any()
    # the same coins as the per-token recipe: only the choice of M differs, the split does not
    per_token = run(ids, attn)
    both = mb.masked & per_token.masked
    assert torch.equal(mb.replaced[both], per_token.replaced[both])


def test_fixed_count_with_whole_words_never_overshoots_and_is_never_empty():
    tokens = [["[CLS]", "the", "mill", "##er", "##s", "saw", "a", "river", "##bank", "[SEP]"]] * 50
    starts = word_starts(tokens)
    ids = torch.randint(len(SPECIAL), V, (50, 10), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = CLS, SEP
    for select in (0.05, 0.3, 0.6):
        mb = run(ids, corruption=Corruption(select=select, fixed_count=True), whole_word_starts=starts)
        counts = mb.masked.sum(1)
        assert (counts >= 1).all() and (counts <= max(1, round(select * 10))).all()
        group = torch.cumsum(starts.long(), 1)  # a word is masked whole or not at all
        for row in range(50):
            for w in group[row][mb.masked[row]].unique():
                assert mb.masked[row][(group[row] == w) & (ids[row] != CLS) & (ids[row] != SEP)].all()


def test_random_from_all_may_draw_special_tokens():
    ids = torch.randint(len(SPECIAL), 12, (400, 30), generator=torch.Generator().manual_seed(0))
    recipe = dict(select=0.5, mask=0.0, random=1.0, keep=0.0)
    plain = mask_tokens(ids, mask_token_id=MASK, vocab_size=12, special_ids=SPECIAL,
                        corruption=Corruption(**recipe), generator=torch.Generator().manual_seed(1))
    google = mask_tokens(ids, mask_token_id=MASK, vocab_size=12, special_ids=SPECIAL,
                         corruption=Corruption(**recipe, random_from_all=True),
                         generator=torch.Generator().manual_seed(1))
    special = torch.tensor(SPECIAL)
    assert not torch.isin(plain.input_ids[plain.randomized], special).any()
    assert torch.isin(google.input_ids[google.randomized], special).any()



# ---------------------------------------------------------------- SpanBERT's span masking

def _spans(row_masked: list[bool]) -> list[tuple[int, int]]:
    """The runs of M in one row, as (start, end) with end exclusive."""
    runs, start = [], None
    for t, m in enumerate(row_masked + [False]):
        if m and start is None:
            start = t
        elif not m and start is not None:
            runs.append((start, t))
            start = None
    return runs


def test_span_masking_chooses_round_select_times_the_real_tokens_in_spans():
    ids, attn = make_batch(64, 48, seed=3)
    out = run(ids, attn, corruption=Corruption(span_p=0.2))  # every piece a word of its own
    real = (attn.bool() & ~torch.isin(ids, torch.tensor(SPECIAL)))
    budget = torch.round(0.15 * real.sum(1).double()).long().clamp(min=1)
    assert torch.equal(out.masked.sum(1), budget)
    assert not (out.masked & ~real).any()
    # spans, not single tokens: far fewer runs than masked tokens
    runs = [len(_spans(row)) for row in out.masked.tolist()]
    assert sum(runs) < 0.6 * out.num_masked


def _span_of(out, b: int, k: int) -> torch.Tensor:
    return (out.span[b] == k).nonzero().squeeze(1)


def test_span_lengths_follow_the_cut_geometric_distribution():
    """The first span of each row, in a row of single-piece words long enough that the budget
    never cuts it: its length has SpanBERT's mean, sum_k k p(1-p)^(k-1) / Z over k = 1 .. 10,
    3.797 for p = 0.2, within five standard errors."""
    lengths = SPANBERT_CORRUPTION.span_lengths()
    mean = float((lengths * torch.arange(1, 11)).sum())
    assert abs(mean - 3.797) < 1e-3 and abs(float(lengths.sum()) - 1) < 1e-12
    T = 502  # 500 real tokens; a budget of 11 is more than one span of at most 10 can take
    ids = torch.randint(len(SPECIAL), V, (400, T), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = CLS, SEP
    out = run(ids, corruption=Corruption(select=11 / 500, span_p=0.2), seed=1)
    first = [_span_of(out, b, 1) for b in range(len(ids))]
    assert all(len(f) and bool((f.diff() == 1).all()) for f in first), "a span is one run"
    seen = torch.tensor([len(f) for f in first if int(f[-1]) < T - 2], dtype=torch.float64)
    assert len(seen) > 350  # only spans that ran into [SEP] are left out
    se = float(seen.std()) / len(seen) ** 0.5
    assert abs(float(seen.mean()) - mean) < 5 * se, (float(seen.mean()), mean)
    assert int(seen.max()) <= 10


def test_a_span_is_masked_randomized_or_kept_as_a_whole():
    ids, attn = make_batch(200, 64, seed=5)
    out = run(ids, attn, corruption=Corruption(span_p=0.2), seed=2)
    assert torch.equal(out.span > 0, out.masked)
    counts = {"replaced": 0, "randomized": 0, "kept": 0}
    for b in range(len(ids)):
        for k in out.span[b].unique().tolist():
            if k == 0:
                continue
            at = _span_of(out, b, k)
            kinds = [kind for kind in counts if bool(getattr(out, kind)[b, at].all())]
            assert len(kinds) == 1, f"row {b}, span {k}: mixed kinds"
            counts[kinds[0]] += 1
    total = sum(counts.values())
    assert all(within_5_sigma(counts[k], total, p) for k, p in
               (("replaced", 0.8), ("randomized", 0.1), ("kept", 0.1))), counts


def test_span_masking_keeps_whole_words_and_is_reproducible():
    tokens = [["[CLS]"] + [w for k in range(20) for w in (f"w{k}", f"##a{k}", f"##b{k}")] + ["[SEP]"]]
    starts = word_starts(tokens)
    ids = torch.randint(len(SPECIAL), V, starts.shape, generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = CLS, SEP
    outs = [run(ids.repeat(30, 1), corruption=Corruption(select=0.3, span_p=0.2, whole_word=True),
                whole_word_starts=starts.repeat(30, 1), seed=4) for _ in range(2)]
    assert torch.equal(outs[0].input_ids, outs[1].input_ids)
    m = outs[0].masked[:, 1:-1].view(30, 20, 3)
    # every word is whole, except at most the last one chosen, which the budget may cut
    partial = (m.any(2) & ~m.all(2)).sum(1)
    assert int(partial.max()) <= 1


def test_span_recipes_are_checked():
    with pytest.raises(ValueError, match="span_p"):
        Corruption(span_p=0.0)
    with pytest.raises(ValueError, match="max_span"):
        Corruption(span_p=0.2, max_span=0)
    with pytest.raises(ValueError, match="fixed_count"):
        Corruption(span_p=0.2, fixed_count=True)
    with pytest.raises(ValueError, match="masks no spans"):
        BERT_CORRUPTION.span_lengths()
    with pytest.raises(ValueError, match="pass whole_word_starts"):
        run(make_batch(2, 8)[0], corruption=SPANBERT_CORRUPTION)


def test_a_whole_word_recipe_in_a_batch_masks_whole_words(tok):
    """make_batch finds the word starts itself when the recipe asks for whole words."""
    from mlm_lib.batches import make_batch as collate_and_mask
    from mlm_lib.pretraining import PretrainingExample

    text = "photosynthesis and unhappiness are studied by biologists and psychologists"
    enc = tok.encode(" ".join([text] * 3))
    example = PretrainingExample(enc.input_ids, enc.token_type_ids, is_next=1)
    batch = collate_and_mask([example] * 64, tok, Corruption(select=0.3, whole_word=True),
                             torch.Generator().manual_seed(0))
    starts = word_starts(torch.tensor([enc.input_ids]), tok.ids_to_tokens)[0]
    word = torch.cumsum(starts.long(), 0)
    for row in batch["masked"]:
        for w in word.unique():
            at = word == w
            assert bool(row[at].all()) or not bool(row[at].any()), "a word split across M"
