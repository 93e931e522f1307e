"""Chapter 7's drawing of attention shows the shapes the library's attention computes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch

from mlm_lib.config import BertConfig
from mlm_lib.model import BertSelfAttention
from mlm_lib.book.attention_diagram import attention_diagram

ODD = BertConfig(vocab_size=50, hidden_size=96, num_hidden_layers=1, num_attention_heads=3,
                 intermediate_size=120, max_position_embeddings=16)


def _texts(svg: str) -> list[str]:
    return ["".join(e.itertext()) for e in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]


def test_the_drawn_shapes_are_the_shapes_the_library_computes():
    T = 7
    texts = _texts(attention_diagram(ODD, T))
    attn = BertSelfAttention(ODD).eval()
    x = torch.randn(1, T, ODD.hidden_size)
    with torch.no_grad():
        out, probs = attn(x, need_probs=True)
        q, _, _ = attn.qkv(x).view(1, T, 3, 3, 32).permute(2, 0, 3, 1, 4)
    shape = lambda t: "[" + ", ".join(map(str, t.shape)) + "]"  # noqa: E731
    assert shape(attn.qkv(x)) == "[1, 7, 288]" and "[1, 7, 288]" in texts
    assert f"[1, 7, 96] → {shape(q)}" in texts  # Q, K and V, split into heads
    assert texts.count(shape(probs)) == 2  # the scores and the softmax's weights
    assert "[1, 3, 7, 32]" in texts  # weights times V, before the merge
    assert texts[-1] == shape(out)  # the block ends as it began
    assert "this sentence: T = 7 tokens, H = 96, A = 3 heads of d = 32" in " ".join(texts)


def test_the_flow_runs_in_the_order_the_code_does():
    text = " ".join(_texts(attention_diagram(ODD, 5)))
    order = ["X: the layer's input", "qkv: one Linear", "Q, split", "scores Q Kᵀ / √d + B", "softmax along each row",
             "weights × V", "merge the heads", "attention_output: W_O", "+ X (the residual)"]
    assert [text.index(o) for o in order] == sorted(text.index(o) for o in order)


def test_an_empty_sequence_is_refused():
    with pytest.raises(ValueError, match="at least one token"):
        attention_diagram(ODD, 0)
