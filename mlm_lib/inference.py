"""Asking a trained BERT questions: fill the blanks, look at attention and hidden states, and
score a sentence for a chosen set M.

Every function takes a ``BertForPreTraining`` and a ``WordPieceTokenizer`` and runs in
``eval()`` mode under ``torch.no_grad()``: no dropout, so the same question gets the same answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mlm_lib.checkpoint import load_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.loss import target_log_probs
from mlm_lib.model import BertForPreTraining

# Keeps the renormalisation of whole-word probabilities from dividing by zero when every whole
# word got probability 0 (an underflow): far below any real probability, yet still a normal
# float32 number.
MIN_TOTAL_PROB = 1e-30
# A load error lists at most this many missing or unexpected weight names: enough to see the pattern.
SHOWN_KEYS = 5


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> torch.nn.Module:
    """A ``BertForPreTraining`` from a checkpoint folder (weights only; fp16 weights become fp32)."""
    ck = load_checkpoint(path, weights_only=True)
    model = BertForPreTraining(BertConfig.from_dict(ck.config))
    sd = {k: v.float() if v.is_floating_point() else v for k, v in ck.state_dict.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ValueError(f"checkpoint {path} does not fit its config: missing {missing[:SHOWN_KEYS]}, "
                         f"unexpected {unexpected[:SHOWN_KEYS]}")
    return model.to(device).eval()


def _encode(tokenizer: Any, text: str, pair: str | None, device: torch.device) -> tuple[dict[str, torch.Tensor], list[str]]:
    enc = tokenizer.encode(text, pair=pair)
    ids = torch.tensor([enc.input_ids], device=device)
    tt = torch.tensor([enc.token_type_ids], device=device)
    return {"input_ids": ids, "token_type_ids": tt}, list(enc.tokens)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@dataclass
class MaskPrediction:
    """The top-k candidates for one [MASK]: position in the token list, tokens, probabilities."""

    position: int
    tokens: list[str]
    probs: list[float]

    def __str__(self) -> str:
        return ", ".join(f"{t} {p:.3f}" for t, p in zip(self.tokens, self.probs))


@torch.no_grad()
def fill_mask(model: torch.nn.Module, tokenizer: Any, text: str, top_k: int = 5,
              whole_words: bool = False, pair: str | None = None) -> list[MaskPrediction]:
    """Top-k fillers for every [MASK] in ``text``, each predicted from the same x_\\M (the masks
    do not see each other's answers, exactly as in pretraining).

    ``whole_words=True`` keeps only pieces that are whole words (no ``##`` continuation, no
    special tokens), renormalising their probabilities: the answer is a word a reader would write.
    """
    if top_k <= 0:
        raise ValueError(f"top_k must be positive, got {top_k}")
    model.eval()
    batch, tokens = _encode(tokenizer, text, pair, _device(model))
    masked = batch["input_ids"] == tokenizer.mask_id
    if not bool(masked.any()):
        raise ValueError(f"no [MASK] token in {text!r}: write [MASK] where the blank is")
    out = model(**batch, masked_positions=masked)
    probs = torch.softmax(out.mlm_logits.float(), dim=-1)
    if whole_words:
        keep = torch.tensor([not (t.startswith("##") or i in tokenizer.special_ids)
                             for i, t in enumerate(tokenizer.ids_to_tokens)], device=probs.device)
        probs = probs * keep
        probs = probs / probs.sum(-1, keepdim=True).clamp_min(MIN_TOTAL_PROB)
    top = probs.topk(min(top_k, probs.size(-1)), dim=-1)
    positions = masked[0].nonzero().flatten().tolist()
    return [MaskPrediction(pos, tokenizer.convert_ids_to_tokens(i.tolist()), p.tolist())
            for pos, i, p in zip(positions, top.indices, top.values)]


@torch.no_grad()
def attention_probs(model: torch.nn.Module, tokenizer: Any, text: str, pair: str | None = None
                    ) -> tuple[list[str], torch.Tensor]:
    """(tokens, attention) with attention[layer, head, query, key] = softmax(QK^T / sqrt(d))."""
    model.eval()
    batch, tokens = _encode(tokenizer, text, pair, _device(model))
    out = model(**batch, output_attentions=True)
    return tokens, torch.stack([a[0] for a in out.attentions]).float().cpu()


@torch.no_grad()
def hidden_states(model: torch.nn.Module, tokenizer: Any, text: str, pair: str | None = None
                  ) -> tuple[list[str], torch.Tensor]:
    """(tokens, states) with states[k] = the vectors after layer k ([L + 1, T, H]; k = 0 is the
    embedding output)."""
    model.eval()
    batch, tokens = _encode(tokenizer, text, pair, _device(model))
    out = model(**batch, output_hidden_states=True)
    return tokens, torch.stack([h[0] for h in out.hidden_states]).float().cpu()


@dataclass
class SentenceLoss:
    """L = -sum_{i in M} log P(x_i | x_\\M) for one sentence, with its pieces."""

    tokens: list[str]
    positions: list[int]
    log_probs: list[float]
    predicted: list[str]

    @property
    def loss(self) -> float:
        return -sum(self.log_probs)


@torch.no_grad()
def sentence_loss(model: torch.nn.Module, tokenizer: Any, text: str,
                  positions: Sequence[int] | None = None, words: Sequence[str] | None = None,
                  pair: str | None = None) -> SentenceLoss:
    """Mask the chosen set M (token ``positions`` in ``[CLS] ... [SEP]``, or every piece of the
    given ``words``), put [MASK] there, and return log P(x_i | x_\\M) for each i in M."""
    model.eval()
    batch, tokens = _encode(tokenizer, text, pair, _device(model))
    ids = batch["input_ids"]
    if (positions is None) == (words is None):
        raise ValueError("give exactly one of positions (token indices) or words")
    if words is not None:
        pieces = [tokenizer.tokenize(w) for w in words]
        chosen: list[int] = []
        for w, pc in zip(words, pieces):
            hit = [i for i in range(len(tokens) - len(pc) + 1) if tokens[i:i + len(pc)] == pc]
            if not hit:
                raise ValueError(f"word {w!r} (pieces {pc}) is not in {text!r}")
            chosen.extend(range(hit[0], hit[0] + len(pc)))
        positions = chosen
    positions = sorted(set(int(p) for p in positions))
    if not positions:
        raise ValueError("M is empty: choose at least one position")
    bad = [p for p in positions if not 0 <= p < len(tokens) or int(ids[0, p]) in tokenizer.special_ids]
    if bad:
        raise ValueError(f"positions {bad} are outside the sentence or special tokens "
                         f"(tokens: {tokens})")
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[0, positions] = True
    corrupted = ids.masked_fill(masked, tokenizer.mask_id)
    out = model(corrupted, token_type_ids=batch["token_type_ids"], masked_positions=masked)
    lp = target_log_probs(out.mlm_logits, ids[masked])
    pred = tokenizer.convert_ids_to_tokens(out.mlm_logits.argmax(-1).tolist())
    return SentenceLoss(tokens, positions, lp.tolist(), pred)
