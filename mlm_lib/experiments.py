"""Small, seeded experiments that the chapters run live, on top of :mod:`mlm_lib.train`.

Each one answers a question of the book with a measurement that takes seconds on a laptop CPU:

- :func:`train_tiny` trains a tiny BERT (2 layers x 64) with a chosen corruption recipe (mask
  rate, share of [MASK] / random / kept tokens) and returns the model with its training history;
- :func:`score` evaluates any model on held-out blanks corrupted by any recipe, e.g. inputs that
  contain no [MASK] at all (the situation a model meets when it is fine-tuned);
- :func:`attention_bias`, :func:`encoder_forward` and :func:`train_next_token` run the same
  encoder with a bidirectional or a causal attention mask, to show why a next-word predictor
  must not see the future;
- :func:`generate_left_to_right` uses BERT as if it were GPT, one [MASK] at a time;
- :func:`position_similarity` and :func:`plot_attention` draw what is inside the model.

Tiny models learn little in a few hundred steps, so what the chapters compare is always two
runs that differ in exactly one setting, with the same seed, data and number of steps.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mlm_lib.train import (History, PreparedData, TrainConfig, build_model, evaluate, make_batch,
                           prepare_data, train)

# 2 layers, hidden 64, 2 heads, no dropout: a few hundred steps take seconds on two CPU cores.
TINY_MODEL: dict[str, Any] = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                              "intermediate_size": 256, "hidden_dropout_prob": 0.0,
                              "attention_probs_dropout_prob": 0.0}


@functools.lru_cache(maxsize=4)
def tiny_data(max_seq_length: int = 64, nsp: bool = False, seed: int = 0) -> PreparedData:
    """The Wikipedia excerpt cut into examples with the book's tokenizer (cached per process:
    every run of a chapter trains on exactly the same examples, tokenized once)."""
    cfg = TrainConfig(max_seq_length=max_seq_length, short_seq_prob=0.0, nsp=nsp, seed=seed)
    return prepare_data(cfg)


def tiny_config(**overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of the chapters' experiments; any field can be overridden
    (``model`` overrides are merged into :data:`TINY_MODEL`)."""
    model = {**TINY_MODEL, **overrides.pop("model", {})}
    base = dict(preset="tiny", model=model, max_seq_length=64, short_seq_prob=0.0, nsp=False,
                batch_size=32, lr=1e-2, position_init="sinusoidal", warmup_steps=20,
                max_steps=200, log_every=10,
                eval_every=0, seed=0, device="cpu", amp=False, threads=None, progress=False)
    base.update(overrides)
    return TrainConfig(**base)


@dataclass
class TinyRun:
    """A trained tiny model, what it was trained on, and how its training loss went."""

    model: torch.nn.Module
    tokenizer: Any
    history: History
    config: TrainConfig
    data: PreparedData = field(repr=False)

    def train_curve(self, key: str = "mlm_loss") -> tuple[list[int], list[float]]:
        """(steps, values) of a training metric, ready for ``plt.plot``."""
        cols = self.history.columns("step", key, kind="train")
        return cols["step"], cols[key]


def _check_start_from(model: torch.nn.Module, vocab_size: int, seq_len: int) -> None:
    """A model to continue from must share the data's vocabulary and read its sequences."""
    if model.config.vocab_size != vocab_size:
        raise ValueError(f"start_from has a vocabulary of {model.config.vocab_size}, the "
                         f"data's tokenizer {vocab_size}")
    if model.config.max_position_embeddings < seq_len:
        raise ValueError(f"start_from reads at most {model.config.max_position_embeddings} "
                         f"positions; the sequences have {seq_len}")


def train_tiny(mask_rate: float = 0.15, mask_prob: float = 0.8, random_prob: float = 0.1,
               keep_prob: float = 0.1, steps: int = 200, seed: int = 0,
               data: PreparedData | None = None, start_from: torch.nn.Module | None = None,
               **overrides: Any) -> TinyRun:
    """Train a tiny BERT with one corruption recipe; everything else fixed and seeded.

    ``mask_rate`` is the share of tokens put in M; ``mask_prob``/``random_prob``/``keep_prob``
    split M into [MASK], random tokens and unchanged tokens (BERT: 0.8/0.1/0.1). Other
    :class:`TrainConfig` fields (``lr``, ``batch_size``, ``model``...) pass through ``overrides``.

    ``start_from``: continue training a copy of this model (e.g. the book's model) instead of a
    fresh one. A fresh BERT spends its first few hundred steps on the unigram plateau, where every
    recipe looks the same; a trained one shows in a few hundred steps what a recipe does to it.
    """
    import copy

    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    overrides.setdefault("warmup_steps", min(20, steps))
    if start_from is not None:
        net = start_from.config
        overrides.setdefault("model", {k: getattr(net, k) for k in TINY_MODEL})
        overrides.setdefault("max_seq_length", net.max_position_embeddings)
    cfg = tiny_config(mask_rate=mask_rate, mask_prob=mask_prob, random_prob=random_prob,
                      keep_prob=keep_prob, max_steps=steps, seed=seed, **overrides)
    if data is None:
        data = tiny_data(cfg.max_seq_length, cfg.nsp)
    if start_from is not None:
        _check_start_from(start_from, data.tokenizer.vocab_size, cfg.max_seq_length)
        model = copy.deepcopy(start_from).float().train()
    else:
        model = build_model(cfg, data.tokenizer.vocab_size)
    result = train(model, data.tokenizer, data.train_examples, cfg)
    result.model.eval()
    return TinyRun(result.model, data.tokenizer, result.history, cfg, data)


def corrupted_batches(examples: Sequence[Any], tokenizer: Any, rate: float = 0.15,
                      mask_prob: float = 1.0, random_prob: float = 0.0, keep_prob: float = 0.0,
                      seed: int = 1234, batch_size: int = 64, max_examples: int | None = None
                      ) -> list[dict[str, torch.Tensor]]:
    """Held-out batches with M drawn once from ``seed`` and corrupted by the given recipe.

    The default (every chosen token becomes [MASK]) is the usual fill-the-blank test;
    ``keep_prob=1`` asks for the token at positions the model sees unchanged, ``random_prob=1``
    asks it to repair random replacements: two tests with no [MASK] in the input at all.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    ex = list(examples)[:max_examples] if max_examples else list(examples)
    if not ex:
        raise ValueError("no examples to evaluate on")
    g = torch.Generator().manual_seed(seed)
    return [make_batch(ex[i:i + batch_size], tokenizer, rate, g, mask_prob, random_prob, keep_prob)
            for i in range(0, len(ex), batch_size)]


def score(model: torch.nn.Module, data: PreparedData, rate: float = 0.15, mask_prob: float = 1.0,
          random_prob: float = 0.0, keep_prob: float = 0.0, seed: int = 1234,
          max_examples: int | None = None) -> dict[str, float]:
    """Held-out masked-token loss and accuracy of ``model`` on the validation examples of
    ``data``, corrupted as in :func:`corrupted_batches` (same seed, same blanks for every model)."""
    batches = corrupted_batches(data.valid_examples, data.tokenizer, rate, mask_prob, random_prob,
                                keep_prob, seed, max_examples=max_examples)
    res = evaluate(model, batches, "cpu")
    return {"loss": res["mlm_loss"], "accuracy": res["mlm_acc"], "num_masked": res["num_masked"]}


# ---------------------------------------------------------------- both directions

def attention_bias(seq_len: int, causal: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Additive attention mask [1, 1, T, T]: 0 where query i may read key j, a large negative
    number where it may not. Bidirectional: every j. Causal (GPT): only j <= i."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    bias = torch.zeros(seq_len, seq_len, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return bias[None, None]


def encoder_forward(bert: torch.nn.Module, input_ids: torch.Tensor, bias: torch.Tensor | None,
                    token_type_ids: torch.Tensor | None = None, output_attentions: bool = False
                    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run a :class:`~mlm_lib.model.BertModel`'s own embeddings and layers with any additive
    attention mask (e.g. :func:`attention_bias`). Returns (hidden states [B, T, H], the attention
    probabilities of every layer when asked)."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq_len], got {tuple(input_ids.shape)}")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    x = bert.embeddings(input_ids, token_type_ids)
    attentions = []
    for layer in bert.layers:
        x, probs = layer(x, bias, need_probs=output_attentions)
        if output_attentions:
            attentions.append(probs)
    return x, attentions


def token_windows(examples: Sequence[Any], special_ids: Sequence[int] | frozenset[int],
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
    """A next-token predictor trained with one attention mask."""

    causal: bool
    steps: list[int]
    train_loss: list[float]
    valid_loss: float
    valid_accuracy: float
    model: torch.nn.Module = field(repr=False)


def train_next_token(causal: bool, steps: int = 150, seed: int = 0, seq_len: int = 32,
                     batch_size: int = 32, lr: float = 3e-3, data: PreparedData | None = None,
                     log_every: int = 10, start_from: torch.nn.Module | None = None
                     ) -> NextTokenRun:
    """Train a tiny encoder to predict x_{i+1} at every position i (GPT's objective).

    With ``causal=False`` position i can attend to position i+1, which *is* the answer: the
    loss collapses because the model learns to copy, however small it is. With ``causal=True``
    it must guess from the left, as a language model has to at generation time.

    ``start_from``: train a copy of this model (e.g. the book's) instead of a fresh tiny one. A
    fresh one first has to discover word order, which takes longer than a chapter can wait.
    """
    import copy

    from mlm_lib.loss import mlm_loss
    from mlm_lib.train import build_optimizer

    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    data = data or tiny_data()
    tok = data.tokenizer
    train_rows = token_windows(data.train_examples, tok.special_ids, seq_len)
    valid_rows = token_windows(data.valid_examples, tok.special_ids, seq_len)
    if start_from is not None:
        _check_start_from(start_from, tok.vocab_size, seq_len)
        model = copy.deepcopy(start_from).float()
        torch.manual_seed(seed)
    else:
        # the same tiny model as the masked runs (sinusoidal start: word order visible from step 0)
        model = build_model(tiny_config(max_seq_length=seq_len, seed=seed,
                                        position_init="sinusoidal"), tok.vocab_size)
    opt = build_optimizer(model, lr)
    bias = attention_bias(seq_len, causal)
    g = torch.Generator().manual_seed(seed)

    def loss_and_logits(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, _ = encoder_forward(model.bert, rows, bias)
        logits = model.cls.mlm_logits(h[:, :-1], model.bert.embeddings.word_embeddings.weight)
        targets = rows[:, 1:]
        return mlm_loss(logits, targets), logits, targets

    model.train()
    logged_steps, losses, running = [], [], 0.0
    for step in range(1, steps + 1):
        idx = torch.randint(len(train_rows), (batch_size,), generator=g)
        loss, _, _ = loss_and_logits(train_rows[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += float(loss.detach())
        if step % log_every == 0 or step == steps:
            logged_steps.append(step)
            losses.append(running / (log_every if step % log_every == 0 else step % log_every))
            running = 0.0
    model.eval()
    with torch.no_grad():
        loss, logits, targets = loss_and_logits(valid_rows[:256])
        acc = float((logits.argmax(-1) == targets).float().mean())
    return NextTokenRun(causal, logged_steps, losses, float(loss), acc, model)


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


# ---------------------------------------------------------------- looking inside

def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between every pair of rows of a position table ([P, H] -> [P, P])."""
    if table.dim() != 2:
        raise ValueError(f"a position table is [positions, hidden], got {tuple(table.shape)}")
    unit = torch.nn.functional.normalize(table.float(), dim=-1)
    return unit @ unit.T


def plot_attention(ax: Any, attention: torch.Tensor, tokens: Sequence[str], title: str = "",
                   highlight: Sequence[int] = ()) -> Any:
    """Draw one head's attention [T, T] (rows: the position that reads, columns: the position it
    reads from) with token labels; ``highlight`` puts a box around the rows of interest."""
    from matplotlib.patches import Rectangle

    a = attention.detach().float().cpu()
    if a.dim() != 2 or a.shape[0] != a.shape[1] or a.shape[0] != len(tokens):
        raise ValueError(f"attention must be [T, T] with T = {len(tokens)} tokens, "
                         f"got {tuple(a.shape)}")
    im = ax.imshow(a.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
    ax.set_xlabel("reads from (key)")
    ax.set_ylabel("position reading (query)")
    for r in highlight:
        ax.add_patch(Rectangle((-0.5, r - 0.5), len(tokens), 1, fill=False, edgecolor="red",
                               linewidth=1.5))
    if title:
        ax.set_title(title)
    return im
