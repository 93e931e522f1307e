"""BERT as in Devlin et al. (2019): embeddings, a post-LN Transformer encoder, the pooler, and the
two pretraining heads (masked language modelling and next sentence prediction).

The numbers match Hugging Face's ``BertForPreTraining`` (see ``mlm_lib.hf`` for loading and saving
their folders). Two differences in layout make training faster without changing the maths:

- the query, key and value projections are one ``Linear`` of width 3H (one matrix multiply instead
  of three); ``mlm_lib.hf`` splits and joins them when it talks to Hugging Face;
- given the set M (``masked_positions``), the MLM head gathers the masked rows *first* and projects
  only those onto the vocabulary. With 15% masking that skips 85% of the largest matrix multiply
  in the model, and the loss is the same because positions outside M never enter it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# Activation names as they appear in Hugging Face's config.json. "gelu" is the exact (erf) GELU of
# the original BERT; the tanh approximation is kept only so that such checkpoints load.
ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


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
    use_sdpa: bool = True  # fast attention path; the explicit path is used when it is False

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
        if not self.initializer_range > 0:
            raise ValueError(f"BertConfig.initializer_range must be positive, got {self.initializer_range!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"BertConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"BertConfig.pad_token_id must be in [0, vocab_size), got {self.pad_token_id!r}"
            )

    # Sizes of Google's BERT miniatures (Turc et al. 2019) and BERT-base: (L, H, A).
    PRESETS = {
        "tiny": (2, 128, 2),
        "mini": (4, 256, 4),
        "small": (4, 512, 8),
        "base": (12, 768, 12),
    }

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A named size: ``tiny`` and ``mini`` train on a laptop CPU, ``small`` and ``base`` want a GPU."""
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
    last_hidden_state: torch.Tensor  # [B, T, H]
    pooled_output: torch.Tensor  # [B, H], tanh(W h_[CLS] + b)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # each layer, [B, A, T, T]


@dataclass
class PreTrainingOutput:
    mlm_logits: torch.Tensor | None  # [|M|, V] with masked_positions, else [B, T, V]; None with mlm_targets
    nsp_logits: torch.Tensor  # [B, 2]; column 0 = IsNext, 1 = NotNext (Google's order)
    last_hidden_state: torch.Tensor | None  # None with the ``last_layer_rows_only`` shortcut
    pooled_output: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    mlm_nll: torch.Tensor | None = None  # [|M|], -log P(x_i | x_\M), only with mlm_targets
    mlm_predictions: torch.Tensor | None = None  # [|M|] arg-max token ids, only with mlm_targets


class BertEmbeddings(nn.Module):
    """Token + learned absolute position + segment embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        T = input_ids.size(1)
        # Position embeddings are a slice of the table (positions 0..T-1 are the same in every row).
        x = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings.weight[:T])
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head self-attention, softmax(Q K^T / sqrt(d) + mask) V, with a fused QKV projection.

    Two paths give the same numbers: ``F.scaled_dot_product_attention`` (fast, fused kernels) and an
    explicit one that also returns the attention probabilities, for the chapters that draw them.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)  # [W_Q; W_K; W_V]
        self.dropout_p = config.attention_probs_dropout_prob
        self.use_sdpa = config.use_sdpa

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, need_probs: bool = False,
                query_index: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``mask`` is additive, [B, 1, 1, T]: 0 for real keys, a large negative number for padding.

        ``query_index`` ([B, Q] positions) computes the output only for those query rows; keys and
        values still come from every position.
        """
        B, T, H = x.shape
        if query_index is None:
            q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        else:
            W, b = self.qkv.weight, self.qkv.bias
            xq = x.gather(1, query_index[..., None].expand(-1, -1, H))
            T = query_index.size(1)
            q = F.linear(xq, W[:H], b[:H]).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
            kv = F.linear(x, W[H:], b[H:]).view(B, -1, 2, self.num_heads, self.head_dim)
            k, v = kv.permute(2, 0, 3, 1, 4)
        p = self.dropout_p if self.training else 0.0
        probs = None
        if self.use_sdpa and not need_probs:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            # The mask is finite (the dtype's minimum), so an all-padding row gives a uniform row
            # instead of 0/0 = NaN.
            probs = scores.softmax(dim=-1)
            ctx = F.dropout(probs, p) @ v
        return ctx.transpose(1, 2).reshape(B, T, H), probs


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, need_probs: bool = False,
                query_index: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """With ``query_index`` ([B, Q]) only those rows are computed, and the output is [B, Q, H]."""
        a, probs = self.attention(x, mask, need_probs, query_index)
        if query_index is not None:
            x = x.gather(1, query_index[..., None].expand(-1, -1, x.size(-1)))
        x = self.attention_norm(x + self.dropout(self.attention_output(a)))
        h = self.output(self.act(self.intermediate(x)))
        x = self.output_norm(x + self.dropout(h))
        return x, probs


def truncated_normal_(t: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Fill ``t`` with normal(0, std) values cut at +-2 std, redrawing those outside (as TensorFlow
    does). Faster on CPU than ``nn.init.trunc_normal_``, whose inverse-CDF method is slow there."""
    if t.is_meta:  # shapes only (e.g. counting parameters): nothing to fill
        return t
    if generator is not None and generator.device != t.device:  # e.g. built under a cuda device
        with torch.no_grad():
            return t.copy_(truncated_normal_(torch.empty(t.shape, dtype=t.dtype), std, generator))
    with torch.no_grad():
        t.normal_(0.0, std, generator=generator)
        bad = t.abs() > 2 * std
        values = torch.empty(int(bad.sum()), dtype=t.dtype, device=t.device)
        redo = torch.ones_like(values, dtype=torch.bool)
        while redo.any():
            values[redo] = std * torch.randn(int(redo.sum()), generator=generator, dtype=t.dtype,
                                             device=t.device)
            redo = values.abs() > 2 * std
        t[bad] = values
    return t


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


def _check_inputs(config: BertConfig, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None,
                  attention_mask: torch.Tensor | None) -> None:
    """Turn the usual mistakes into ValueErrors that say what is wrong."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError(f"input_ids must be a 2-D tensor [batch, seq_len], got "
                         f"{getattr(input_ids, 'shape', type(input_ids))}")
    if input_ids.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8):
        raise ValueError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}")
    B, T = input_ids.shape
    if T == 0:
        raise ValueError("input_ids has seq_len 0")
    if T > config.max_position_embeddings:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings "
                         f"({config.max_position_embeddings})")
    if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= config.vocab_size):
        raise ValueError(f"input_ids must be in [0, vocab_size={config.vocab_size}), got values in "
                         f"[{int(input_ids.min())}, {int(input_ids.max())}]")
    for name, t in (("token_type_ids", token_type_ids), ("attention_mask", attention_mask)):
        if t is not None and tuple(t.shape) != (B, T):
            raise ValueError(f"{name} must have the shape of input_ids {(B, T)}, got {tuple(t.shape)}")
    if token_type_ids is not None and token_type_ids.numel() and (
            token_type_ids.min() < 0 or token_type_ids.max() >= config.type_vocab_size):
        raise ValueError(f"token_type_ids must be in [0, type_vocab_size={config.type_vocab_size})")


class BertModel(nn.Module):
    """The encoder: embeddings, L post-LN layers, and the pooler (tanh on the [CLS] vector)."""

    def __init__(self, config: BertConfig, seed: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        init_bert_weights(self, config.initializer_range, gen)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False,
                last_layer_index: torch.Tensor | None = None) -> EncoderOutput:
        """``last_layer_index`` ([B, Q] positions, position 0 first) is a training shortcut: the last
        layer then computes only those rows, and ``last_hidden_state`` is [B, Q, H]."""
        _check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        if last_layer_index is not None and (output_hidden_states or output_attentions):
            raise ValueError("last_layer_index cannot be combined with output_hidden_states or "
                             "output_attentions (the last layer would be partial)")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        mask = self.additive_mask(attention_mask, x.dtype)
        hidden = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x, probs = layer(x, mask, output_attentions, last_layer_index if i == last else None)
            if hidden is not None:
                hidden.append(x)
            if attentions is not None:
                attentions.append(probs)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return EncoderOutput(x, pooled, tuple(hidden) if hidden is not None else None,
                             tuple(attentions) if attentions is not None else None)

    @staticmethod
    def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
        """[B, T] 1/0 padding mask -> additive [B, 1, 1, T] mask, built once for all layers.

        Returns None when nothing is padded, so attention runs without a mask at all. Padding gets
        the dtype's minimum rather than -inf: a row that is all padding then stays finite.
        """
        if attention_mask is None or bool(attention_mask.all()):
            return None
        keep = attention_mask.bool()[:, None, None, :]
        return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(
            ~keep, torch.finfo(dtype).min)


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

    def mlm_nll(self, h: torch.Tensor, word_embeddings: torch.Tensor, targets: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """-log P(x_i | x_\\M) and the arg-max for rows ``h`` [|M|, H], without materialising the
        logits for autograd (``mlm_lib.loss.masked_nll``)."""
        from mlm_lib.loss import masked_nll
        return masked_nll(self.transform_hidden(h), word_embeddings, self.predictions_bias, targets)


class BertForPreTraining(nn.Module):
    """BERT with its two pretraining heads. ``.bert`` is the encoder, ``.cls`` the heads."""

    def __init__(self, config: BertConfig, seed: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config, seed=seed)
        self.cls = BertPreTrainingHeads(config)
        gen = torch.Generator().manual_seed(seed + 1) if seed is not None else None
        init_bert_weights(self.cls, config.initializer_range, gen)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None,
                masked_positions: torch.Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False,
                last_layer_rows_only: bool = False,
                mlm_targets: torch.Tensor | None = None) -> PreTrainingOutput:
        """With ``masked_positions`` (bool [B, T], the set M) the MLM logits are [|M|, V], one row per
        masked token in row-major order (the order of ``input_ids[masked_positions]``); without it
        they are [B, T, V], every position (the chapters use this to look at all predictions).

        ``last_layer_rows_only`` (with ``masked_positions``) is a training fast path: the heads read
        only the rows of M and [CLS], so the last layer computes only those rows (its keys and
        values still see every position). Same logits and gradients; ``last_hidden_state`` is then
        None. Ignored when hidden states or attentions are requested.

        ``mlm_targets`` ([|M|], the original tokens of M in the same order, with
        ``masked_positions``) is the other training fast path: the output then carries ``mlm_nll``
        (-log P(x_i | x_\\M) per masked token) and ``mlm_predictions`` instead of the [|M|, V]
        logits, computed by the fused ``mlm_lib.loss.masked_nll``.
        """
        if masked_positions is not None:
            if tuple(masked_positions.shape) != tuple(input_ids.shape):
                raise ValueError(f"masked_positions must have the shape of input_ids "
                                 f"{tuple(input_ids.shape)}, got {tuple(masked_positions.shape)}")
            if masked_positions.dtype != torch.bool:
                raise ValueError(f"masked_positions must be a bool tensor, got {masked_positions.dtype}")
        shortcut = (last_layer_rows_only and masked_positions is not None and not output_attentions
                    and not output_hidden_states)
        index = rows = None
        if shortcut:
            index, rows = _last_layer_rows(masked_positions)
        enc = self.bert(input_ids, token_type_ids, attention_mask, output_attentions,
                        output_hidden_states, last_layer_index=index)
        h = enc.last_hidden_state
        if shortcut:
            h = h[rows]  # [|M|, H], still in row-major order of M
        elif masked_positions is not None:
            h = h[masked_positions]  # gather first: [|M|, H]
        decoder = self.bert.embeddings.word_embeddings.weight
        nsp = self.cls.seq_relationship(enc.pooled_output)
        last = None if shortcut else enc.last_hidden_state
        if mlm_targets is not None:
            if masked_positions is None:
                raise ValueError("mlm_targets needs masked_positions (the set M they belong to)")
            nll, pred = self.cls.mlm_nll(h, decoder, mlm_targets)
            return PreTrainingOutput(None, nsp, last, enc.pooled_output, enc.hidden_states,
                                     enc.attentions, mlm_nll=nll, mlm_predictions=pred)
        mlm = self.cls.mlm_logits(h, decoder)
        return PreTrainingOutput(mlm, nsp, last, enc.pooled_output, enc.hidden_states, enc.attentions)


def _last_layer_rows(masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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
