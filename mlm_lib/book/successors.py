"""Chapter 15's successors: ModernBERT and DeBERTa-v3 beside the book's BERT, on one recipe.

transformers builds both from a config, so this module only chooses their configs and lets the
book's loop train them. Everything but the encoder is the book's recipe (``BOOK_RECIPE_32``: the
tokenizer, the Wikipedia split, batches, mask rate, optimiser, schedule, the output bias set to the
unigram log-probabilities; the initial std too, though each library draws the first weights its
own way, ModernBERT shrinking its output projections), so a difference between the arms is the
encoder's, as its library builds it:

- **ModernBERT** (Warner et al. 2024): rotary positions instead of learned ones, GeGLU instead of
  GELU, pre-norm instead of post-LN, no biases, local attention in two layers of three (at the
  book's 32 pieces a 128-piece window sees the whole sequence, so here only the rotary bases
  differ between the layer types);
- **DeBERTa-v3** (He et al. 2021, 2023): no position added to the input; each layer's scores add
  content-to-position and position-to-content terms read from relative-position embeddings (the
  hub config's 256 buckets each way, kept, though the book's sequences hold 32 pieces).

Their papers train them with other objectives too (ModernBERT masks 30%, DeBERTa-v3 is trained as
ELECTRA's discriminator): here all three learn MLM at 15%, so the comparison is the encoders'.

Widths and depths are the book's (2 layers x 128, 2 heads); ModernBERT's GeGLU feed-forward gets
the inner width that gives it BERT's feed-forward parameter count (3 x 128 x 340 against
2 x 128 x 512).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import (DebertaV2Config, DebertaV2ForMaskedLM, ModernBertConfig,
                          ModernBertForMaskedLM, PretrainedConfig)

from mlm_lib.book.book_model import BOOK_RECIPE_32
from mlm_lib.book.chapter_runs import chapter_data
from mlm_lib.init import build_model, init_unigram_bias, unigram_log_probs
from mlm_lib.loss import target_log_probs
from mlm_lib.model import PreTrainingOutput
from mlm_lib.train import TrainConfig, TrainResult, train

BERT, MODERNBERT, DEBERTA = "BERT", "ModernBERT", "DeBERTa-v3"
ENCODERS = (BERT, MODERNBERT, DEBERTA)
GEGLU_INNER = 340  # 3 x 128 x 340 = 130,560 feed-forward weights per layer; BERT's 2 x 128 x 512 = 131,072
# DeBERTa-v3-base's attention settings (its config.json on the Hugging Face hub, microsoft/deberta-v3-base)
DEBERTA_V3 = dict(relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"],
                  max_relative_positions=-1, position_buckets=256, norm_rel_ebd="layer_norm",
                  share_att_key=True, layer_norm_eps=1e-7)
# ModernBERT-base's pattern: a global layer every third, local windows of 128 pieces elsewhere.
MODERNBERT_BASE = dict(global_attn_every_n_layers=3, local_attention=128, norm_eps=1e-5)
# The comparison: chapter 10's recipe experiment's 800 steps of the 6,000-step schedule, the
# held-out blanks scored every 40 steps (so the same seconds can be read off for each encoder).
STEPS = 800
EVAL_EVERY = 40
MASK_RATE = 0.15  # BERT's, for all three encoders
# Milliseconds per training step, from benchmarks/bench_successors.py on the machine that made the
# results files (one thread, the three encoders' steps alternating, medians of 30; the runs' own
# step times, two runs side by side, are slower and less alike), and so the steps each encoder
# takes in the time of BERT's 800: the "per second" comparison, read between scored steps.
MS_PER_STEP = {BERT: 88.9, MODERNBERT: 127.5, DEBERTA: 372.2}
SAME_SECONDS_STEPS = {name: STEPS * MS_PER_STEP[BERT] / ms for name, ms in MS_PER_STEP.items()}
# The ablation: ModernBERT at its paper's mask rate (Warner et al. 2024, section 2.2) against BERT's.
MASK_RATE_ARMS = {f"{MODERNBERT}, 15%": 0.15, f"{MODERNBERT}, 30%": 0.30}


def successor_config(name: str, vocab_size: int, special: dict[str, int],
                     recipe: dict[str, Any] = BOOK_RECIPE_32) -> PretrainedConfig:
    """The transformers config of ``name`` (``MODERNBERT`` or ``DEBERTA``) at the recipe's width
    and depth; ``special`` holds the tokenizer's ``pad``, ``cls`` and ``sep`` ids."""
    m = recipe["model"]
    shape = dict(vocab_size=vocab_size, hidden_size=m["hidden_size"],
                 num_hidden_layers=m["num_hidden_layers"], num_attention_heads=m["num_attention_heads"],
                 max_position_embeddings=recipe["max_seq_length"],
                 initializer_range=m["initializer_range"], pad_token_id=special["pad"])
    if name == MODERNBERT:
        cfg = ModernBertConfig(**shape, intermediate_size=GEGLU_INNER, cls_token_id=special["cls"],
                               sep_token_id=special["sep"], bos_token_id=special["cls"],
                               eos_token_id=special["sep"], **MODERNBERT_BASE)
    elif name == DEBERTA:
        cfg = DebertaV2Config(**shape, intermediate_size=m["intermediate_size"], type_vocab_size=0,
                              hidden_dropout_prob=m["hidden_dropout_prob"],
                              attention_probs_dropout_prob=m["attention_probs_dropout_prob"],
                              **DEBERTA_V3)
    else:
        raise ValueError(f"unknown successor {name!r}; choose {MODERNBERT!r} or {DEBERTA!r}")
    cfg._attn_implementation = "eager"  # the same attention code on every CPU
    return cfg


class MaskedLM(nn.Module):
    """A transformers ``*ForMaskedLM`` behind the book's model's training interface: the loop and
    :func:`~mlm_lib.train.evaluate_mlm` call it as they call ``BertForPreTraining``, and, like it,
    it scores only the rows of M against the vocabulary."""

    def __init__(self, hf_model: ModernBertForMaskedLM | DebertaV2ForMaskedLM) -> None:
        super().__init__()
        self.hf = hf_model
        self.config = hf_model.config

    @property
    def output_bias(self) -> nn.Parameter:
        """The bias of the vocabulary scores (set to the unigram log-probabilities at the start)."""
        return self.hf.get_output_embeddings().bias

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                masked_positions: torch.Tensor | None = None, targets: torch.Tensor | None = None,
                fused_loss: bool = False) -> PreTrainingOutput:
        """``fused_loss`` is accepted for the loop's sake; the loss is always computed from M's logits."""
        if masked_positions is None:
            raise ValueError("the successors are trained and scored on M: pass masked_positions")
        encoder = self.hf.base_model
        h = encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = self._head(h[masked_positions])  # [|M|, V]
        out = PreTrainingOutput(logits, torch.zeros(input_ids.shape[0], 2), None,
                                torch.zeros(0))
        if targets is not None:
            out.mlm_nll, out.mlm_predictions = -target_log_probs(logits, targets), logits.argmax(-1)
        return out

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        if isinstance(self.hf, ModernBertForMaskedLM):
            return self.hf.decoder(self.hf.head(h))
        return self.hf.cls(h)


def build_successor(name: str, tokenizer: Any, examples: Any, seed: int,
                    recipe: dict[str, Any] = BOOK_RECIPE_32) -> MaskedLM:
    """``name``'s encoder, seeded, with the output bias at the unigram log-probabilities of
    ``examples`` (as the book's recipe starts its BERT)."""
    special = {"pad": tokenizer.pad_id, "cls": tokenizer.cls_id, "sep": tokenizer.sep_id}
    cfg = successor_config(name, tokenizer.vocab_size, special, recipe)
    torch.manual_seed(seed)
    hf = (ModernBertForMaskedLM if name == MODERNBERT else DebertaV2ForMaskedLM)(cfg)
    model = MaskedLM(hf)
    with torch.no_grad():
        model.output_bias.copy_(unigram_log_probs(examples, tokenizer.vocab_size, tokenizer.special_ids))
    return model


def successor_train_config(seed: int, steps: int, eval_every: int = 0,
                           mask_rate: float = MASK_RATE) -> TrainConfig:
    """The book's recipe stopped after ``steps`` of its 6,000-step schedule (as chapter 10's recipe
    experiment stops it), evaluated every ``eval_every`` steps on the usual blanks (15%, all
    [MASK]) whatever ``mask_rate`` it trains with; the bias is set before training."""
    corruption = {**BOOK_RECIPE_32["corruption"], "select": mask_rate}
    return TrainConfig(**{**BOOK_RECIPE_32, "stop_at_step": steps, "save_every": 0, "threads": None,
                          "progress": False, "seed": seed, "unigram_bias_init": False,
                          "eval_every": eval_every, "corruption": corruption})


def train_encoder(name: str, seed: int, steps: int, eval_every: int = 0,
                  mask_rate: float = MASK_RATE) -> TrainResult:
    """One encoder trained on the book's recipe for ``steps`` steps; its held-out scores every
    ``eval_every`` steps are in the history (the same blanks as every chapter's)."""
    cfg = successor_train_config(seed, steps, eval_every, mask_rate)
    data = chapter_data(cfg.max_seq_length)
    if name == BERT:
        model = build_model(**cfg.model_options(data.tokenizer.vocab_size))
        init_unigram_bias(model, data.train_examples, data.tokenizer.special_ids)
    else:
        model = build_successor(name, data.tokenizer, data.train_examples, seed)
    check_arm(model, cfg, mask_rate)
    return train(model, data.tokenizer, data.train_examples, cfg,
                 valid_examples=data.valid_examples if eval_every else None)


def successor_metrics(name: str, seed: int, steps: int = STEPS,
                      mask_rate: float = MASK_RATE) -> dict[str, float]:
    """One arm and seed of the successors experiment: the held-out loss and accuracy every
    EVAL_EVERY steps (``mlm_loss_40``...), at the end (``mlm_loss``, ``mlm_acc``), and the training
    seconds per step on the machine that ran it (``s_per_step``, not a reproduced number)."""
    result = train_encoder(name, seed, steps, eval_every=EVAL_EVERY, mask_rate=mask_rate)
    evals = result.history.columns("step", "mlm_loss", "mlm_acc", kind="eval")
    metrics = {f"{key}_{step}": value for key in ("mlm_loss", "mlm_acc")
               for step, value in zip(evals["step"], evals[key])}
    return {**metrics, "mlm_loss": evals["mlm_loss"][-1], "mlm_acc": evals["mlm_acc"][-1],
            "s_per_step": result.elapsed / result.step}


# ---------------------------------------------------------------- what each encoder is, read off it

@dataclass(frozen=True)
class Anatomy:
    """What an encoder's layers are, read from its config and modules (the drawing shows this,
    and :func:`check_arm` holds the experiment's arms to their papers with it)."""

    name: str
    positions: str  # "learned", "rotary" or "relative"
    norm: str  # "post-LN" or "pre-norm"
    feed_forward: str  # "GELU" or "GeGLU"
    inner: int  # the feed-forward's inner width
    biases: int  # bias parameters outside the output layer's vocabulary bias
    attention: tuple[str, ...]  # per layer: "global" or "local <window>"
    parameters: int  # the encoder and its MLM head (BERT's pooler and NSP head left out)
    layers: int
    hidden: int
    heads: int


def anatomy(model: nn.Module) -> Anatomy:
    """The :class:`Anatomy` of the book's ``BertForPreTraining`` or a :class:`MaskedLM`."""
    cfg = model.config
    named = dict(model.named_parameters())
    vocab_bias = {k for k, p in named.items() if k.endswith("bias") and p.shape == (cfg.vocab_size,)}
    if isinstance(model, MaskedLM) and isinstance(model.hf, ModernBertForMaskedLM):
        name, positions, norm, ff, inner = MODERNBERT, "rotary", "pre-norm", "GeGLU", cfg.intermediate_size
        attention = tuple("global" if t == "full_attention" else f"local {cfg.local_attention}"
                          for t in cfg.layer_types)
        counted = named
    elif isinstance(model, MaskedLM):
        name, norm, ff, inner = DEBERTA, "post-LN", "GELU", cfg.intermediate_size
        positions = ("learned + relative" if cfg.position_biased_input else "relative") \
            if cfg.relative_attention else "learned"
        attention, counted = ("global",) * cfg.num_hidden_layers, named
    else:
        name, positions, norm, ff, inner = BERT, "learned", "post-LN", "GELU", cfg.intermediate_size
        attention = ("global",) * cfg.num_hidden_layers
        counted = {k: p for k, p in named.items()
                   if not (k.startswith("bert.pooler") or "seq_relationship" in k)}
    biases = sum(p.numel() for k, p in counted.items() if k.endswith("bias") and k not in vocab_bias)
    return Anatomy(name, positions, norm, ff, inner, biases, attention,
                   sum(p.numel() for p in counted.values()), cfg.num_hidden_layers, cfg.hidden_size,
                   cfg.num_attention_heads)


# What the papers' encoders are (ModernBERT: Warner et al. 2024, section 2.1; DeBERTa-v3-base's
# config.json), and the one objective all three arms share.
PAPERS = {BERT: dict(positions="learned", norm="post-LN", feed_forward="GELU"),
          MODERNBERT: dict(positions="rotary", norm="pre-norm", feed_forward="GeGLU", biases=0),
          DEBERTA: dict(positions="relative", norm="post-LN", feed_forward="GELU")}


def check_arm(model: nn.Module, cfg: TrainConfig, mask_rate: float = MASK_RATE) -> Anatomy:
    """The encoder's :class:`Anatomy`, after checking it is its paper's and that ``cfg`` trains
    it with the experiment's objective (MLM, 15%, 80/10/10): a changed config cannot pass as the
    same arm."""
    a = anatomy(model)
    wrong = {k: getattr(a, k) for k, v in PAPERS[a.name].items() if getattr(a, k) != v}
    if wrong:
        raise ValueError(f"{a.name} is not its paper's encoder: {wrong} (expected "
                         f"{ {k: PAPERS[a.name][k] for k in wrong} })")
    if cfg.corruption.select != mask_rate or cfg.nsp:
        raise ValueError(f"the arm learns MLM at {mask_rate:.0%} without NSP; this config masks "
                         f"{cfg.corruption.select:.0%}{' with NSP' if cfg.nsp else ''}")
    return a


def mask_rate_metrics(arm: str, seed: int) -> dict[str, float]:
    """One arm of the mask-rate ablation: ModernBERT trained at the arm's rate, scored as above."""
    return successor_metrics(MODERNBERT, seed, mask_rate=MASK_RATE_ARMS[arm])


def score_at(results: Any, name: str, metric: str, step: float) -> list[float]:
    """Each seed's ``metric`` (``mlm_acc`` or ``mlm_loss``) of ``name`` at ``step``, read linearly
    between the two scored steps around it (the runs are scored every EVAL_EVERY steps)."""
    if not EVAL_EVERY <= step <= STEPS:
        raise ValueError(f"step {step} lies outside the scored steps {EVAL_EVERY}..{STEPS}")
    low = min(EVAL_EVERY * int(step // EVAL_EVERY), STEPS - EVAL_EVERY)
    share = (step - low) / EVAL_EVERY
    before, after = (results.values(name, f"{metric}_{k}") for k in (low, low + EVAL_EVERY))
    return [a + share * (b - a) for a, b in zip(before, after)]
