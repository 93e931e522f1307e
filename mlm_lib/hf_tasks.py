"""Fine-tuned heads in Hugging Face's layout: a :class:`~mlm_lib.tasks.BertTokenClassifier` as
``BertForTokenClassification``, a :class:`~mlm_lib.tasks.BertSpanHead` as
``BertForQuestionAnswering``, a :class:`~mlm_lib.finetune.BertClassifier` as
``BertForSequenceClassification``.

The encoder's names are :mod:`mlm_lib.hf`'s; only the head's layer is renamed (``classifier``
stays ``classifier``; the span head's is ``qa_outputs``, two outputs: start, end). The token and
span classes of transformers build their encoder without a pooler, so the pooler is not written
for them. Nothing here imports transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from mlm_lib.finetune import BertClassifier, FinetunedBert
from mlm_lib.hf import hf_names
from mlm_lib.tasks import BertSpanHead, BertTokenClassifier

# our head class -> (transformers' class, its head layer's name, whether it keeps the pooler)
HF_TASK_LAYOUT: dict[type, tuple[str, str, bool]] = {
    BertTokenClassifier: ("BertForTokenClassification", "classifier", False),
    BertSpanHead: ("BertForQuestionAnswering", "qa_outputs", False),
    BertClassifier: ("BertForSequenceClassification", "classifier", True),
}


def _layout(model: FinetunedBert) -> tuple[str, str, bool]:
    for cls in type(model).__mro__:
        if cls in HF_TASK_LAYOUT:
            return HF_TASK_LAYOUT[cls]
    raise ValueError(f"no Hugging Face layout for {type(model).__name__}; one of "
                     f"{[c.__name__ for c in HF_TASK_LAYOUT]}")


def hf_task_state_dict(model: FinetunedBert) -> dict[str, torch.Tensor]:
    """The model's weights under transformers' names, float32, on the CPU."""
    _, head, pooled = _layout(model)
    out = {}
    for name, value in model.state_dict().items():
        if name.startswith("classifier."):
            names = [head + name[len("classifier"):]]
        elif name.startswith("bert."):
            if name.startswith("bert.pooler.") and not pooled:
                continue
            names = hf_names(name)
        else:
            raise ValueError(f"{type(model).__name__} has a parameter {name!r} with no "
                             f"Hugging Face name")
        for n, part in zip(names, value.chunk(len(names), 0)):
            out[n] = part.detach().to("cpu", torch.float32).contiguous().clone()
    return out


def save_hf_task_model(model: FinetunedBert, folder: str | Path) -> None:
    """Write config.json and model.safetensors that transformers' task class loads (the class is
    named in the config's ``architectures``)."""
    architecture, _, _ = _layout(model)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(hf_task_state_dict(model), folder / "model.safetensors", metadata={"format": "pt"})
    config = {k: v for k, v in model.config.to_dict().items() if k != "use_sdpa"}
    config.update(model_type="bert", architectures=[architecture], num_labels=model.num_labels,
                  classifier_dropout=model.dropout.p, position_embedding_type="absolute",
                  is_decoder=False)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
