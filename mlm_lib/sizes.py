"""How big a BERT is: its parameters counted from a built model, or by part from the config alone
(no weights built, so BERT-large costs nothing)."""

from __future__ import annotations

from torch import nn

from mlm_lib.config import BertConfig


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (the tied decoder is counted once, as it is stored once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_counts(config: BertConfig) -> dict[str, int]:
    """Parameters of :class:`~mlm_lib.model.BertForPreTraining` by part, from ``config`` alone.
    The decoder is tied to the word embeddings: the MLM head
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
