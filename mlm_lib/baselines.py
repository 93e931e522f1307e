"""Count baselines for filling a blank, on token ids: what a BERT has to beat.

Three models, all counted on the training split with the same tokenizer as the BERT:

- ``unigram``          always the most frequent token (knows nothing about context)
- ``left_bigram``      the most frequent token after the left neighbour (one-directional, like a
                       tiny left-to-right language model)
- ``both_neighbours``  the most frequent token between the left and the right neighbour (the
                       smallest model that uses *both* directions, BERT's whole point)

Unseen contexts back off: both-neighbours -> left-bigram -> unigram. Ties go to the smaller id, so
results are deterministic. Predictions read the neighbours from the corrupted input x_\\M, exactly
what the BERT sees; a neighbour that is itself [MASK] is an unseen context and backs off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mlm_lib.pretraining import PreparedData

# The id that stands for "no neighbour here" (the edge of a sequence, or padding). Contexts are
# encoded with every id shifted up by one, which makes it 0.
NO_NEIGHBOUR = -1


def _best_per_context(context: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct context, the most frequent target (ties: smallest id).
    Returns (sorted unique contexts, best target for each)."""
    if context.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs = np.stack([context, target], axis=1)
    uniq, counts = np.unique(pairs, axis=0, return_counts=True)  # sorted by context, then target
    # order within each context: count descending, then target ascending
    order = np.lexsort((uniq[:, 1], -counts, uniq[:, 0]))
    uniq = uniq[order]
    first = np.ones(len(uniq), dtype=bool)
    first[1:] = uniq[1:, 0] != uniq[:-1, 0]
    return uniq[first, 0], uniq[first, 1]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised dictionary lookup on sorted keys: (found mask, value or -1)."""
    if keys.size == 0:
        return np.zeros(query.shape, bool), np.full(query.shape, -1, np.int64)
    idx = np.searchsorted(keys, query).clip(0, len(keys) - 1)
    found = keys[idx] == query
    return found, np.where(found, values[idx], -1)


@dataclass
class CountBaselines:
    """Most-frequent-token predictors fitted by :meth:`fit` on lists of token ids."""

    vocab_size: int
    unigram: int = -1
    left_keys: np.ndarray | None = None
    left_best: np.ndarray | None = None
    both_keys: np.ndarray | None = None
    both_best: np.ndarray | None = None
    num_tokens: int = 0

    @classmethod
    def fit(cls, sequences: Iterable[Sequence[int]], vocab_size: int,
            special_ids: Iterable[int] = ()) -> "CountBaselines":
        """Count on whole sequences (e.g. ``[CLS] A [SEP] B [SEP]``). Special tokens are context
        but never targets, because masking never chooses them."""
        if vocab_size <= 0:
            raise ValueError(f"vocab_size must be positive, got {vocab_size}")
        specials = np.array(sorted(set(int(i) for i in special_ids)), dtype=np.int64)
        lefts, rights, targets = [], [], []
        for seq in sequences:
            a = np.asarray(seq.tolist() if isinstance(seq, torch.Tensor) else seq, dtype=np.int64)
            if a.size == 0:
                continue
            if a.min() < 0 or a.max() >= vocab_size:
                raise ValueError(f"token id out of range [0, {vocab_size}) in a training sequence")
            padded = np.concatenate([[NO_NEIGHBOUR], a, [NO_NEIGHBOUR]])
            lefts.append(padded[:-2])
            rights.append(padded[2:])
            targets.append(a)
        if not targets:
            raise ValueError("cannot fit count baselines on an empty corpus")
        left, right, tgt = (np.concatenate(x) for x in (lefts, rights, targets))
        keep = ~np.isin(tgt, specials)
        left, right, tgt = left[keep], right[keep], tgt[keep]
        if tgt.size == 0:
            raise ValueError("the corpus has no non-special tokens to count")
        counts = np.bincount(tgt, minlength=vocab_size)
        v = vocab_size + 1  # ids shifted by one (NO_NEIGHBOUR becomes 0) take vocab_size + 1 values
        out = cls(vocab_size=vocab_size, unigram=int(np.argmax(counts)), num_tokens=int(tgt.size))
        out.left_keys, out.left_best = _best_per_context(left + 1, tgt)
        out.both_keys, out.both_best = _best_per_context((left + 1) * v + (right + 1), tgt)
        return out

    def predict(self, input_ids: torch.Tensor, masked: torch.Tensor,
                attention_mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Predictions of the three models at the masked positions, in row-major order (the order
        of ``input_ids[masked]``), each a 1-D LongTensor."""
        if self.left_keys is None:
            raise ValueError("call CountBaselines.fit before predict")
        if input_ids.dim() != 2 or masked.shape != input_ids.shape:
            raise ValueError(f"input_ids and masked must both be [B, T], got {tuple(input_ids.shape)} "
                             f"and {tuple(masked.shape)}")
        ids = input_ids.detach().cpu().long()
        if attention_mask is not None:
            ids = ids.masked_fill(attention_mask.detach().cpu() == 0, NO_NEIGHBOUR)
        padded = torch.nn.functional.pad(ids, (1, 1), value=NO_NEIGHBOUR).numpy()
        b, t = np.nonzero(masked.detach().cpu().numpy())
        left, right = padded[b, t], padded[b, t + 2]
        n = b.size
        v = self.vocab_size + 1
        uni = np.full(n, self.unigram, np.int64)
        found_l, best_l = _lookup(self.left_keys, self.left_best, left + 1)
        bigram = np.where(found_l, best_l, uni)
        found_b, best_b = _lookup(self.both_keys, self.both_best, (left + 1) * v + (right + 1))
        both = np.where(found_b, best_b, bigram)
        return {"unigram": torch.from_numpy(uni), "left_bigram": torch.from_numpy(bigram),
                "both_neighbours": torch.from_numpy(both)}

    def accuracy(self, input_ids: torch.Tensor, masked: torch.Tensor, labels: torch.Tensor,
                 attention_mask: torch.Tensor | None = None) -> dict[str, tuple[int, int]]:
        """(correct, total) per baseline; ``labels`` is [B, T] with the original ids at M."""
        preds = self.predict(input_ids, masked, attention_mask)
        target = labels.detach().cpu().long()[masked.detach().cpu()]
        return {k: (int((p == target).sum()), int(target.numel())) for k, p in preds.items()}


def fit_baselines(data: PreparedData) -> CountBaselines:
    """Count baselines on the training split's examples (the same pieces the BERT sees)."""
    tok = data.tokenizer
    return CountBaselines.fit((e.input_ids for e in data.train_examples), tok.vocab_size,
                              tok.special_ids)
