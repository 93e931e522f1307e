"""ELECTRA's replaced token detection (Clark et al. 2020): a loss summed over every position.

The MLM loss ``L = -sum_{i in M} log P(x_i | x_\\M)`` learns from the masked positions only, about
15% of the tokens. ELECTRA keeps the corruption and changes what is scored. A *generator*, any
masked language model, fills each position of M with a token sampled from its softmax, which
gives ``x_corrupt``; a *discriminator* reads ``x_corrupt`` and says, at every position t, whether
the token there is the original (the paper's section 2):

    D(x, t) = sigmoid(w^T h_t)
    L_Disc  = -sum_{t=1}^{n} [ 1(x_corrupt_t = x_t) log D(x_corrupt, t)
                               + 1(x_corrupt_t != x_t) log (1 - D(x_corrupt, t)) ]

A sample that happens to equal the original token counts as original. The paper trains both
networks at once on ``L_MLM + lambda L_Disc`` (:class:`Electra`, ``train_generator=True``); with a
trained generator kept fixed it is the second stage of the paper's two-stage variant
(``train_generator=False``, the discriminator started from the generator's encoder). The
paper's weakest generator, which samples by corpus frequency whatever the context, is
:class:`UnigramGenerator`. After pretraining the generator is thrown away and the
discriminator's encoder is fine-tuned like BERT's.
"""

from __future__ import annotations

import copy
import torch
import torch.nn.functional as F
from torch import nn

from collections.abc import Iterable, Sequence

from mlm_lib.config import BertConfig
from mlm_lib.loop import Batch, Sums
from mlm_lib.loss import IGNORE_INDEX, mlm_loss
from mlm_lib.model import BertForPreTraining, BertModel
from mlm_lib.weights import init_bert_weights

# lambda, the weight of L_Disc in the combined loss: google-research/electra's default
# (configure_pretraining.py, disc_weight = 50.0). Both losses there are means, L_MLM over M and
# L_Disc over the real tokens, and a per-token binary loss is far smaller than an MLM term.
DISC_WEIGHT = 50.0


def original_tokens(batch: Batch) -> torch.Tensor:
    """x, the uncorrupted sequence: the labels at M (the original tokens), the input elsewhere."""
    labels = batch["labels"]
    return torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])


@torch.no_grad()
def sample_replacements(mlm_logits: torch.Tensor, generator: torch.Generator | None = None
                        ) -> torch.Tensor:
    """One token per row of ``mlm_logits`` [|M|, V], sampled from the generator's softmax
    P(. | x_masked) (not its argmax: the paper samples, so replacements are plausible and varied)."""
    probs = torch.softmax(mlm_logits.float(), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def corrupt(x: torch.Tensor, masked: torch.Tensor, samples: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``x_corrupt`` = x with the positions of M replaced by ``samples`` (row-major order), and
    ``is_original`` [B, T]: 1 where x_corrupt_t = x_t, which includes a sample equal to x_t."""
    if masked.shape != x.shape or masked.dtype != torch.bool:
        raise ValueError(f"masked must be a bool tensor shaped like x {tuple(x.shape)}, got "
                         f"{masked.dtype} {tuple(masked.shape)}")
    if samples.shape != (int(masked.sum()),):
        raise ValueError(f"need one sample per masked position ({int(masked.sum())}), got "
                         f"{tuple(samples.shape)}")
    x_corrupt = x.clone()
    x_corrupt[masked] = samples.to(x.dtype)
    return x_corrupt, (x_corrupt == x).long()


def _real(logits: torch.Tensor, is_original: torch.Tensor,
          attention_mask: torch.Tensor | None) -> torch.Tensor:
    if logits.shape != is_original.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and is_original {tuple(is_original.shape)} "
                         "must have the same shape [B, T]")
    if attention_mask is None:
        return torch.ones_like(is_original, dtype=torch.bool)
    if attention_mask.shape != logits.shape:
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must be shaped like the "
                         f"logits {tuple(logits.shape)}")
    return attention_mask.bool()


def discriminator_loss_sum(logits: torch.Tensor, is_original: torch.Tensor,
                           attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """L_Disc = -sum_t [1(original) log D + 1(replaced) log(1 - D)], exactly, with
    D = sigmoid(logits): one term for *every* real position t (padding is not a position)."""
    real = _real(logits, is_original, attention_mask)
    terms = F.binary_cross_entropy_with_logits(logits.float(), is_original.float(), reduction="none")
    return terms[real].sum()


def discriminator_loss(logits: torch.Tensor, is_original: torch.Tensor,
                       attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """L_Disc / n, the mean over the real positions, the loss we train on (as
    :func:`~mlm_lib.loss.mlm_loss` is the mean over M)."""
    n = _real(logits, is_original, attention_mask).sum().clamp(min=1)
    return discriminator_loss_sum(logits, is_original, attention_mask) / n


class UnigramGenerator(nn.Module):
    """A generator that ignores the context: each sample is drawn by the token's frequency in a
    corpus (the weakest generator of the paper's figure 3). Special tokens are never drawn."""

    def __init__(self, counts: torch.Tensor) -> None:
        super().__init__()
        if counts.dim() != 1 or bool((counts < 0).any()) or not float(counts.sum()) > 0:
            raise ValueError("counts must be a 1-D tensor of non-negative token counts, not all 0")
        self.vocab_size = counts.numel()
        self.register_buffer("log_p", (counts.double() / counts.sum()).log().float())

    @classmethod
    def from_sequences(cls, sequences: Iterable[Sequence[int]], vocab_size: int,
                       special_ids: Iterable[int]) -> "UnigramGenerator":
        """Count the tokens of ``sequences`` (lists of ids), leaving the special tokens out."""
        counts = torch.zeros(vocab_size, dtype=torch.float64)
        for ids in sequences:
            counts.index_add_(0, torch.as_tensor(ids, dtype=torch.long),
                              torch.ones(len(ids), dtype=torch.float64))
        counts[list(special_ids)] = 0
        return cls(counts)

    def forward(self, num_masked: int) -> torch.Tensor:
        """The same scores for every masked position: [num_masked, V] log-frequencies."""
        return self.log_p.expand(num_masked, -1)


class ElectraDiscriminator(nn.Module):
    """An encoder and one linear layer on every ``h_t``: the logit of D(x, t) = P(token t is the
    original), [B, T]."""

    def __init__(self, encoder: BertModel, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(encoder, BertModel):
            raise ValueError(f"encoder must be a BertModel, got {type(encoder).__name__}")
        self.bert = encoder
        self.config = encoder.config
        self.discriminator = nn.Linear(encoder.config.hidden_size, 1)  # w (and a bias)
        init_bert_weights(self.discriminator, encoder.config.initializer_range,
                          torch.Generator().manual_seed(seed))

    @classmethod
    def from_generator(cls, model: BertForPreTraining, seed: int = 0) -> "ElectraDiscriminator":
        """A copy of a trained MLM's encoder (the paper's two-stage variant starts the
        discriminator from the generator's weights); ``model`` is not modified."""
        if not isinstance(model, BertForPreTraining):
            raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
        return cls(copy.deepcopy(model.bert), seed=seed)

    @classmethod
    def from_scratch(cls, config: BertConfig, seed: int = 0) -> "ElectraDiscriminator":
        """A randomly initialised encoder (from ``seed``) under the head."""
        return cls(BertModel(config, seed=seed), seed=seed)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state
        return self.discriminator(h).squeeze(-1)


def detection_sums(logits: torch.Tensor, is_original: torch.Tensor,
                   attention_mask: torch.Tensor | None) -> Sums:
    """What a discriminator reports over the real positions: the mean loss, the accuracy of
    D > 1/2, and the share of tokens that were replaced."""
    real = _real(logits, is_original, attention_mask)
    n = real.sum()
    said_original = (logits > 0).long()
    return {"disc_loss": (discriminator_loss_sum(logits, is_original, attention_mask).detach(), n),
            "disc_acc": ((said_original == is_original)[real].sum(), n),
            "replaced": ((1 - is_original)[real].sum(), n)}


def _vocab_size(generator: nn.Module) -> int:
    return generator.vocab_size if isinstance(generator, UnigramGenerator) else generator.config.vocab_size


class Electra(nn.Module):
    """A generator (an MLM, :class:`~mlm_lib.model.BertForPreTraining`, or a
    :class:`UnigramGenerator`) and a discriminator
    trained on its samples. ``objective(batch)`` takes an MLM batch (``input_ids`` = x_masked with
    [MASK] at M, ``labels`` = x_i at M and ``IGNORE_INDEX`` elsewhere) and returns the loss:
    ``L_MLM + disc_weight * L_Disc``, or ``L_Disc`` alone when the generator is not trained."""

    def __init__(self, generator: BertForPreTraining | UnigramGenerator,
                 discriminator: ElectraDiscriminator,
                 disc_weight: float = DISC_WEIGHT, train_generator: bool = True,
                 sample_seed: int = 0) -> None:
        super().__init__()
        if not isinstance(generator, (BertForPreTraining, UnigramGenerator)):
            raise ValueError(f"the generator must be a BertForPreTraining or a UnigramGenerator, "
                             f"got {type(generator).__name__}")
        if train_generator and isinstance(generator, UnigramGenerator):
            raise ValueError("a UnigramGenerator has nothing to train: pass train_generator=False")
        if not isinstance(discriminator, ElectraDiscriminator):
            raise ValueError(f"the discriminator must be an ElectraDiscriminator, got "
                             f"{type(discriminator).__name__}")
        if _vocab_size(generator) != discriminator.config.vocab_size:
            raise ValueError(f"generator and discriminator read different vocabularies "
                             f"({_vocab_size(generator)} and {discriminator.config.vocab_size})")
        if not disc_weight > 0:
            raise ValueError(f"disc_weight must be positive, got {disc_weight}")
        self.generator, self.discriminator = generator, discriminator
        self.disc_weight, self.train_generator = disc_weight, train_generator
        # The samples' own random stream, so that a run is reproducible whatever else draws.
        self.sampler = torch.Generator().manual_seed(sample_seed)

    def train(self, mode: bool = True) -> "Electra":
        super().train(mode)
        if not self.train_generator:
            self.generator.eval()  # a fixed generator: no dropout in its samples
        return self

    def corrupt_batch(self, b: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(x_corrupt, is_original, L_MLM or None): the generator reads x_masked, and a token
        sampled from its softmax replaces each position of M."""
        masked = b["labels"] != IGNORE_INDEX
        if isinstance(self.generator, UnigramGenerator):
            logits = self.generator(int(masked.sum()))
        else:
            with torch.set_grad_enabled(self.train_generator and torch.is_grad_enabled()):
                logits = self.generator(b["input_ids"], b.get("token_type_ids"),
                                        b.get("attention_mask"), masked_positions=masked).mlm_logits
        mlm = mlm_loss(logits, b["labels"][masked]) if self.train_generator else None
        samples = sample_replacements(logits, self.sampler if logits.device.type == "cpu" else None)
        x_corrupt, is_original = corrupt(original_tokens(b), masked, samples)
        return x_corrupt, is_original, mlm

    def objective(self, b: Batch) -> tuple[torch.Tensor, Sums]:
        x_corrupt, is_original, mlm = self.corrupt_batch(b)
        attention_mask = b.get("attention_mask")
        logits = self.discriminator(x_corrupt, b.get("token_type_ids"), attention_mask)
        disc = discriminator_loss(logits, is_original, attention_mask)
        sums = detection_sums(logits.detach(), is_original, attention_mask)
        if mlm is None:
            return disc, sums
        n_masked = (b["labels"] != IGNORE_INDEX).sum()
        return mlm + self.disc_weight * disc, {**sums, "mlm_loss": (mlm.detach() * n_masked, n_masked)}


def roc_auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """The probability that a random positive scores above a random negative (ties count half):
    the area under the ROC curve, 0.5 for a detector that cannot tell them apart. Computed from
    ranks (Mann-Whitney), ties given their average rank."""
    scores, positive = scores.flatten().double(), positive.flatten().bool()
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"an AUC needs both classes: {n_pos} positives, {n_neg} negatives")
    values, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    last = counts.cumsum(0).double()
    average_rank = last - (counts.double() - 1) / 2  # ranks from 1, ties share their mean
    rank_sum = average_rank[inverse][positive].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))

