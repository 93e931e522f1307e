"""Fine-tuning: keep the encoder, drop the MLM head, put a classifier on [CLS].

Pretraining leaves two things behind: an encoder that turns a sentence into context-aware
vectors, and the heads that served the pretraining objectives. A downstream task keeps the first
and throws the second away. :class:`BertClassifier` is the smallest such model, as in Devlin et
al. (2019, section 3.2): the pooled ``[CLS]`` vector, dropout, one linear layer with a softmax
over the labels, and *every* weight of the encoder trained further with a small learning rate.

A labelled task is a :class:`LabelledSet` of texts (or of pairs, segment B in ``pairs``) and
labels. A pretrained encoder and a randomly initialised one of the same shape can then be
fine-tuned by the same :func:`finetune` call, so the gap between them is what pretraining bought.
:func:`finetune` knows nothing of the head: it asks the task set for batches and the model for its
``objective``, so the per-token and span heads of :mod:`mlm_lib.tasks` train through it too.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from mlm_lib.config import BertConfig
from mlm_lib.loop import Batch, History, LoopState, Sums, evaluate, train_loop
from mlm_lib.model import BertForPreTraining, BertModel
from mlm_lib.optim import WarmupLinearSchedule, build_optimizer
from mlm_lib.weights import init_bert_weights


# ---------------------------------------------------------------- the labelled task

class TaskSet(Protocol):
    """What :func:`finetune` needs of a task's data: its size, and any of its examples as a batch
    (tensors the model's ``objective`` reads, on the CPU)."""

    def __len__(self) -> int: ...

    def batch(self, tokenizer: Any, idx: Sequence[int], max_length: int) -> Batch: ...


@dataclass
class LabelledSet:
    """Texts with integer labels; ``label_names[k]`` names label ``k``. With ``pairs``, example
    ``i`` is the pair (``texts[i]``, ``pairs[i]``), encoded ``[CLS] A [SEP] B [SEP]`` with B in
    segment 1: BERT's sentence-pair tasks (entailment, paraphrase, NSP)."""

    texts: list[str]
    labels: list[int]
    label_names: list[str]
    pairs: list[str] | None = None

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")
        if self.pairs is not None and len(self.pairs) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.pairs)} pairs")
        bad = [y for y in self.labels if not 0 <= y < len(self.label_names)]
        if bad:
            raise ValueError(f"label {bad[0]} is outside [0, {len(self.label_names)}): "
                             f"there are {len(self.label_names)} label names")

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> list[int]:
        """How many texts carry each label (a balanced set has equal counts)."""
        return [self.labels.count(k) for k in range(len(self.label_names))]

    def batch(self, tokenizer: Any, idx: Sequence[int], max_length: int) -> Batch:
        """The examples ``idx`` encoded and padded, with their labels."""
        pairs = [self.pairs[i] for i in idx] if self.pairs is not None else None
        enc = tokenizer.encode_batch([self.texts[i] for i in idx], pairs, max_length=max_length)
        enc["labels"] = torch.tensor([self.labels[i] for i in idx], dtype=torch.long)
        return enc


# ---------------------------------------------------------------- the model

class FinetunedBert(nn.Module):
    """An encoder and a new head on its vectors: dropout, then one linear layer of ``num_labels``
    outputs (named ``classifier``). The heads of this module and of :mod:`mlm_lib.tasks` differ
    only in which vectors they read and what their outputs mean (the span head's two are a start
    and an end score, as in Hugging Face's ``BertForQuestionAnswering``)."""

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
    def from_pretraining(cls, model: BertForPreTraining, *args: Any, **kwargs: Any) -> Any:
        """Keep a (copy of the) pretrained encoder ``model.bert``; ``model.cls`` -- the MLM and
        NSP heads -- is left behind. The original model is not modified. The other arguments are
        the head's own (``num_labels``, ``dropout``, ``seed``)."""
        if not isinstance(model, BertForPreTraining):
            raise ValueError(f"expected a BertForPreTraining, got {type(model).__name__}")
        return cls(copy.deepcopy(model.bert), *args, **kwargs)

    @classmethod
    def from_scratch(cls, config: BertConfig, *args: Any, seed: int = 0, **kwargs: Any) -> Any:
        """The same architecture with a randomly initialised encoder (from ``seed``): the control
        experiment."""
        return cls(BertModel(config, seed=seed), *args, seed=seed, **kwargs)


class BertClassifier(FinetunedBert):
    """An encoder plus a classifier on the pooled ``[CLS]`` vector: dropout, then one linear layer.

    The pooler (``tanh(W h_[CLS] + b)``) belongs to the encoder, so it is kept: in BERT NSP trained
    it, in the book's MLM-only model it is still at its random start. The MLM head is not part of
    this model at all.
    """

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label scores [B, num_labels] from the pooled [CLS] vector."""
        pooled = self.bert(input_ids, token_type_ids, attention_mask).pooled_output
        return self.classifier(self.dropout(pooled))

    def objective(self, b: Batch) -> tuple[torch.Tensor, Sums]:
        """Cross-entropy of the labels given the pooled [CLS] vector, and the accuracy."""
        logits = self(b["input_ids"], b["token_type_ids"], b["attention_mask"])
        loss = F.cross_entropy(logits.float(), b["labels"])
        n = b["labels"].numel()
        return loss, {"loss": (loss.detach() * n, n),
                      "accuracy": ((logits.argmax(-1) == b["labels"]).sum(), n)}


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
    """The fine-tuned model; ``history``: one "train" record per step (loss, accuracy), one
    "eval" record per epoch (held-out loss and accuracy, when an eval set was given) and one
    "select" record per epoch (``keep_best``'s score, when given). ``best_epoch``: the epoch whose
    weights ``model`` holds, when ``keep_best`` chose one."""

    model: nn.Module
    history: History
    best_epoch: int | None = None

    def column(self, key: str, kind: str = "train") -> list[Any]:
        return self.history.columns(key, kind=kind)[key]


def _check_set(data: TaskSet, model: nn.Module, name: str) -> None:
    if len(data) == 0:
        raise ValueError(f"the {name} set is empty")
    names = getattr(data, "label_names", None)
    if names is not None and len(names) != model.num_labels:
        raise ValueError(f"the {name} set has {len(names)} labels, the model {model.num_labels}")


def _batches(data: TaskSet, tokenizer: Any, order: Sequence[int], batch_size: int,
             max_length: int, device: torch.device) -> Iterator[Batch]:
    for lo in range(0, len(order), batch_size):
        b = data.batch(tokenizer, order[lo:lo + batch_size], max_length)
        yield {k: v.to(device) for k, v in b.items()}


def evaluate_task(model: nn.Module, tokenizer: Any, data: TaskSet, max_length: int = 64,
                  batch_size: int = 128) -> dict[str, float]:
    """The model's ``objective`` over a held-out set: mean loss and the head's own measures
    (accuracy for a classifier; piece-level F1, ``token_f1``, for a tagger; exact match for a
    span head)."""
    _check_set(data, model, "evaluation")
    device = next(model.parameters()).device
    batches = list(_batches(data, tokenizer, range(len(data)), batch_size, max_length, device))
    return evaluate(model, type(model).objective, batches)


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


def finetune(model: nn.Module, tokenizer: Any, train_set: TaskSet, cfg: FinetuneConfig,
             eval_set: TaskSet | None = None,
             keep_best: Callable[[nn.Module], float] | None = None) -> FinetuneResult:
    """Train every weight of ``model`` (encoder and head) on its ``objective`` over ``train_set``.

    AdamW without decay on biases and LayerNorm, linear warm-up then linear decay (the recipe of
    the paper, shrunk). The data order of each epoch is a seeded permutation and dropout draws
    from a seeded generator, so a run is reproducible. Evaluates on ``eval_set`` after each epoch.
    ``keep_best`` scores the model after each epoch (higher is better: a development set's F1,
    say); the model returned holds the weights of the epoch that scored highest (the first, on a
    tie), as 🤗 Trainer's ``load_best_model_at_end``, so a longer schedule cannot overfit past it.
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
            for b in _batches(train_set, tokenizer, order, cfg.batch_size, cfg.max_length, device):
                yield [b]

    best: dict[str, Any] = {}

    def after_epoch(state: LoopState) -> None:
        if state.step % steps_per_epoch:
            return
        epoch = state.step // steps_per_epoch
        if eval_set is not None:
            res = evaluate_task(model, tokenizer, eval_set, cfg.max_length, cfg.eval_batch_size)
            state.history.append("eval", step=state.step, epoch=epoch, **res)
        if keep_best is not None:
            with torch.no_grad():
                score = float(keep_best(model))
            model.train()  # a scorer may leave the model in eval mode
            state.history.append("select", step=state.step, epoch=epoch, score=score)
            if not best or score > best["score"]:
                best.update(score=score, epoch=epoch,
                            weights={k: v.detach().clone() for k, v in model.state_dict().items()})

    state = train_loop(model, type(model).objective, epochs(), optimizer, schedule, total,
                       clip_grad_norm=cfg.clip_grad_norm, log_every=1, callbacks=[after_epoch],
                       progress=cfg.progress, desc="fine-tuning")
    if best:
        model.load_state_dict(best["weights"])
    model.eval()
    return FinetuneResult(model, state.history, best.get("epoch"))
