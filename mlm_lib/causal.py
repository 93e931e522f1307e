"""The next-token model BERT is compared with: GPT's objective on BERT's encoder, and generation.

GPT predicts x_{i+1} from x_1..x_i; BERT fills blanks from both sides. The same encoder can be
trained either way: :func:`train_next_token` trains it on GPT's objective with a causal attention
bias (position i sees positions up to i) or a bidirectional one (position i also sees i+1, which
*is* the answer). :func:`generate_left_to_right` goes the other way and uses a masked model as if
it were GPT, one [MASK] at a time; :func:`generate_by_refilling` asks it the question it was
trained on instead, blanks with text on both sides, and rewrites a whole draft.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mlm_lib.loop import Objective, Sums, evaluate, train_loop
from mlm_lib.loss import masked_nll
from mlm_lib.model import BertForPreTraining, attention_bias, check_model_fits
from mlm_lib.optim import build_optimizer
from mlm_lib.pretraining import PreparedData, PretrainingExample

NEXT_TOKEN_EVAL_ROWS = 256  # held-out windows scored after next-token training (one batch)


def token_windows(examples: Sequence[PretrainingExample], special_ids: Sequence[int] | frozenset[int],
                  length: int) -> torch.Tensor:
    """The examples' tokens (special tokens dropped) as one stream cut into rows of ``length``."""
    special = set(special_ids)
    stream = [t for e in examples for t in e.input_ids if t not in special]
    n = len(stream) // length
    if n == 0:
        raise ValueError(f"not enough tokens for one window of length {length}")
    return torch.tensor(stream[:n * length], dtype=torch.long).view(n, length)


@dataclass
class NextTokenRun:
    """A next-token predictor trained with one attention bias."""

    causal: bool
    steps: list[int]
    train_loss: list[float]
    valid_loss: float
    valid_accuracy: float
    model: torch.nn.Module = field(repr=False)


def next_token_objective(bias: torch.Tensor) -> Objective:
    """GPT's objective on rows of tokens: predict x_{i+1} at every position i, through the
    encoder with the attention ``bias``; the MLM head scores the whole vocabulary. Every position
    but the last is a target, so the loss is the MLM loss's sum with M = all of them, computed by
    the same :func:`~mlm_lib.loss.masked_nll` as BERT's training (no [B, n, V] logits kept)."""
    def objective(model: BertForPreTraining, rows: torch.Tensor) -> tuple[torch.Tensor, Sums]:
        h = model.bert(rows, attn_bias=bias).last_hidden_state[:, :-1]
        targets = rows[:, 1:].reshape(-1)
        nll, predictions = masked_nll(model.cls.transform_hidden(h.reshape(-1, h.size(-1))),
                                      model.bert.embeddings.word_embeddings.weight,
                                      model.cls.predictions_bias, targets)
        nll_sum, n = nll.sum(), targets.numel()
        correct = (predictions == targets).sum()
        return nll_sum / n, {"loss": (nll_sum, n), "accuracy": (correct, n)}
    return objective


def _random_windows(rows: torch.Tensor, batch_size: int, seed: int) -> Iterator[list[torch.Tensor]]:
    """Random windows for ever, one micro-batch per step, drawn by a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    while True:
        yield [rows[torch.randint(len(rows), (batch_size,), generator=g)]]


def train_next_token(model: BertForPreTraining, data: PreparedData, causal: bool, steps: int = 150,
                     seed: int = 0, seq_len: int = 32, batch_size: int = 32, lr: float = 3e-3,
                     log_every: int = 10) -> NextTokenRun:
    """Train a copy of ``model`` to predict x_{i+1} at every position i (GPT's objective).

    With ``causal=False`` position i can attend to position i+1, which *is* the answer: the
    loss collapses because the model learns to copy, however small it is. With ``causal=True``
    it must guess from the left, as a language model has to at generation time.

    ``model`` itself is left as it is, so two runs can start from one model. A trained one (the
    book's) is the better start: a fresh one first has to discover word order, which takes longer
    than a chapter can wait. ``data``'s examples are cut into windows of ``seq_len`` tokens.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    tok = data.tokenizer
    check_model_fits(model, tok.vocab_size, seq_len)
    train_rows = token_windows(data.train_examples, tok.special_ids, seq_len)
    valid_rows = token_windows(data.valid_examples, tok.special_ids, seq_len)
    model = copy.deepcopy(model).float()
    torch.manual_seed(seed)
    objective = next_token_objective(attention_bias(seq_len, causal))
    state = train_loop(model, objective, _random_windows(train_rows, batch_size, seed),
                       build_optimizer(model, lr), None, steps,
                       log_every=log_every)  # a constant learning rate
    valid = evaluate(model, objective, [valid_rows[:NEXT_TOKEN_EVAL_ROWS]])
    model.eval()
    curve = state.history.columns("step", "loss", kind="train")
    return NextTokenRun(causal, curve["step"], curve["loss"], valid["loss"], valid["accuracy"], model)


@torch.no_grad()
def generate_left_to_right(model: torch.nn.Module, tokenizer: Any, prompt: str,
                           num_tokens: int = 10) -> list[str]:
    """Use a BERT as if it were GPT: put [MASK] after the text, take the most probable piece,
    append it, repeat. Returns the generated pieces (the prompt not included)."""
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    model.eval()
    ids = tokenizer.encode(prompt).input_ids[:-1]  # [CLS] prompt, without the final [SEP]
    banned = torch.tensor(sorted(tokenizer.special_ids))
    out: list[int] = []
    for _ in range(num_tokens):
        x = torch.tensor([ids + out + [tokenizer.mask_id, tokenizer.sep_id]])
        masked = x == tokenizer.mask_id
        logits = model(x, masked_positions=masked).mlm_logits[0]
        logits[banned] = float("-inf")
        out.append(int(logits.argmax()))
    return tokenizer.convert_ids_to_tokens(out)


@torch.no_grad()
def generate_by_refilling(model: torch.nn.Module, tokenizer: Any, prompt: str, num_tokens: int = 10,
                          iterations: int = 4) -> list[str]:
    """Mask-predict (Ghazvininejad et al. 2019): fill ``num_tokens`` blanks after the prompt at
    once, then ``iterations - 1`` times re-mask the least sure of them and fill those again.

    At iteration t (0-based) of T, the n = num_tokens * (T - t) // T pieces the model gave the
    lowest probability (its softmax over all of V) when it last wrote them are masked again (all of them at t = 0), so every
    later guess sees a whole draft on both sides: the question MLM trained. Deterministic: the most
    probable piece each time, ties between equally unsure positions broken by position, so a
    browser can repeat it exactly. Returns the generated pieces (the prompt not included).
    """
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    model.eval()
    prompt_ids = tokenizer.encode(prompt).input_ids[:-1]  # [CLS] prompt, without the final [SEP]
    banned = torch.tensor(sorted(tokenizer.special_ids))
    start = len(prompt_ids)
    x = torch.tensor([prompt_ids + [tokenizer.mask_id] * num_tokens + [tokenizer.sep_id]])
    sure = torch.zeros(num_tokens)  # the probability each piece had when it was written
    for t in range(iterations):
        n = num_tokens * (iterations - t) // iterations
        if n == 0:
            break
        if t > 0:  # re-mask the n least sure (stable: ties go to the earlier position)
            order = torch.sort(sure, stable=True).indices[:n]
            x[0, start + order] = tokenizer.mask_id
        masked = x == tokenizer.mask_id
        logits = model(x, masked_positions=masked).mlm_logits.float()  # [n, V], in position order
        probs = logits.softmax(-1)  # over all of V, as P(x_i | x without M) is
        logits[:, banned] = float("-inf")  # ...but a special piece is never written
        chosen = logits.argmax(-1)
        positions = masked[0].nonzero().flatten()
        x[0, positions] = chosen
        sure[positions - start] = probs.gather(1, chosen[:, None]).squeeze(1)
    return tokenizer.convert_ids_to_tokens(x[0, start:start + num_tokens].tolist())
