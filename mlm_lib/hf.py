"""Load and save Hugging Face BERT folders (config.json + model.safetensors or pytorch_model.bin).

Reads the ``BertForPreTraining``, ``BertForMaskedLM`` and ``BertModel`` layouts, old checkpoints'
LayerNorm names (``gamma``/``beta``) and the ``position_ids`` buffer some of them store, and the
folder's ``vocab.txt`` (:func:`load_hf_tokenizer`). Writes a folder that
``transformers.BertForPreTraining.from_pretrained`` (or ``BertModel``) loads, and, given the
tokenizer, ``AutoTokenizer`` and ``pipeline("fill-mask")`` too.
Nothing here imports transformers: the format is just names and tensors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from mlm_lib.config import BertConfig
from mlm_lib.files import audit_read, read_text
from mlm_lib.model import BertForPreTraining, BertModel
from mlm_lib.tokenizer import WordPieceTokenizer

# Our parameter name (inside BertModel / the heads) -> Hugging Face's. "{i}" is the layer index.
_ENCODER_NAMES = {
    "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
    "layers.{i}.attention_output.weight": "encoder.layer.{i}.attention.output.dense.weight",
    "layers.{i}.attention_output.bias": "encoder.layer.{i}.attention.output.dense.bias",
    "layers.{i}.attention_norm.weight": "encoder.layer.{i}.attention.output.LayerNorm.weight",
    "layers.{i}.attention_norm.bias": "encoder.layer.{i}.attention.output.LayerNorm.bias",
    "layers.{i}.intermediate.weight": "encoder.layer.{i}.intermediate.dense.weight",
    "layers.{i}.intermediate.bias": "encoder.layer.{i}.intermediate.dense.bias",
    "layers.{i}.output.weight": "encoder.layer.{i}.output.dense.weight",
    "layers.{i}.output.bias": "encoder.layer.{i}.output.dense.bias",
    "layers.{i}.output_norm.weight": "encoder.layer.{i}.output.LayerNorm.weight",
    "layers.{i}.output_norm.bias": "encoder.layer.{i}.output.LayerNorm.bias",
    "pooler.weight": "pooler.dense.weight",
    "pooler.bias": "pooler.dense.bias",
}
_HEAD_NAMES = {
    "transform.weight": "predictions.transform.dense.weight",
    "transform.bias": "predictions.transform.dense.bias",
    "transform_norm.weight": "predictions.transform.LayerNorm.weight",
    "transform_norm.bias": "predictions.transform.LayerNorm.bias",
    "predictions_bias": "predictions.bias",
    "seq_relationship.weight": "seq_relationship.weight",
    "seq_relationship.bias": "seq_relationship.bias",
}
# Our fused projection is Hugging Face's three, stacked along the output dimension.
_QKV = re.compile(r"layers\.(\d+)\.attention\.qkv\.(weight|bias)$")

# Keys that carry no parameters (buffers), or duplicate a tied one: read, checked, then dropped.
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")

# The parts a folder may lack (the pooler, the NSP head of a BertForMaskedLM) start from BERT's
# initialisation with this seed, so that loading the same folder twice gives the same model.
INIT_SEED = 0


def hf_names(name: str) -> list[str]:
    """Hugging Face name(s) of one of our parameters (three for the fused QKV): the one mapping
    that both the pretraining model and the fine-tuned heads (:mod:`mlm_lib.hf_tasks`) are
    written with."""
    prefix = ""
    if name.startswith("bert."):
        prefix, name = "bert.", name[len("bert."):]
    elif name.startswith("cls."):
        return ["cls." + _HEAD_NAMES[name[len("cls."):]]]
    m = _QKV.match(name)
    if m:
        i, kind = m.groups()
        return [f"{prefix}encoder.layer.{i}.attention.self.{p}.{kind}" for p in ("query", "key", "value")]
    generic = re.sub(r"^layers\.\d+\.", "layers.{i}.", name)
    index = name.split(".")[1] if generic != name else ""
    return [prefix + _ENCODER_NAMES[generic].replace("{i}", index)]


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").exists():
        audit_read(folder / "model.safetensors")
        return load_file(folder / "model.safetensors")
    index = folder / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        for shard in shards:
            audit_read(folder / shard)
        return {k: v for shard in shards for k, v in load_file(folder / shard).items()}
    if (folder / "pytorch_model.bin").exists():
        # weights_only: a .bin is a pickle, and unpickling arbitrary objects can run code.
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise ValueError(f"{folder} has no model.safetensors, model.safetensors.index.json or "
                     f"pytorch_model.bin")


def _normalise(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Legacy names to current ones: LayerNorm gamma/beta -> weight/bias; drop buffers."""
    out = {}
    for key, value in weights.items():
        key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", key)
        key = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key)
        if key.endswith(_BUFFERS):
            continue
        out[key] = value
    return out


def _read_config(folder: str | Path) -> BertConfig:
    """Our BertConfig from a Hugging Face config.json (unknown keys are ignored)."""
    path = Path(folder) / "config.json"
    if not path.exists():
        raise ValueError(f"{folder} has no config.json")
    values = json.loads(path.read_text())
    if values.get("model_type", "bert") != "bert":
        raise ValueError(f"config.json model_type is {values['model_type']!r}, expected 'bert'")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError("only position_embedding_type 'absolute' is supported, got "
                         f"{values['position_embedding_type']!r}")
    return BertConfig.from_dict(values)


def load_hf_bert(folder: str | Path) -> BertForPreTraining | BertModel:
    """Load a local Hugging Face BERT folder.

    Returns ``BertForPreTraining`` for the ``BertForPreTraining`` and ``BertForMaskedLM`` layouts
    (the latter has no pooler and no NSP head: those two start from BERT's initialisation) and
    ``BertModel`` for a bare encoder (whose pooler may also be absent). Any other missing key, and
    any key we do not know, raises a ValueError that lists them.
    """
    folder = Path(folder)
    config = _read_config(folder)
    weights = _normalise(_read_weights(folder))

    has_prefix = any(k.startswith("bert.") for k in weights)
    if has_prefix and "cls.predictions.transform.dense.weight" in weights:
        model: BertForPreTraining | BertModel = BertForPreTraining(config, seed=INIT_SEED)
        may_miss = {"bert.pooler.weight", "bert.pooler.bias"}
        if "cls.seq_relationship.weight" not in weights:  # BertForMaskedLM
            may_miss |= {"cls.seq_relationship.weight", "cls.seq_relationship.bias"}
        # The decoder is tied to the word embeddings; old checkpoints store a copy of it (and of
        # the output bias). Accept the copy only if it is one.
        for copy, original in (("cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"),
                               ("cls.predictions.decoder.bias", "cls.predictions.bias")):
            if copy in weights:
                tensor = weights.pop(copy)
                if original not in weights:
                    weights[original] = tensor
                elif not torch.equal(tensor, weights[original]):
                    raise ValueError(f"{copy} differs from {original}: an untied MLM decoder is not "
                                     f"supported")
    else:
        model = BertModel(config, seed=INIT_SEED)
        if has_prefix:  # e.g. a BertForSequenceClassification: take its encoder, the rest is unexpected
            weights = {(k[len("bert."):] if k.startswith("bert.") else "unexpected:" + k): v
                       for k, v in weights.items()}
        may_miss = {"pooler.weight", "pooler.bias"}

    state, missing = {}, []
    for name in model.state_dict():
        names = hf_names(name)
        if all(n in weights for n in names):
            parts = [weights.pop(n) for n in names]
            state[name] = torch.cat(parts, 0) if len(parts) > 1 else parts[0]
        elif name not in may_miss:
            missing += [n for n in names if n not in weights]
    unexpected = sorted(k.removeprefix("unexpected:") for k in weights)
    if missing or unexpected:
        raise ValueError(f"cannot load {folder}: missing keys {missing}, unexpected keys {unexpected}")
    model.load_state_dict(state, strict=False)  # strict=False: only the allowed absentees stay
    return model


def save_hf_bert(model: BertForPreTraining | BertModel, folder: str | Path,
                 tokenizer: WordPieceTokenizer | None = None) -> None:
    """Write config.json and model.safetensors in Hugging Face's layout; given the model's
    ``tokenizer``, also its ``vocab.txt`` and a ``tokenizer_config.json``, so that
    ``AutoTokenizer`` reads the folder too.

    The tied decoder is not stored (as transformers does); transformers re-ties it on load. The
    tokenizer's config says how it lower-cases and that it reads at most as many pieces as the
    model has positions (``model_max_length``): without it transformers assumes 1e30, and
    ``truncation=True`` would not cut where the model fails.
    """
    if not isinstance(model, (BertForPreTraining, BertModel)):
        raise ValueError(f"save_hf_bert takes a BertForPreTraining or BertModel, got {type(model).__name__}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, value in model.state_dict().items():
        names = hf_names(name)
        for n, part in zip(names, value.chunk(len(names), 0)):
            tensors[n] = part.detach().to("cpu", torch.float32).contiguous().clone()
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = {k: v for k, v in model.config.to_dict().items() if k != "use_sdpa"}
    config.update(model_type="bert", architectures=[type(model).__name__],
                  position_embedding_type="absolute", tie_word_embeddings=True, is_decoder=False)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if tokenizer is not None:
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ValueError(f"the tokenizer has {tokenizer.vocab_size} pieces, the model "
                             f"{model.config.vocab_size}: they do not belong together")
        tokenizer.save_vocab(folder / "vocab.txt")
        settings = {"do_lower_case": tokenizer.do_lower_case, "tokenizer_class": "BertTokenizer",
                    "model_max_length": model.config.max_position_embeddings}
        (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")


def load_hf_tokenizer(folder: str | Path) -> WordPieceTokenizer:
    """The folder's ``vocab.txt`` as a :class:`WordPieceTokenizer`, lower-casing as its
    ``tokenizer_config.json`` says (``do_lower_case``; true when the file or the key is absent, as
    for bert-base-uncased)."""
    folder = Path(folder)
    if not (folder / "vocab.txt").is_file():
        raise FileNotFoundError(f"{folder} has no vocab.txt: a BERT folder keeps its WordPiece "
                                f"vocabulary there")
    config_file = folder / "tokenizer_config.json"
    config = json.loads(read_text(config_file, "a tokenizer_config.json")) if config_file.is_file() else {}
    return WordPieceTokenizer.from_vocab_file(folder / "vocab.txt",
                                              do_lower_case=bool(config.get("do_lower_case", True)))
