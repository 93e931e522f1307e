"""Self-attention's data flow, drawn with one sentence's shapes (chapter 7's picture).

``attention_diagram(config, length)`` draws what one layer's attention block does to a batch of one
sequence of ``length`` tokens, from top to bottom: X, the fused projection ``qkv``, Q, K and V split
into A heads of width d, the scores Q K^T / sqrt(d) plus the mask B, the softmax along each row, the
product with V, the heads merged back to H columns, the output projection W_O, and the residual
with LayerNorm. Each box names the library's module and the tensor's shape, read from the config,
so the drawing cannot drift from ``mlm_lib.model``.
"""

from __future__ import annotations

from html import escape

from mlm_lib.config import BertConfig
from mlm_lib.book.diagram import EMBED_FILL, ENCODER_FILL, FAMILY, FONT, HEAD_FILL, arrow_marker
from mlm_lib.book.viz import COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR

BOX_H, GAP, MARGIN, COL_GAP = 40, 16, 16, 16
RESIDUAL_X = 6  # the residual's path, left of every box
TOP = 48  # below the title and the line of sizes
TITLE = "Self-attention in one layer"
ARROW = "arrow-attention-flow"


def _shape(*dims: int) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _box(x: float, y: float, w: float, name: str, shape: str, fill: str) -> str:
    return (f"<rect x='{x}' y='{y}' width='{w}' height='{BOX_H}' rx='5' fill='{fill}' "
            f"stroke='{REFERENCE_COLOR}'/><text x='{x + w / 2}' y='{y + 16}' text-anchor='middle' "
            f"fill='{TEXT_COLOR}' {FONT} font-weight='bold'>{escape(name)}</text>"
            f"<text x='{x + w / 2}' y='{y + 32}' text-anchor='middle' fill='{TRUE_TEXT_COLOR}' {FONT}>"
            f"{escape(shape)}</text>")


def _arrow(x1: float, y1: float, x2: float, y2: float) -> str:
    return (f"<line x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' stroke='{TEXT_COLOR}' "
            f"marker-end='url(#{ARROW})'/>")


def attention_diagram(config: BertConfig, length: int) -> str:
    """An SVG of one attention block on a batch of one sequence of ``length`` tokens (see the
    module's docstring), as wide as the site's column."""
    if length < 1:
        raise ValueError(f"a sequence has at least one token, not {length}")
    T, H, A = length, config.hidden_size, config.num_attention_heads
    d = H // A
    width = COLUMN_WIDTH_PX
    col = (width - 2 * MARGIN - 2 * COL_GAP) / 3
    xs = [MARGIN + k * (col + COL_GAP) for k in range(3)]  # the columns of Q, K and V
    full, two = width - 2 * MARGIN, 2 * col + COL_GAP
    step = BOX_H + GAP
    body = [f"<text x='{MARGIN}' y='18' fill='{TEXT_COLOR}' {FAMILY} font-size='14' font-weight='bold'>"
            f"{TITLE}</text><text x='{MARGIN}' y='36' fill='{TEXT_COLOR}' {FONT}>this sentence: T = {T} "
            f"tokens, H = {H}, A = {A} heads of d = {d}; shapes [batch, (heads,) rows, columns]</text>"]
    y = TOP
    mid = width / 2
    inner = (MARGIN + 40, full - 80)  # the single-column boxes, leaving the left edge to the residual
    body.append(_box(*inner[:1], y, inner[1], "X: the layer's input", _shape(1, T, H), EMBED_FILL))
    y += step
    body.append(_arrow(mid, y - GAP, mid, y - 2))
    body.append(_box(inner[0], y, inner[1], f"qkv: one Linear, {H} → {3 * H} ([W_Q; W_K; W_V])",
                     _shape(1, T, 3 * H), ENCODER_FILL))
    y += step
    for x, name in zip(xs, "QKV"):
        body.append(_arrow(mid, y - GAP, x + col / 2, y - 2))
        body.append(_box(x, y, col, f"{name}, split into {A} heads",
                         f"{_shape(1, T, H)} → {_shape(1, A, T, d)}", ENCODER_FILL))
    v_bottom = y + BOX_H
    y += step
    for x in xs[:2]:
        body.append(_arrow(x + col / 2, y - GAP, xs[0] + two / 2, y - 2))
    body.append(_box(xs[0], y, two, "scores Q Kᵀ / √d + B (B: −∞ at [PAD] keys)", _shape(1, A, T, T),
                     HEAD_FILL))
    y += step
    body.append(_arrow(xs[0] + two / 2, y - GAP, xs[0] + two / 2, y - 2))
    body.append(_box(xs[0], y, two, "softmax along each row: the weights", _shape(1, A, T, T), HEAD_FILL))
    y += step
    body.append(_arrow(xs[0] + two / 2, y - GAP, xs[0] + two / 2, y - 2))
    body.append(_arrow(xs[2] + col / 2, v_bottom, xs[2] + col / 2, y - 2))  # V joins the product
    body.append(_box(xs[0], y, full, "weights × V: each query's weighted sum of the values",
                     _shape(1, A, T, d), HEAD_FILL))
    for name, shape in ((f"merge the heads: back to {H} columns", _shape(1, T, H)),
                        (f"attention_output: W_O, {H} → {H}", _shape(1, T, H)),
                        ("+ X (the residual), then attention_norm (LayerNorm)", _shape(1, T, H))):
        y += step
        body.append(_arrow(mid, y - GAP, mid, y - 2))
        body.append(_box(inner[0], y, inner[1], name, shape, ENCODER_FILL))
    # the residual: X around the block to its sum
    top_y = TOP + BOX_H / 2
    body.append(f"<path d='M{inner[0]},{top_y} L{RESIDUAL_X},{top_y} L{RESIDUAL_X},{y + BOX_H / 2} "
                f"L{inner[0] - 2},{y + BOX_H / 2}' fill='none' stroke='{TEXT_COLOR}' "
                f"stroke-dasharray='4 3' marker-end='url(#{ARROW})'/>")
    height = y + BOX_H + 6
    label = escape(f"{TITLE}: X {_shape(1, T, H)}; qkv, one Linear to {_shape(1, T, 3 * H)}; Q, K and V, "
                   f"each split into {A} heads, {_shape(1, A, T, d)}; scores Q K transposed over root d "
                   f"plus the mask B, {_shape(1, A, T, T)}; softmax along each row; times V, "
                   f"{_shape(1, A, T, d)}; heads merged, {_shape(1, T, H)}; W_O; plus X and LayerNorm, "
                   f"{_shape(1, T, H)}")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>{arrow_marker(ARROW)}" + "".join(body) + "</svg>")
