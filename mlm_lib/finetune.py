"""Fine-tuning: keep the encoder, drop the MLM head, put a classifier on [CLS].

Pretraining leaves two things behind: an encoder that turns a sentence into context-aware
vectors, and the heads that served the pretraining objectives. A downstream task keeps the first
and throws the second away. :class:`BertClassifier` is the smallest such model, as in Devlin et
al. (2019, section 3.2): the pooled ``[CLS]`` vector, dropout, one linear layer with a softmax
over the labels, and *every* weight of the encoder trained further with a small learning rate.

A labelled task is a :class:`LabelledSet` of texts and labels (the book makes one from its
corpus). A pretrained encoder and a randomly initialised one of the same shape can then be
fine-tuned by the same :func:`finetune` call, so the gap between them is what pretraining bought.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from mlm_lib.loop import Batch, History, LoopState, Sums, evaluate, train_loop
from mlm_lib.model import BertConfig, BertForPreTraining, BertModel, init_bert_weights
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer


# ---------------------------------------------------------------- the labelled task

@dataclass
class LabelledSet:
    """Texts with integer labels; ``label_names[k]`` names label ``k``."""

    texts: list[str]
    labels: list[int]
    label_names: list[str]

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")
        bad = [y for y in self.labels if not 0 <= y < len(self.label_names)]
        if bad:
            raise ValueError(f"label {bad[0]} is outside [0, {len(self.label_names)}): "
                             f"there are {len(self.label_names)} label names")

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> list[int]:
        """How many texts carry each label (a balanced set has equal counts)."""
        return [self.labels.count(k) for k in range(len(self.label_names))]


# ---------------------------------------------------------------- the model

class BertClassifier(nn.Module):
    """An encoder plus a classifier on the pooled ``[CLS]`` vector: dropout, then one linear layer.

    The pooler (``tanh(W h_[CLS] + b)``) belongs to the encoder, so it is kept: in BERT NSP trained
    it, in the book's MLM-only model it is still at its random start. The MLM head is not part of
    this model at all.
    """

    def __init__(self, encoder: BertModel, num_labels: int, dropout: float = 0.1,
                 seed: int = 0) -> None:
        super().__init__()
        if not isinstance(encoder, BertModel):
            raise ValueError(f"encoder must be a BertModel, got {type(encoder).__name__}")
        if num_labels < 2:
            raise ValueError(f"num_labels must be at least 2, got {num_labels}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.bert = encoder
        self.config = encoder.config
        self.num_labels = num_labels
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.config.hidden_size, num_labels)
        # A new head starts like every BERT weight: small truncated normal, zero bias (seeded).
        init_bert_weights(self.classifier, encoder.config.initializer_range,
                          torch.Generator().manual_seed(seed))

    @classmethod
    def from_pretraining(cls, model: BertForPreTraining, num_labels: int, dropout: float = 0.1,
                         seed: int = 0) -> "BertClassifier":
        """Keep a (copy of the) pretrained encoder ``model.bert``; ``model.cls`` -- the MLM and
        NSP heads -- is left behind. The original model is not modified."""
        if not isinstance(model, BertForPreTraining):
            raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
        return cls(copy.deepcopy(model.bert), num_labels, dropout, seed)

    @classmethod
    def from_scratch(cls, config: BertConfig, num_labels: int, dropout: float = 0.1,
                     seed: int = 0) -> "BertClassifier":
        """The same architecture with a randomly initialised encoder: the control experiment."""
        return cls(BertModel(config, seed=seed), num_labels, dropout, seed)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label scores [B, num_labels] from the pooled [CLS] vector."""
        pooled = self.bert(input_ids, token_type_ids, attention_mask).pooled_output
        return self.classifier(self.dropout(pooled))


def head_parameters(model: BertForPreTraining) -> dict[str, int]:
    """Parameters of what fine-tuning drops and keeps. The MLM output matrix is tied to the word
    embeddings (stored once, in the encoder), so the MLM head owns only its transform, its
    LayerNorm and the output bias."""
    if not isinstance(model, BertForPreTraining):
        raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
    heads = model.cls
    nsp = sum(p.numel() for p in heads.seq_relationship.parameters())
    mlm = sum(p.numel() for p in heads.parameters()) - nsp
    encoder = sum(p.numel() for p in model.bert.parameters())
    return {"encoder": encoder, "mlm_head": mlm, "nsp_head": nsp}


# ---------------------------------------------------------------- training and evaluation

@dataclass
class FinetuneConfig:
    """Fine-tuning hyper-parameters; the defaults suit the book's small models on a CPU."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 2e-4
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    clip_grad_norm: float | None = 1.0
    max_length: int = 64
    eval_batch_size: int = 128
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.epochs > 0, f"epochs must be positive, got {self.epochs}"),
            (self.batch_size > 0, f"batch_size must be positive, got {self.batch_size}"),
            (self.lr > 0, f"lr must be positive, got {self.lr}"),
            (0.0 <= self.warmup_fraction < 1.0, f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}"),
            (self.max_length >= 3, f"max_length must be at least 3 ([CLS] x [SEP]), got {self.max_length}"),
            (self.eval_batch_size > 0, f"eval_batch_size must be positive, got {self.eval_batch_size}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)


@dataclass
class FinetuneResult:
    """The fine-tuned model; ``history``: one "train" record per step (loss, accuracy) and one
    "eval" record per epoch (held-out loss and accuracy, when an eval set was given)."""

    model: BertClassifier
    history: History

    def column(self, key: str, kind: str = "train") -> list[Any]:
        return self.history.columns(key, kind=kind)[key]


def _check_set(data: LabelledSet, model: BertClassifier, name: str) -> None:
    if len(data) == 0:
        raise ValueError(f"the {name} set is empty")
    if len(data.label_names) != model.num_labels:
        raise ValueError(f"the {name} set has {len(data.label_names)} labels, the classifier "
                         f"{model.num_labels}")


def _labelled_batch(tokenizer: Any, data: LabelledSet, idx: Sequence[int], max_length: int,
                   device: torch.device) -> Batch:
    """The texts ``idx`` of ``data`` encoded and padded, with their labels, on ``device``."""
    enc = tokenizer.encode_batch([data.texts[i] for i in idx], max_length=max_length)
    enc["labels"] = torch.tensor([data.labels[i] for i in idx], dtype=torch.long)
    return {k: v.to(device) for k, v in enc.items()}


def classification_objective(model: BertClassifier, b: Batch) -> tuple[torch.Tensor, Sums]:
    """Cross-entropy of the labels given the pooled [CLS] vector, and the accuracy."""
    logits = model(b["input_ids"], b["token_type_ids"], b["attention_mask"])
    loss = F.cross_entropy(logits.float(), b["labels"])
    n = b["labels"].numel()
    return loss, {"loss": (loss.detach() * n, n),
                  "accuracy": ((logits.argmax(-1) == b["labels"]).sum(), n)}


def evaluate_classifier(model: BertClassifier, tokenizer: Any, data: LabelledSet,
                        max_length: int = 64, batch_size: int = 128) -> dict[str, float]:
    """Held-out mean cross-entropy and accuracy (argmax label equals the true one)."""
    _check_set(data, model, "evaluation")
    device = next(model.parameters()).device
    batches = [_labelled_batch(tokenizer, data, range(lo, min(lo + batch_size, len(data))),
                              max_length, device) for lo in range(0, len(data), batch_size)]
    return evaluate(model, classification_objective, batches)


@torch.no_grad()
def predict(model: BertClassifier, tokenizer: Any, texts: Sequence[str], max_length: int = 64
            ) -> torch.Tensor:
    """Label probabilities [len(texts), num_labels] for raw sentences."""
    if len(texts) == 0:
        raise ValueError("no texts to classify")
    model.eval()
    device = next(model.parameters()).device
    enc = tokenizer.encode_batch(list(texts), max_length=max_length)
    logits = model(*(enc[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")))
    return torch.softmax(logits.float(), -1).cpu()


def finetune(model: BertClassifier, tokenizer: Any, train_set: LabelledSet, cfg: FinetuneConfig,
             eval_set: LabelledSet | None = None) -> FinetuneResult:
    """Train every weight of ``model`` (encoder and classifier) with cross-entropy on the labels.

    AdamW without decay on biases and LayerNorm, linear warm-up then linear decay (the recipe of
    the paper, shrunk). The data order of each epoch is a seeded permutation and dropout draws
    from a seeded generator, so a run is reproducible. Evaluates on ``eval_set`` after each epoch.
    """
    _check_set(train_set, model, "training")
    if eval_set is not None:
        _check_set(eval_set, model, "evaluation")
    device = next(model.parameters()).device
    steps_per_epoch = -(-len(train_set) // cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay)
    schedule = WarmupLinearSchedule(optimizer, int(cfg.warmup_fraction * total), total)
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)  # dropout

    def epochs() -> Iterator[list[Batch]]:
        for _ in range(cfg.epochs):
            order = list(range(len(train_set)))
            rng.shuffle(order)
            for lo in range(0, len(order), cfg.batch_size):
                yield [_labelled_batch(tokenizer, train_set, order[lo:lo + cfg.batch_size],
                                      cfg.max_length, device)]

    def after_epoch(state: LoopState) -> None:
        if eval_set is not None and state.step % steps_per_epoch == 0:
            res = evaluate_classifier(model, tokenizer, eval_set, cfg.max_length, cfg.eval_batch_size)
            state.history.append("eval", step=state.step, epoch=state.step // steps_per_epoch, **res)

    state = train_loop(model, classification_objective, epochs(), optimizer, schedule, total,
                       clip_grad_norm=cfg.clip_grad_norm, log_every=1, callbacks=[after_epoch],
                       progress=cfg.progress, desc="fine-tuning")
    model.eval()
    return FinetuneResult(model, state.history)
