"""BERT as in Devlin et al. (2019): embeddings, a post-LN Transformer encoder, the pooler, and the
two pretraining heads (masked language modelling and next sentence prediction).

Read it top-down: the config, the embeddings, attention, one layer, the encoder, the heads, the
pretraining model and its training path, the fused masked NLL; initialisation comes last. The
numbers match Hugging Face's ``BertForPreTraining`` (``mlm_lib.hf`` loads and saves their
folders). One difference in layout: the query, key and value projections are one ``Linear`` of
width 3H (one matrix multiply instead of three); ``mlm_lib.hf`` splits and joins them.

Given the set M (``masked_positions``), the MLM head gathers the rows of M *first* and scores only
those against the vocabulary: the loss is the same, because positions outside M never enter it,
and with 15% masking 85% of the largest matrix multiply is skipped. Training also passes the
original tokens of M (``targets``) and so takes the training path, two more shortcuts with the
same numbers: the last layer computes only the rows the heads read ([CLS] and M), and the loss
comes from :func:`masked_nll`, which never keeps the [|M|, V] logits.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from mlm_lib.loss import target_log_probs


# Activation names as they appear in Hugging Face's config.json. "gelu" is the exact (erf) GELU of
# the original BERT; the tanh approximation is kept only so that such checkpoints load.
ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}

# A weight is drawn from a normal cut at this many standard deviations, as TensorFlow's
# truncated_normal_initializer (used by Google's BERT) does.
TRUNCATE_AT_STD = 2.0
# The heads draw from their own seeded generator (seed + this), so the encoder's initial weights
# are the same whether or not heads sit on top of it.
HEADS_SEED_OFFSET = 1


@dataclass
class BertConfig:
    """Hyperparameters of BERT; the defaults are BERT-base (110M parameters)."""

    vocab_size: int = 30522
    hidden_size: int = 768  # H
    num_hidden_layers: int = 12  # L
    num_attention_heads: int = 12  # A
    intermediate_size: int = 3072  # 4H, the feed-forward width
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    use_sdpa: bool = True  # fast attention kernel; the explicit path is used when it is False

    # Model sizes (L, H, A), one table for the whole library: the chapters' live experiments
    # ("micro", seconds per run on a laptop), Google's BERT miniatures (Turc et al. 2019), and
    # BERT-base and BERT-large as in Devlin et al. (2019), section 3.
    PRESETS = {
        "micro": (2, 64, 2),
        "tiny": (2, 128, 2),
        "mini": (4, 256, 4),
        "small": (4, 512, 8),
        "base": (12, 768, 12),
        "large": (24, 1024, 16),
    }

    def __post_init__(self) -> None:
        # Fail here, with the field's name, rather than with a shape error deep inside a layer.
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig.hidden_act must be one of {sorted(ACTIVATIONS)}, got {self.hidden_act!r}"
            )
        for name in ("initializer_range", "layer_norm_eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"BertConfig.{name} must be positive, got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"BertConfig.pad_token_id must be in [0, vocab_size), got {self.pad_token_id!r}"
            )

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A named size from :attr:`PRESETS` (feed-forward 4H); ``base`` and ``large`` want a GPU."""
        if name not in cls.PRESETS:
            raise ValueError(f"unknown BertConfig preset {name!r}; choose one of {sorted(cls.PRESETS)}")
        layers, hidden, heads = cls.PRESETS[name]
        values = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden)
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "BertConfig":
        """Build from a dict, ignoring keys that are not fields (e.g. a Hugging Face config.json)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor  # [B, T, H]; [B, Q, H] with last_layer_rows
    pooled_output: torch.Tensor  # [B, H], tanh(W h_[CLS] + b)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # each layer, [B, A, T, T]


@dataclass
class PreTrainingOutput:
    mlm_logits: torch.Tensor | None  # [|M|, V] with masked_positions, else [B, T, V]; None: fused loss
    nsp_logits: torch.Tensor  # [B, 2]; column 0 = IsNext, 1 = NotNext (Google's order)
    last_hidden_state: torch.Tensor | None  # None on the training path (not every row is computed)
    pooled_output: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    # The training path's (given targets): -log P(x_i | x_\M) and the arg-max, [|M|] in M's order
    mlm_nll: torch.Tensor | None = None
    mlm_predictions: torch.Tensor | None = None


# ---------------------------------------------------------------- embeddings

class BertEmbeddings(nn.Module):
    """Token + learned absolute position + segment embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        T = input_ids.size(1)
        # Position embeddings are a slice of the table (positions 0..T-1 are the same in every row).
        x = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings.weight[:T])
        return self.dropout(self.norm(x))


# ---------------------------------------------------------------- attention

def _additive_bias(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bool "this query may read this key" -> the additive attention bias: 0 where allowed, the
    dtype's minimum where not. The minimum rather than -inf keeps a row with nothing allowed (all
    padding) finite: it becomes uniform instead of 0/0 = NaN."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)


def _padding_bias(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """[B, T] 1/0 padding mask -> bias [B, 1, 1, T] that hides padded keys from every query.

    None when nothing is padded, so attention runs with no bias at all. That test reads the data,
    which would stall a GPU at every step, so it is made on the CPU only."""
    if attention_mask is None or (attention_mask.device.type == "cpu" and bool(attention_mask.all())):
        return None
    return _additive_bias(attention_mask.bool()[:, None, None, :], dtype)


def attention_bias(seq_len: int, causal: bool, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Bias [1, 1, T, T] for :class:`BertModel`'s ``attn_bias``: 0 where query i may read key
    j, a large negative number where it may not. Bidirectional (BERT): every j. Causal (GPT): only
    j <= i."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    return _additive_bias(allowed, dtype)[None, None]


def _gather_rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The positions ``rows`` [B, Q] of each sequence of ``x`` [B, T, H]: [B, Q, H]."""
    return x.gather(1, rows[..., None].expand(-1, -1, x.size(-1)))


def _bias_at(bias: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor | None:
    """The rows of the queries ``rows`` [B, Q] in an attention bias [B or 1, A or 1, T, T]; a bias
    that is the same for every query ([..., 1, T], padding only) is kept as it is."""
    if bias is None or bias.size(-2) == 1:
        return bias
    bias = bias.expand(rows.size(0), -1, -1, -1)
    return bias.gather(2, rows[:, None, :, None].expand(-1, bias.size(1), -1, bias.size(-1)))


class BertSelfAttention(nn.Module):
    """Multi-head self-attention, softmax(Q K^T / sqrt(d) + bias) V, with a fused QKV projection.

    Two paths give the same numbers: ``F.scaled_dot_product_attention`` (fused kernels) and an
    explicit one that also returns the attention probabilities, for the chapters that draw them.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)  # [W_Q; W_K; W_V]
        self.dropout_p = config.attention_probs_dropout_prob
        self.use_sdpa = config.use_sdpa

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, need_probs: bool = False,
                rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` [B, T, H] -> ([B, T, H], the probabilities [B, A, T, T] when ``need_probs``).

        With ``rows`` [B, Q] only those positions ask (are queries): [B, Q, H]; every position is
        still read (keys and values)."""
        B, T, H = x.shape
        if rows is None:  # the heads of Q, K and V, each [B, A, T, d]
            q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        else:
            q, k, v = self._heads_at(x, rows)
            bias = _bias_at(bias, rows)
        p = self.dropout_p if self.training else 0.0
        probs = None
        if self.use_sdpa and not need_probs:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            if bias is not None:
                scores = scores + bias
            probs = scores.softmax(dim=-1)
            ctx = F.dropout(probs, p) @ v
        return ctx.transpose(1, 2).flatten(2), probs  # the heads side by side again: [B, Tq, H]

    def _heads_at(self, x: torch.Tensor, rows: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q at the positions ``rows`` only ([B, A, Q, d]), K and V at every position."""
        B, T, H = x.shape
        W, b = self.qkv.weight, self.qkv.bias
        q = F.linear(_gather_rows(x, rows), W[:H], b[:H]).view(B, -1, self.num_heads, self.head_dim)
        kv = F.linear(x, W[H:], b[H:]).view(B, T, 2, self.num_heads, self.head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4)
        return q.transpose(1, 2), k, v


# ---------------------------------------------------------------- one layer, the encoder

class BertLayer(nn.Module):
    """One post-LN encoder layer: x = LN(x + Attn(x)); x = LN(x + FFN(x)), as in the original BERT."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attention_output = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, need_probs: bool = False,
                rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` [B, T, H] -> (the layer's output, the attention probabilities). With ``rows``
        [B, Q] only those positions are computed: [B, Q, H] (attention still reads them all)."""
        a, probs = self.attention(x, bias, need_probs, rows)
        if rows is not None:
            x = _gather_rows(x, rows)
        x = self.attention_norm(x + self.dropout(self.attention_output(a)))
        h = self.output(self.act(self.intermediate(x)))
        return self.output_norm(x + self.dropout(h)), probs


def _check_inputs(config: BertConfig, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                 attention_mask: torch.Tensor | None) -> None:
    """Turn the usual mistakes into ValueErrors that say what is wrong.

    Shapes are checked everywhere; the ranges of the ids only on the CPU, where reading them is
    free (on a GPU it would stall every step, and an out-of-range id fails in the lookup anyway)."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError(f"input_ids must be a 2-D tensor [batch, seq_len], got "
                         f"{getattr(input_ids, 'shape', type(input_ids))}")
    if input_ids.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8):
        raise ValueError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    B, T = input_ids.shape
    if T == 0 or T > config.max_position_embeddings:
        raise ValueError(f"sequence length {T} must be in [1, max_position_embeddings="
                         f"{config.max_position_embeddings}]")
    for name, t in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
        if t is not None and tuple(t.shape) != (B, T):
            raise ValueError(f"{name} must have the shape of input_ids {(B, T)}, got {tuple(t.shape)}")
    if input_ids.device.type != "cpu" or not input_ids.numel():
        return
    if input_ids.min() < 0 or input_ids.max() >= config.vocab_size:
        raise ValueError(f"input_ids must be in [0, vocab_size={config.vocab_size}), got values in "
                         f"[{int(input_ids.min())}, {int(input_ids.max())}]")
    if token_type_ids is not None and (token_type_ids.min() < 0
                                       or token_type_ids.max() >= config.type_vocab_size):
        raise ValueError(f"token_type_ids must be in [0, type_vocab_size={config.type_vocab_size})")


class BertModel(nn.Module):
    """The encoder: embeddings, L post-LN layers, and the pooler (tanh on the [CLS] vector)."""

    def __init__(self, config: BertConfig, seed: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        init_bert_weights(self, config.initializer_range, _seeded_generator(seed))

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, attn_bias: torch.Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False,
                last_layer_rows: torch.Tensor | None = None) -> EncoderOutput:
        """``attention_mask`` [B, T] marks real tokens (1) and padding (0). ``attn_bias`` adds any
        other rule of who may read whom, e.g. :func:`attention_bias` with ``causal=True``.

        ``last_layer_rows`` [B, Q], positions with [CLS] (0) first: the last layer computes only
        those, so ``last_hidden_state`` is [B, Q, H] (the training path: heads read few rows)."""
        x, bias = self.embed(input_ids, token_type_ids, attention_mask, attn_bias)
        hidden, attentions = [x], []
        for i, layer in enumerate(self.layers):
            rows = last_layer_rows if i == len(self.layers) - 1 else None
            x, probs = layer(x, bias, need_probs=output_attentions, rows=rows)
            hidden.append(x)
            attentions.append(probs)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # the sequence's vector, read at [CLS]
        return EncoderOutput(x, pooled, tuple(hidden) if output_hidden_states else None,
                             tuple(attentions) if output_attentions else None)

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
              attention_mask: torch.Tensor | None, attn_bias: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Check the inputs, then return the layers' input x [B, T, H] (the embeddings) and the one
        attention bias that every layer uses (padding plus ``attn_bias``)."""
        _check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        bias = _padding_bias(attention_mask, x.dtype)
        if attn_bias is not None:
            extra = attn_bias.to(x.device, x.dtype)
            bias = extra if bias is None else (bias + extra).clamp(min=torch.finfo(x.dtype).min)
        return x, bias


# ---------------------------------------------------------------- heads and the pretraining model

class BertPreTrainingHeads(nn.Module):
    """MLM head (transform: dense, GELU, LayerNorm; decoder tied to the word embeddings; output
    bias) and NSP head (a linear layer on the pooled [CLS] vector)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.predictions_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.seq_relationship = nn.Linear(config.hidden_size, 2)
        self.act = ACTIVATIONS[config.hidden_act]

    def transform_hidden(self, h: torch.Tensor) -> torch.Tensor:
        """The head's transform before the vocabulary: dense, GELU, LayerNorm."""
        return self.transform_norm(self.act(self.transform(h)))

    def mlm_logits(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """Scores over the whole vocabulary V for each row of ``h`` ([..., H] -> [..., V])."""
        return F.linear(self.transform_hidden(h), word_embeddings, self.predictions_bias)


class BertForPreTraining(nn.Module):
    """BERT with its two pretraining heads. ``.bert`` is the encoder, ``.cls`` the heads."""

    def __init__(self, config: BertConfig, seed: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config, seed=seed)
        self.cls = BertPreTrainingHeads(config)
        heads_seed = None if seed is None else seed + HEADS_SEED_OFFSET
        init_bert_weights(self.cls, config.initializer_range, _seeded_generator(heads_seed))

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                masked_positions: torch.Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, targets: torch.Tensor | None = None,
                fused_loss: bool = True) -> PreTrainingOutput:
        """With ``masked_positions`` (bool [B, T], the set M) the MLM logits are [|M|, V], one row per
        masked token in row-major order (the order of ``input_ids[masked_positions]``); without it
        they are [B, T, V], every position (the chapters use this to look at all predictions).

        With ``targets`` too (the original tokens x_i of M, [|M|]) it is the training path: the
        same numbers with less work, as ``mlm_nll`` and ``mlm_predictions``."""
        if targets is not None:
            if output_attentions or output_hidden_states:
                raise ValueError("the training path (targets) keeps no attentions or hidden states")
            return self._training_forward(input_ids, token_type_ids, attention_mask,
                                          masked_positions, targets, fused_loss)
        enc = self.bert(input_ids, token_type_ids, attention_mask, output_attentions=output_attentions,
                        output_hidden_states=output_hidden_states)
        h = enc.last_hidden_state
        if masked_positions is not None:
            _check_positions(masked_positions, input_ids)
            h = h[masked_positions]  # gather the rows of M first: [|M|, H]
        mlm_logits = self.cls.mlm_logits(h, self.bert.embeddings.word_embeddings.weight)
        nsp_logits = self.cls.seq_relationship(enc.pooled_output)
        return PreTrainingOutput(mlm_logits, nsp_logits, enc.last_hidden_state, enc.pooled_output,
                                 enc.hidden_states, enc.attentions)

    def _training_forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                          attention_mask: torch.Tensor | None,
                          masked_positions: torch.Tensor | None, targets: torch.Tensor,
                          fused_loss: bool) -> PreTrainingOutput:
        """The last layer computes only the rows the heads read ([CLS] and M), and the loss comes
        from :func:`masked_nll` without keeping logits (``fused_loss=False``: from the logits of
        M, as :func:`~mlm_lib.loss.target_log_probs` does; they are returned then)."""
        if masked_positions is None:
            raise ValueError("targets are the original tokens of M: pass masked_positions too")
        _check_positions(masked_positions, input_ids)
        rows, in_m = _rows_the_heads_read(masked_positions)
        enc = self.bert(input_ids, token_type_ids, attention_mask, last_layer_rows=rows)
        h = enc.last_hidden_state[in_m]  # [|M|, H], in the row-major order of M
        decoder, logits = self.bert.embeddings.word_embeddings.weight, None
        if fused_loss:
            nll, predictions = masked_nll(self.cls.transform_hidden(h), decoder,
                                          self.cls.predictions_bias, targets)
        else:
            logits = self.cls.mlm_logits(h, decoder)
            nll, predictions = -target_log_probs(logits, targets), logits.argmax(-1)
        return PreTrainingOutput(logits, self.cls.seq_relationship(enc.pooled_output), None,
                                 enc.pooled_output, mlm_nll=nll, mlm_predictions=predictions)


def _check_positions(masked_positions: torch.Tensor, input_ids: torch.Tensor) -> None:
    """``masked_positions`` must be a bool tensor shaped like ``input_ids``."""
    if tuple(masked_positions.shape) != tuple(input_ids.shape):
        raise ValueError(f"masked_positions must have the shape of input_ids "
                         f"{tuple(input_ids.shape)}, got {tuple(masked_positions.shape)}")
    if masked_positions.dtype != torch.bool:
        raise ValueError(f"masked_positions must be a bool tensor, got {masked_positions.dtype}")


def _rows_the_heads_read(masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions the heads need, per sequence: [CLS] (position 0) then M in order, padded to the
    longest. Returns the index [B, Q] and a bool [B, Q] marking the entries that are in M."""
    needed = masked.clone()
    needed[:, 0] = True
    Q = int(needed.sum(1).max())
    # A stable sort puts the needed positions first, in increasing order; the tail is filler.
    index = torch.sort((~needed).to(torch.uint8), dim=1, stable=True).indices[:, :Q]
    real = torch.arange(Q, device=masked.device) < needed.sum(1, keepdim=True)
    return index, masked.gather(1, index) & real


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (the tied decoder is counted once, as it is stored once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_counts(config: BertConfig) -> dict[str, int]:
    """Parameters of :class:`BertForPreTraining` by part, from the config alone (no weights are
    built, so BERT-large costs nothing). The decoder is tied to the word embeddings: the MLM head
    adds only its transform and the output bias. ``count_parameters`` of the built model equals
    the sum (a test checks it)."""
    H, I, V = config.hidden_size, config.intermediate_size, config.vocab_size
    layer_norm = 2 * H  # a gain and a bias per dimension
    return {
        "embeddings": (V + config.max_position_embeddings + config.type_vocab_size) * H + layer_norm,
        # Q, K, V and the output projection (H x H each, with biases), the feed-forward block
        # (H -> I -> H), two LayerNorms; times L
        "layers": config.num_hidden_layers * (4 * (H * H + H) + (H * I + I) + (I * H + H)
                                              + 2 * layer_norm),
        "pooler": H * H + H,
        "mlm head": (H * H + H) + layer_norm + V,  # transform, its LayerNorm, the output bias
        "nsp head": 2 * H + 2,
    }


# ---------------------------------------------------------------- the fused masked NLL

class _MaskedNLL(torch.autograd.Function):
    """-log P(x_i | x_\\M) for each row of M straight from the hidden vectors (see
    :func:`masked_nll`). Forward: logits z = h W^T + b, one row of V scores per masked token; one
    max pass over each row gives the stabiliser *and* the prediction; the softmax is computed once,
    in place, and turned into dL/dz = softmax - one-hot right away. Backward is then just the two
    matrix products."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            dt = torch.promote_types(hidden.dtype, torch.float32)  # at least fp32 under AMP
            h, W, b = hidden.to(dt), weight.to(dt), bias.to(dt)
            z = torch.addmm(b, h, W.t())  # [|M|, V]
            top, predictions = z.max(dim=1)
            rows = torch.arange(h.size(0), device=h.device)
            target_logit = z[rows, targets]
            p = z.sub_(top[:, None]).exp_()
            total = p.sum(dim=1)
            nll = total.log() + top - target_logit  # logsumexp(z) - z[x_i]
            p.div_(total[:, None])
            p[rows, targets] -= 1.0  # d nll_i / d z_i
        ctx.save_for_backward(h, W, p)
        ctx.dtypes = (hidden.dtype, weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(predictions)
        return nll, predictions

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_nll: torch.Tensor, _grad_predictions: torch.Tensor | None):
        h, W, dz = ctx.saved_tensors
        g = grad_nll.to(dz.dtype)
        with torch.autocast(device_type=h.device.type, enabled=False):
            grad_h = (dz @ W) * g[:, None]  # scale the small matrices, never dz itself
            grad_W = dz.t() @ (h * g[:, None])
            grad_b = g @ dz
        dh, dw, db = ctx.dtypes
        return grad_h.to(dh), grad_W.to(dw), grad_b.to(db), None


def masked_nll(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
               targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-log P(x_i | x_\\M) for each i in M, and the arg-max prediction, without keeping logits.

    ``hidden`` is [|M|, H] (the MLM head's transformed vectors at the masked positions),
    ``weight`` [V, H] the decoder (BERT's tied word embeddings), ``bias`` [V], ``targets`` [|M|].
    The numbers are those of ``-target_log_probs(F.linear(hidden, weight, bias), targets)``; the
    fused version makes two passes over the [|M|, V] scores instead of the six or so of linear +
    log-softmax + gather and their backward (``test_loss`` checks the values and gradients
    against the plain functions).
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be [|M|, H] and targets [|M|], got {tuple(hidden.shape)} "
                         f"and {tuple(targets.shape)}")
    if weight.dim() != 2 or weight.size(1) != hidden.size(1) or bias.shape != weight.shape[:1]:
        raise ValueError(f"weight must be [V, {hidden.size(1)}] and bias [V], got "
                         f"{tuple(weight.shape)} and {tuple(bias.shape)}")
    if targets.device.type == "cpu" and targets.numel() and (
            targets.min() < 0 or targets.max() >= weight.size(0)):  # free on a CPU only
        raise ValueError(f"targets must be token ids in [0, {weight.size(0)})")
    return _MaskedNLL.apply(hidden, weight, bias, targets.long())


# ---------------------------------------------------------------- initialisation

def _seeded_generator(seed: int | None) -> torch.Generator | None:
    """A CPU generator seeded with ``seed``, or None (the global RNG) when no seed is given."""
    return torch.Generator().manual_seed(seed) if seed is not None else None


def init_bert_weights(module: nn.Module, std: float, generator: torch.Generator | None = None) -> None:
    """BERT's initialisation: weights ~ truncated normal(0, std) cut at +-2 std, biases 0, LayerNorm 1/0.

    Google's TensorFlow BERT used ``tf.truncated_normal_initializer(0.02)``, which is what we do;
    Hugging Face uses a plain (untruncated) normal. The padding row of the token embedding starts
    at zero, as in ``nn.Embedding(padding_idx=...)``.
    """
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            truncated_normal_(m.weight, std, generator)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for name, p in module.named_parameters():
        if name.endswith("predictions_bias"):
            nn.init.zeros_(p)


def truncated_normal_(t: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill ``t`` with normal(0, std) values cut at +-2 std, redrawing those outside (as TensorFlow
    does). Faster on CPU than ``nn.init.trunc_normal_``, whose inverse-CDF method is slow there."""
    if t.is_meta:  # shapes only (e.g. counting parameters): nothing to fill
        return t
    if generator is not None and generator.device != t.device:  # e.g. built under a cuda device
        with torch.no_grad():
            return t.copy_(truncated_normal_(torch.empty(t.shape, dtype=t.dtype), std, generator))
    limit = TRUNCATE_AT_STD * std
    with torch.no_grad():
        t.normal_(0.0, std, generator=generator)
        bad = t.abs() > limit
        values = torch.empty(int(bad.sum()), dtype=t.dtype, device=t.device)
        redo = torch.ones_like(values, dtype=torch.bool)
        while redo.any():
            values[redo] = std * torch.randn(int(redo.sum()), generator=generator, dtype=t.dtype,
                                             device=t.device)
            redo = values.abs() > limit
        t[bad] = values
    return t
