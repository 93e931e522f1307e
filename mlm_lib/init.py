"""How a pretraining run's model starts: a fresh BERT of a preset size, optionally with the two
starts that get a small model off the unigram plateau sooner (a sinusoidal position table, the
output bias at the unigram log-probabilities), or the weights of an earlier run."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

from mlm_lib.checkpoint import load_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.model import BertForPreTraining
from mlm_lib.pretraining import PretrainingExample

POSITIONS_KEY = "bert.embeddings.position_embeddings.weight"
# Every column of a sin/cos table has a mean square of 1/2, so its RMS is sqrt(1/2); dividing by it
# and multiplying by initializer_range gives the table the scale of the other embeddings.
SINUSOID_RMS = math.sqrt(0.5)
SINUSOID_BASE = 10000.0  # the wavelengths' base of "Attention Is All You Need"
POSITION_INITS = ("normal", "sinusoidal")


def build_model(config: BertConfig, seed: int = 0, position_init: str = "normal",
                init_from: str | os.PathLike | None = None) -> BertForPreTraining:
    """A fresh ``BertForPreTraining`` of ``config``, its weights drawn from ``seed``.
    ``position_init="sinusoidal"`` starts the learned position table from the sin/cos table;
    ``init_from`` loads an earlier run's weights. A training run's arguments come from
    :meth:`~mlm_lib.train.TrainConfig.model_options`."""
    if position_init not in POSITION_INITS:
        raise ValueError(f"position_init must be 'normal' or 'sinusoidal', got {position_init!r}")
    model = BertForPreTraining(config, seed=seed)
    if position_init == "sinusoidal":
        table = model.bert.embeddings.position_embeddings.weight
        with torch.no_grad():
            table.copy_(sinusoidal_positions(*table.shape) * config.initializer_range / SINUSOID_RMS)
    if init_from:
        load_initial_weights(model, init_from)
    return model


def sinusoidal_positions(num_positions: int, dim: int) -> torch.Tensor:
    """The Transformer's sin/cos position table: the dot product of two rows depends only on
    their offset, so "look at my left neighbour" is one linear map away from the start. BERT
    learns its table from random; starting here (scaled to the token embeddings' size, and still
    learned) saves a short run the steps it would spend discovering word order."""
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]
    freq = torch.exp(-math.log(SINUSOID_BASE) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : dim // 2]
    return table.float()


def load_initial_weights(model: torch.nn.Module, path: str | os.PathLike) -> None:
    """Start ``model`` from a checkpoint's weights (continued pretraining), in place.

    The checkpoint may have a *shorter* position table than the model: its rows fill the first
    positions and the model's own initial rows stay for the rest. That is how BERT was trained:
    90% of the steps on sequences of 128 tokens, which are cheap, then 10% on 512 to learn the
    remaining positions. Any other difference in shape or names is a ValueError that lists it.
    """
    ck = load_checkpoint(path, weights_only=True)
    own = model.state_dict()
    sd = {k: v.to(own[k].dtype) if k in own and v.is_floating_point() else v
          for k, v in ck.state_dict.items()}
    if POSITIONS_KEY in sd and POSITIONS_KEY in own:
        old, table = sd[POSITIONS_KEY], own[POSITIONS_KEY].clone()
        if old.shape[0] > table.shape[0] or old.shape[1:] != table.shape[1:]:
            raise ValueError(f"{path}: position table {tuple(old.shape)} does not fit the model's "
                             f"{tuple(table.shape)}")
        table[: old.shape[0]] = old
        sd[POSITIONS_KEY] = table
    wrong = [f"{k} {tuple(v.shape)} (model {tuple(own[k].shape)})" for k, v in sd.items()
             if k in own and v.shape != own[k].shape]
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    if wrong or missing or unexpected:
        raise ValueError(f"{path} does not fit the model: shapes {wrong[:5]}, missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    model.load_state_dict(sd)


def unigram_log_probs(examples: Sequence[PretrainingExample], vocab_size: int,
                      special_ids: Sequence[int] | frozenset[int]) -> torch.Tensor:
    """log P(token) counted on the training examples (add-one smoothed, special tokens at one
    count), shifted to mean 0: the output bias that predicts the unigram distribution."""
    counts = torch.ones(vocab_size, dtype=torch.float64)
    ids = torch.tensor([t for e in examples for t in e.input_ids], dtype=torch.long)
    counts += torch.bincount(ids, minlength=vocab_size)[:vocab_size].double()
    counts[list(special_ids)] = 1.0
    logp = (counts / counts.sum()).log()
    return (logp - logp.mean()).float()


def init_unigram_bias(model: BertForPreTraining, examples: Sequence[PretrainingExample],
                      special_ids: Sequence[int] | frozenset[int]) -> None:
    """Set the MLM output bias to :func:`unigram_log_probs` of the training examples.

    A fresh BERT spends its first steps learning the unigram distribution, which is a constant:
    it can be written down. Starting there, the gradient goes to the context from step one."""
    with torch.no_grad():
        model.cls.predictions_bias.copy_(unigram_log_probs(examples, model.config.vocab_size, special_ids))
