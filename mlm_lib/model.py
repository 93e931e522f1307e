"""BERT as in Devlin et al. (2019): embeddings, a post-LN Transformer encoder, the pooler, and the
two pretraining heads (masked language modelling and next sentence prediction).

Read it top-down: the embeddings, attention, one layer, the encoder, the heads, the pretraining
model and its training path; the hyperparameters are :class:`~mlm_lib.config.BertConfig` and the
initial weights come from :mod:`mlm_lib.weights`. The numbers match Hugging Face's
``BertForPreTraining`` (``mlm_lib.hf`` loads and saves their folders). One difference in layout:
the query, key and value projections are one ``Linear`` of width 3H (one matrix multiply instead
of three); ``mlm_lib.hf`` splits and joins them.

Given the set M (``masked_positions``), the MLM head gathers the rows of M *first* and scores only
those against the vocabulary: the loss is the same, because positions outside M never enter it,
and with 15% masking 85% of the largest matrix multiply is skipped. Training also passes the
original tokens of M (``targets``) and so takes the training path, two more shortcuts with the
same numbers: the last layer computes only the rows the heads read ([CLS] and M, the layers'
``forward_at``), and the loss comes from :func:`~mlm_lib.loss.masked_nll`, which never keeps the
[|M|, V] logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mlm_lib.config import ACTIVATIONS, BertConfig
from mlm_lib.loss import masked_nll, target_log_probs
from mlm_lib.weights import init_bert_weights, seeded_generator


# The heads draw from their own seeded generator (seed + this), so the encoder's initial weights
# are the same whether or not heads sit on top of it.
HEADS_SEED_OFFSET = 1


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

    Two paths give the same numbers (:meth:`attend`): ``F.scaled_dot_product_attention`` (fused
    kernels) and an explicit one that also returns the attention probabilities, for the chapters
    that draw them. :meth:`forward_at` asks at a few positions only (the training path).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)  # [W_Q; W_K; W_V]
        self.dropout_p = config.attention_probs_dropout_prob
        self.use_sdpa = config.use_sdpa

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, need_probs: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` [B, T, H] -> ([B, T, H], the probabilities [B, A, T, T] when ``need_probs``)."""
        B, T, H = x.shape
        # the heads of Q, K and V, each [B, A, T, d]
        q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return self.attend(q, k, v, bias, need_probs)

    def forward_at(self, x: torch.Tensor, rows: torch.Tensor, bias: torch.Tensor | None = None,
                   need_probs: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` for the queries at ``rows`` [B, Q] only: [B, Q, H] (and [B, A, Q, T]).
        Every position is still read (keys and values); the training path's last layer."""
        B, T, H = x.shape
        W, b = self.qkv.weight, self.qkv.bias
        q = F.linear(_gather_rows(x, rows), W[:H], b[:H]).view(B, -1, self.num_heads, self.head_dim)
        kv = F.linear(x, W[H:], b[H:]).view(B, T, 2, self.num_heads, self.head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4)
        return self.attend(q.transpose(1, 2), k, v, _bias_at(bias, rows), need_probs)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               bias: torch.Tensor | None = None, need_probs: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """softmax(Q K^T / sqrt(d) + bias) V in every head (queries [B, A, Tq, d], keys and values
        [B, A, T, d]), the heads side by side again: [B, Tq, H]; and the probabilities
        [B, A, Tq, T] when ``need_probs`` (the explicit path; the fused kernel keeps none)."""
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
        return ctx.transpose(1, 2).flatten(2), probs


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

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None, need_probs: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` [B, T, H] -> (the layer's output [B, T, H], the attention probabilities)."""
        a, probs = self.attention(x, bias, need_probs)
        x = self.attention_norm(x + self.dropout(self.attention_output(a)))
        h = self.output(self.act(self.intermediate(x)))
        return self.output_norm(x + self.dropout(h)), probs

    def forward_at(self, x: torch.Tensor, rows: torch.Tensor, bias: torch.Tensor | None = None,
                   need_probs: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`forward` at the positions ``rows`` [B, Q] only: [B, Q, H] (attention still reads
        every position)."""
        a, probs = self.attention.forward_at(x, rows, bias, need_probs)
        x = self.attention_norm(_gather_rows(x, rows) + self.dropout(self.attention_output(a)))
        h = self.output(self.act(self.intermediate(x)))
        return self.output_norm(x + self.dropout(h)), probs


def _check_encoder_inputs(config: BertConfig, input_ids: torch.Tensor,
                          token_type_ids: torch.Tensor | None, attention_mask: torch.Tensor | None
                          ) -> None:
    """Turn the usual mistakes into ValueErrors that say what is wrong.

    Shapes are checked everywhere; the ranges of the ids only on the CPU, where reading them is
    free (on a GPU it would stall every step, and an out-of-range id fails in the lookup anyway),
    and not in a traced graph (the ONNX export), which keeps no Python checks."""
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
    if input_ids.device.type != "cpu" or not input_ids.numel() or torch.jit.is_tracing():
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
        init_bert_weights(self, config.initializer_range, seeded_generator(seed))

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
            if last_layer_rows is not None and i == len(self.layers) - 1:
                x, probs = layer.forward_at(x, last_layer_rows, bias, need_probs=output_attentions)
            else:
                x, probs = layer(x, bias, need_probs=output_attentions)
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
        _check_encoder_inputs(self.config, input_ids, token_type_ids, attention_mask)
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
        init_bert_weights(self.cls, config.initializer_range, seeded_generator(heads_seed))

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


def check_model_fits(model: nn.Module, vocab_size: int, seq_len: int) -> None:
    """A model trained on some data must share its tokenizer's vocabulary and read sequences of
    its length; a mismatch would otherwise surface as an index error deep inside the embeddings."""
    if model.config.vocab_size != vocab_size:
        raise ValueError(f"the model has a vocabulary of {model.config.vocab_size}, the "
                         f"data's tokenizer {vocab_size}")
    if model.config.max_position_embeddings < seq_len:
        raise ValueError(f"the model reads at most {model.config.max_position_embeddings} "
                         f"positions; the sequences have {seq_len}")
