"""The masked language modelling loss, one function per piece of the formula

    L = -sum_{i in M} log P(x_i | x_\\M),    P(. | x_\\M) = softmax over the whole vocabulary V

where M is the set of masked positions and x_\\M the corrupted input the model sees.

Labels come in two layouts, matching the two modes of ``BertForPreTraining``:
- 1-D ``[|M|]`` aligned with masked-only logits ``[|M|, V]``;
- ``[B, T]`` with ``IGNORE_INDEX`` (-100) outside M, aligned with full-position logits ``[B, T, V]``.
Positions labelled ``IGNORE_INDEX`` (everything outside M, padding included) never contribute.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mlm_lib.masking import IGNORE_INDEX  # the label of a position outside M (-100, as in PyTorch)


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """log P(w | x_\\M) for every word w of V: a log-softmax over the last dimension."""
    return torch.log_softmax(logits.float(), dim=-1)


def _in_m(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keep the rows of ``logits`` whose label is in M: ([|M|, V], [|M|])."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"labels shape {tuple(labels.shape)} does not match logits "
                         f"{tuple(logits.shape)} without its vocabulary dimension")
    in_m = labels != IGNORE_INDEX
    if labels.dim() == 1 and bool(in_m.all()):  # masked-only logits: already just M, skip the copy
        return logits, labels
    return logits[in_m], labels[in_m]


def target_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log P(x_i | x_\\M) for each i in M: the log-probability of the original token x_i.

    Returns a 1-D tensor with one entry per position in M (IGNORE_INDEX positions are dropped).
    """
    logits, targets = _in_m(logits, targets)
    if targets.numel() and (targets.min() < 0 or targets.max() >= logits.size(-1)):
        raise ValueError(f"targets must be token ids in [0, {logits.size(-1)}) or {IGNORE_INDEX}")
    return log_probs(logits).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def mlm_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L = -sum_{i in M} log P(x_i | x_\\M), exactly. An empty M gives 0 (an empty sum)."""
    return -target_log_probs(logits, labels).sum()


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """L / |M|: the mean over the masked tokens of the batch, the loss we train on.

    Dividing by |M| makes the loss (and the gradient's scale, hence the learning rate) independent
    of batch size and sequence length; it is what BERT and Hugging Face report. Unlike
    ``F.cross_entropy(reduction="mean")``, which gives 0/0 = NaN when every label is ignored, an
    empty M gives exactly 0 with zero gradients: we divide by max(|M|, 1).
    """
    num_masked = (labels != IGNORE_INDEX).sum().clamp(min=1)
    return mlm_loss_sum(logits, labels) / num_masked


def nsp_loss(nsp_logits: torch.Tensor, is_next: torch.Tensor) -> torch.Tensor:
    """-mean log P(IsNext or NotNext | [CLS]), the next sentence prediction loss.

    ``is_next`` is 1 (True) when sentence B really follows A. Column 0 of ``nsp_logits`` is IsNext,
    as in Google's checkpoints, so the class index is ``1 - is_next``.
    """
    if nsp_logits.dim() != 2 or nsp_logits.size(-1) != 2 or is_next.shape != nsp_logits.shape[:1]:
        raise ValueError(f"nsp_logits must be [B, 2] and is_next [B], got {tuple(nsp_logits.shape)} "
                         f"and {tuple(is_next.shape)}")
    return F.cross_entropy(nsp_logits.float(), nsp_class(is_next))


def nsp_class(is_next: torch.Tensor) -> torch.Tensor:
    """NSP logits put IsNext in column 0 (Google's order), so the class index is 1 - is_next."""
    return 1 - is_next.long()
