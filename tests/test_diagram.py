"""The drawing of BERT reads its sizes from the config, so it cannot drift from the code."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from mlm_lib.book.diagram import DIFFERS_COLOR, bert_diagram
from mlm_lib.config import BertConfig
from mlm_lib.sizes import parameter_counts

ODD = BertConfig(vocab_size=1234, hidden_size=96, num_hidden_layers=5, num_attention_heads=3,
                 intermediate_size=333, max_position_embeddings=77, type_vocab_size=2)


def _text(svg: str) -> str:
    return " ".join("".join(e.itertext()) for e in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"))


def test_every_size_in_the_drawing_comes_from_the_config():
    text = _text(bert_diagram(ODD, "odd"))
    total = sum(parameter_counts(ODD).values())
    for phrase in ["L = 5 layers", "3 heads of d = 32", "96 → 333 → 96", "V = 1,234 words",
                   "token: 1,234 × 96", "position: 77 × 96", "segment: 2 × 96", "at most 77 positions",
                   f"{total:,} parameters"]:
        assert phrase in text, f"{phrase!r} not in the drawing"


def test_the_drawing_has_the_parts_of_bert():
    text = _text(bert_diagram(ODD, "odd"))
    for part in ["post-LN", "self-attention", "feed-forward", "Add (residual) and LayerNorm", "pooler",
                 "NSP head", "tied token table", "GELU", "every position i in M", "[CLS] only"]:
        assert part in text, f"the drawing lacks {part!r}"


def test_numbers_that_differ_from_the_compared_config_are_marked():
    svg = bert_diagram(ODD, "odd", compare=BertConfig.preset("tiny", vocab_size=1234))
    marked = re.findall(rf"<tspan fill='{DIFFERS_COLOR}'[^>]*>([^<]+)</tspan>", svg)
    assert "96" in marked and "5" in marked and "333" in marked
    assert "1,234" not in marked  # the same vocabulary size: not marked
    assert "<tspan" not in bert_diagram(ODD, "odd", compare=ODD)


def test_two_drawings_on_one_page_do_not_share_ids():
    ids = [re.findall(r"id='([^']+)'", bert_diagram(ODD, title)) for title in ("one", "two")]
    assert ids[0] and not set(ids[0]) & set(ids[1])
