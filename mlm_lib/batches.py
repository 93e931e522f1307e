"""From examples to batches: the data order, collating, and choosing M.

Training draws a fresh M every time an example comes back (dynamic masking, as RoBERTa does);
evaluation draws M once, from its own seed, with every chosen token shown as [MASK], so every
model and every count baseline is scored on exactly the same blanks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from mlm_lib.masking import EVAL_CORRUPTION, Corruption, mask_tokens, word_starts
from mlm_lib.pretraining import PretrainingExample
from mlm_lib.tokenizer import pad_batch

# The held-out M is drawn from this seed, whatever the training seed, so that runs with
# different seeds are scored on the same blanks.
EVAL_SEED = 1234
EVAL_BATCH_SIZE = 64
# (seed, epoch) -> one integer seed for that epoch's order; a prime larger than any epoch count,
# so two (seed, epoch) pairs never share an order.
EPOCH_SEED_STRIDE = 1_000_003


def collate(examples: Sequence[PretrainingExample], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad examples on the right into LongTensors: input_ids, token_type_ids, attention_mask, is_next."""
    if len(examples) == 0:
        raise ValueError("cannot collate an empty list of examples")
    batch = pad_batch([e.input_ids for e in examples], [e.token_type_ids for e in examples], pad_id)
    batch["is_next"] = torch.tensor([int(e.is_next) for e in examples], dtype=torch.long)
    return batch


def _epoch_order(num_examples: int, seed: int, epoch: int) -> list[int]:
    """A permutation that depends only on (seed, epoch): resuming needs no saved RNG for it."""
    order = list(range(num_examples))
    random.Random(seed * EPOCH_SEED_STRIDE + epoch).shuffle(order)
    return order


class BatchStream:
    """Global batches of example indices, epoch after epoch; its position is two integers."""

    def __init__(self, num_examples: int, batch_size: int, seed: int) -> None:
        if num_examples < batch_size:
            raise ValueError(f"need at least one batch of examples: {num_examples} examples, "
                             f"batch_size {batch_size}")
        self.n, self.batch_size, self.seed = num_examples, batch_size, seed
        self.epoch, self.cursor = 0, 0
        self._order = _epoch_order(self.n, seed, 0)

    def next(self) -> list[int]:
        if self.cursor + self.batch_size > self.n:  # drop the ragged tail, reshuffle
            self.epoch, self.cursor = self.epoch + 1, 0
            self._order = _epoch_order(self.n, self.seed, self.epoch)
        idx = self._order[self.cursor:self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return idx

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self._order = _epoch_order(self.n, self.seed, self.epoch)


def make_batch(examples: Sequence[PretrainingExample], tokenizer: Any, corruption: Corruption,
               generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Collate examples and choose M: input_ids (x_\\M), labels, masked, token_type_ids,
    attention_mask, is_next."""
    batch = collate(list(examples), tokenizer.pad_id)
    starts = word_starts(batch["input_ids"], tokenizer.ids_to_tokens) if corruption.whole_word else None
    mb = mask_tokens(batch["input_ids"], mask_token_id=tokenizer.mask_id,
                     vocab_size=tokenizer.vocab_size, special_ids=tokenizer.special_ids,
                     attention_mask=batch["attention_mask"], corruption=corruption,
                     whole_word_starts=starts, generator=generator)
    return {**batch, "input_ids": mb.input_ids, "labels": mb.labels, "masked": mb.masked}


def masked_batches(examples: Sequence[PretrainingExample], tokenizer: Any,
                   corruption: Corruption = EVAL_CORRUPTION, seed: int = EVAL_SEED,
                   batch_size: int = EVAL_BATCH_SIZE, max_examples: int | None = None
                   ) -> list[dict[str, torch.Tensor]]:
    """Fixed held-out batches, M drawn once from ``seed`` and corrupted by ``corruption``.

    The default (every chosen token becomes [MASK]) is the usual fill-the-blank test;
    ``Corruption(mask=0, keep=1)`` asks for the token at positions the model sees unchanged,
    ``Corruption(mask=0, random=1)`` asks it to repair random replacements: two tests with no
    [MASK] in the input at all."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    ex = list(examples)[:max_examples] if max_examples else list(examples)
    if not ex:
        raise ValueError("no examples to evaluate on")
    g = torch.Generator().manual_seed(seed)
    return [make_batch(ex[i:i + batch_size], tokenizer, corruption, g)
            for i in range(0, len(ex), batch_size)]
