"""BERT's hyperparameters (:class:`BertConfig`) and the named sizes, from the chapters' "micro" to
BERT-large. A config is data: checkpoints and Hugging Face's ``config.json`` carry one, and
:mod:`mlm_lib.model` builds the network from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import torch.nn.functional as F

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
