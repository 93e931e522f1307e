"""Chapter 12's drawing: every count read from the two models, the arms' table, clear errors."""

import xml.etree.ElementTree as ET

import pytest

from mlm_lib.book.finetune_diagram import finetune_diagram, part_sizes
from mlm_lib.config import BertConfig
from mlm_lib.finetune import BertClassifier
from mlm_lib.model import BertForPreTraining

SVG = "{http://www.w3.org/2000/svg}"
CONFIG = BertConfig(vocab_size=100, hidden_size=40, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32)


def test_the_drawing_counts_the_parts_of_the_models_it_is_given():
    model = BertForPreTraining(CONFIG, seed=0)
    clf = BertClassifier.from_pretraining(model, num_labels=3)
    n = part_sizes(model, clf)
    assert n["pooler"] == 40 * 40 + 40 and n["nsp head"] == 40 * 2 + 2 and n["classifier"] == 40 * 3 + 3
    assert n["encoder"] + n["pooler"] == sum(p.numel() for p in model.bert.parameters())
    root = ET.fromstring(finetune_diagram(model, clf))
    assert root.get("role") == "img" and root.find(SVG + "title") is not None
    text = " ".join(t.text or "" for t in root.iter(SVG + "text"))
    assert f"linear 40 → 3: {n['classifier']:,} parameters" in text
    assert f"{n['pooler']:,} + {n['nsp head']:,}, never trained" in text
    assert "frozen encoder" in text and "which of 3 labels?" in text


def test_a_classifier_from_another_model_is_refused():
    model = BertForPreTraining(CONFIG, seed=0)
    other = BertClassifier.from_pretraining(BertForPreTraining(
        BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=32), seed=0), num_labels=2)
    with pytest.raises(ValueError, match="hidden sizes"):
        part_sizes(model, other)
    with pytest.raises(ValueError, match="BertClassifier"):
        part_sizes(model, model)
