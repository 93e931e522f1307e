"""Chapter 8's fair test of BERT as a writer: left to right, by refilling, and a causal model.

Three writers continue the same prompts (the first words of sentences from the five articles the
book's model never read) by the same number of pieces, all greedy:

- **BERT, left to right**: :func:`~mlm_lib.causal.generate_left_to_right`, the question MLM never
  trained (a blank with only ``[SEP]`` after it);
- **BERT, refilling**: :func:`~mlm_lib.causal.generate_by_refilling`, mask-predict, blanks with
  text on both sides, the question MLM did train;
- **causal model**: the book's model trained on the next token with the causal mask for chapter
  8's 120 steps, writing as GPT does.

They are judged by what every text can be scored on, whoever wrote it: how often a piece repeats
a pair of pieces already written (loops), and how likely each pair of neighbouring pieces is under
counts of the training text (a bigram model none of the writers is). Each seed draws its own
prompts and trains its own causal model; the BERT writers are deterministic, so a seed changes
only their prompts. Differences are paired by seed.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Sequence

import torch

from mlm_lib.book.book_model import book_model, book_model_tokenizer
from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.causal import generate_by_refilling, generate_left_to_right, train_next_token
from mlm_lib.corpus import load_wikipedia, train_valid_split
from mlm_lib.model import BertForPreTraining, attention_bias
from mlm_lib.pretraining import SPLIT_SEED, VALID_FRACTION

ARMS = ("BERT, left to right", "BERT, refilling", "causal model")
PROMPTS_PER_SEED, PROMPT_WORDS, MIN_WORDS = 40, 4, 12
NUM_TOKENS = 12  # pieces each writer adds
ROUNDS = 10  # mask-predict's refilling rounds
CAUSAL = dict(steps=120, seq_len=32, lr=1e-3)  # chapter 8's next-token run


def prompts(seed: int, n: int = PROMPTS_PER_SEED) -> list[str]:
    """``n`` prompts, the first words of sentences of the unread articles, drawn with ``seed``."""
    _, unread = train_valid_split(load_wikipedia(), valid_fraction=VALID_FRACTION, seed=SPLIT_SEED)
    sentences = [s for d in unread for s in d.sentences if len(s.split()) >= MIN_WORDS]
    return [" ".join(s.split()[:PROMPT_WORDS]) for s in random.Random(seed).sample(sentences, n)]


@torch.no_grad()
def generate_causally(model: BertForPreTraining, tokenizer, prompt: str, num_tokens: int) -> list[str]:
    """Greedy next-token writing with the causal mask, on windows without special pieces, as the
    causal model was trained."""
    ids = [i for i in tokenizer.encode(prompt).input_ids if i not in tokenizer.special_ids]
    banned = torch.tensor(sorted(tokenizer.special_ids))
    model.eval()
    for _ in range(num_tokens):
        x = torch.tensor([ids])
        h = model.bert(x, attn_bias=attention_bias(len(ids), causal=True)).last_hidden_state[:, -1]
        logits = model.cls.mlm_logits(h, model.bert.embeddings.word_embeddings.weight)
        logits[:, banned] = float("-inf")
        ids.append(int(logits.argmax()))
    return tokenizer.convert_ids_to_tokens(ids[-num_tokens:])


@functools.lru_cache(maxsize=1)
def bigram_counts() -> tuple[Counter, Counter, int]:
    """(pair counts, piece counts, vocabulary size) of the training text's pieces."""
    data = chapter_data()
    special = data.tokenizer.special_ids
    pairs, pieces = Counter(), Counter()
    for e in data.train_examples:
        ids = [i for i in e.input_ids if i not in special]
        pieces.update(ids)
        pairs.update(zip(ids, ids[1:]))
    return pairs, pieces, data.tokenizer.vocab_size


def text_scores(prompt_ids: Sequence[int], written: Sequence[int]) -> dict[str, float]:
    """``repeats``: the share of written pieces that close a pair of pieces already in the text;
    ``bigram_nll``: the mean -log P(piece | the piece before) of the written pieces under add-one
    counts of the training text."""
    if not written:
        raise ValueError("nothing was written")
    pairs, pieces, vocab = bigram_counts()
    text, seen, repeated, nll = list(prompt_ids), set(zip(prompt_ids, prompt_ids[1:])), 0, 0.0
    for piece in written:
        if text:
            pair = (text[-1], piece)
            repeated += pair in seen
            seen.add(pair)
            nll -= math.log((pairs[pair] + 1) / (pieces[text[-1]] + vocab))
        text.append(piece)
    return {"repeats": repeated / len(written), "bigram_nll": nll / len(written)}


def generation_metrics(arm: str, seed: int) -> dict[str, float]:
    """One writer on ``seed``'s prompts: its mean scores over the prompts."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    tok, model = book_model_tokenizer(), book_model()
    if arm == ARMS[2]:
        causal = train_next_token(model, chapter_data(), causal=True, seed=seed, **CAUSAL).model
    totals: Counter = Counter()
    chosen = prompts(seed)
    for prompt in chosen:
        if arm == ARMS[0]:
            pieces = generate_left_to_right(model, tok, prompt, num_tokens=NUM_TOKENS)
        elif arm == ARMS[1]:
            pieces = generate_by_refilling(model, tok, prompt, num_tokens=NUM_TOKENS, iterations=ROUNDS)
        else:
            pieces = generate_causally(causal, tok, prompt, NUM_TOKENS)
        prompt_ids = [i for i in tok.encode(prompt).input_ids if i not in tok.special_ids]
        totals.update(text_scores(prompt_ids, tok.convert_tokens_to_ids(pieces)))
    return {k: v / len(chosen) for k, v in totals.items()}
