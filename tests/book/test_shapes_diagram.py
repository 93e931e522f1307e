"""The four task shapes' drawing: well-formed SVG with alt text, its parameter counts those of the
heads the library builds, and each softmax where the head runs it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from mlm_lib.book.shapes_diagram import shapes_diagram
from mlm_lib.config import BertConfig

CONFIG = BertConfig(vocab_size=100, hidden_size=40, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=32)


def test_the_drawing_reads_its_sizes_from_the_heads():
    html = shapes_diagram(CONFIG, {"one sentence": 2, "a pair": 3, "a label per token": 5})
    root = ET.fromstring(html)
    svgs = list(root.iter("{http://www.w3.org/2000/svg}svg"))
    assert len(svgs) == 4
    for svg in svgs:  # each drawing says what it shows
        assert svg.get("role") == "img" and svg.get("aria-label")
        assert svg.find("{http://www.w3.org/2000/svg}title") is not None
    text = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for n in (2, 3, 5):
        assert f"linear 40 → {n}: {40 * n + n:,} parameters" in text
    assert f"linear 40 → 2: {40 * 2 + 2:,} parameters" in text  # the span head: start, end
    assert "over B's positions, twice" in text and "at each word" in text
    assert text.count("pooled") == 2
