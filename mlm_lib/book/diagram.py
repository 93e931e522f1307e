"""BERT drawn from its config: the drawing reads every size it shows from a ``BertConfig``.

``bert_diagram(config)`` returns an SVG (it renders on the static site as it is, no kernel, no
JavaScript): the three embeddings summed at the bottom, the stack of L post-LN layers, and at
the top the two heads, the MLM head at every position of M and the pooler with the NSP head at
[CLS]. Given ``compare`` (another config), the numbers that differ from it are drawn in colour,
so the book's model and BERT-base can be read side by side.
"""

from __future__ import annotations

import zlib
from html import escape

from mlm_lib.config import BertConfig
from mlm_lib.sizes import parameter_counts
from mlm_lib.book.viz import REFERENCE_COLOR, TEXT_COLOR, TRUE_COLOR, TRUE_TEXT_COLOR

WIDTH, BOX_H, GAP = 470, 30, 12
LEFT, RIGHT, MID = 16, 454, 235  # the drawing's margins and its middle
FAMILY = "font-family='DejaVu Sans, Arial, sans-serif'"
FONT = FAMILY + " font-size='11.5'"
ENCODER_FILL, EMBED_FILL, HEAD_FILL = "#e8f0fa", "#f3f3f3", "#fff1e3"
DIFFERS_COLOR = TRUE_TEXT_COLOR  # a number that is not the compared config's


def _num(value: int, other: int | None) -> str:
    """``value`` as text, marked (tspan) when the compared config has another value."""
    text = f"{value:,}"
    if other is None or other == value:
        return text
    return f"<tspan fill='{DIFFERS_COLOR}' font-weight='bold'>{text}</tspan>"


def _box(x: float, y: float, w: float, label: str, fill: str) -> str:
    return (f"<rect x='{x}' y='{y}' width='{w}' height='{BOX_H}' rx='5' fill='{fill}' "
            f"stroke='{REFERENCE_COLOR}'/><text x='{x + w / 2}' y='{y + BOX_H / 2 + 4}' "
            f"text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>{label}</text>")


def _arrow(x: float, y_from: float, y_to: float) -> str:
    return (f"<line x1='{x}' y1='{y_from}' x2='{x}' y2='{y_to + 5}' stroke='{TEXT_COLOR}' "
            f"marker-end='url(#ARROW)'/>")


def _sizes(config: BertConfig, compare: BertConfig | None) -> dict[str, str]:
    """Every number the drawing shows, as text, marked where ``compare`` differs."""
    def pair(name: str) -> str:
        return _num(getattr(config, name), None if compare is None else getattr(compare, name))
    total = sum(parameter_counts(config).values())
    other = None if compare is None else sum(parameter_counts(compare).values())
    head_dim = config.hidden_size // config.num_attention_heads
    other_dim = None if compare is None else compare.hidden_size // compare.num_attention_heads
    return {"L": pair("num_hidden_layers"), "H": pair("hidden_size"), "A": pair("num_attention_heads"),
            "I": pair("intermediate_size"), "V": pair("vocab_size"), "P": pair("max_position_embeddings"),
            "S": pair("type_vocab_size"), "d": _num(head_dim, other_dim), "total": _num(total, other)}


def _heads(n: dict[str, str], y: float) -> list[str]:
    """The MLM head (right, every i in M) and the pooler with the NSP head (left, [CLS])."""
    left_w = 0.4 * (RIGHT - LEFT - GAP)
    right_w = RIGHT - LEFT - GAP - left_w
    lx, rx = LEFT, LEFT + left_w + GAP
    rows = [(f"softmax: P(v | x\\M) over V = {n['V']} words", f"NSP head: {n['H']} → 2"),
            (f"decoder: tied token table, bias {n['V']}", f"pooler: tanh, {n['H']} × {n['H']}"),
            (f"transform: {n['H']} × {n['H']}, GELU, LayerNorm", "")]
    parts = []
    for k, (right, left) in enumerate(rows):
        top = y + k * (BOX_H + GAP)
        parts.append(_box(rx, top, right_w, right, HEAD_FILL))
        if left:
            parts.append(_box(lx, top + (BOX_H + GAP) * (k == 1), left_w, left, HEAD_FILL))
        if k:
            parts.append(_arrow(rx + right_w / 2, top, top - GAP))
    parts.append(_arrow(lx + left_w / 2, y + 2 * (BOX_H + GAP), y + BOX_H))
    bottom = y + 3 * BOX_H + 2 * GAP
    labels = [(lx + left_w / 2, "h at [CLS] only"), (rx + right_w / 2, "h_i at every position i in M")]
    for x, text in labels:
        parts.append(f"<text x='{x}' y='{bottom + 16}' text-anchor='middle' fill='{TEXT_COLOR}' "
                     f"{FONT} font-style='italic'>{escape(text)}</text>")
        parts.append(_arrow(x, bottom + 40, bottom + 20))
    return parts


def _encoder(n: dict[str, str], y: float) -> tuple[list[str], float]:
    """The stack of L post-LN layers (one drawn, "× L"), with its two residual paths."""
    inner_x, inner_w = LEFT + 12, RIGHT - LEFT - 62
    rows = ["Add (residual) and LayerNorm",
            f"feed-forward: {n['H']} → {n['I']} → {n['H']}, GELU",
            "Add (residual) and LayerNorm",
            f"self-attention: {n['A']} heads of d = {n['d']}; Q, K, V, output: {n['H']} × {n['H']}"]
    height = len(rows) * (BOX_H + GAP) + 28
    parts = [f"<rect x='{LEFT}' y='{y}' width='{RIGHT - LEFT}' height='{height}' rx='8' "
             f"fill='{ENCODER_FILL}' stroke='{REFERENCE_COLOR}' stroke-dasharray='5 3'/>",
             f"<text x='{RIGHT - 8}' y='{y + 16}' text-anchor='end' fill='{TEXT_COLOR}' {FONT} "
             f"font-weight='bold'>× L = {n['L']} layers (post-LN)</text>"]
    tops = [y + 24 + k * (BOX_H + GAP) for k in range(len(rows))]
    for k, (top, label) in enumerate(zip(tops, rows)):
        parts.append(_box(inner_x, top, inner_w, label, "white"))
        if k:
            parts.append(_arrow(inner_x + inner_w / 2, top, top - GAP))
    side = inner_x + inner_w + 18  # residual paths: from below a block to the Add above it
    for block, add in ((3, 2), (1, 0)):
        low, high = tops[block] + BOX_H + GAP / 2 + (4 if block == 3 else 0), tops[add] + BOX_H / 2
        parts.append(f"<polyline points='{inner_x + inner_w / 2},{low} {side},{low} {side},{high} "
                     f"{inner_x + inner_w + 5},{high}' fill='none' stroke='{TRUE_COLOR}' "
                     f"marker-end='url(#ARROW)'/>")
    return parts, y + height


def _embeddings(n: dict[str, str], y: float) -> tuple[list[str], float]:
    """LayerNorm over the sum of the token, position and segment rows of each position."""
    w = (RIGHT - LEFT - 2 * GAP) / 3
    tables = [f"token: {n['V']} × {n['H']}", f"position: {n['P']} × {n['H']}",
              f"segment: {n['S']} × {n['H']}"]
    parts = [_box(LEFT + 60, y, RIGHT - LEFT - 120, "LayerNorm of the sum (+)", EMBED_FILL)]
    for k, label in enumerate(tables):
        x = LEFT + k * (w + GAP)
        parts.append(_box(x, y + BOX_H + 26, w, label, EMBED_FILL))
        parts.append(f"<line x1='{x + w / 2}' y1='{y + BOX_H + 26}' x2='{MID}' y2='{y + BOX_H + 5}' "
                     f"stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>")
    bottom = y + 2 * BOX_H + 26
    parts.append(f"<text x='{MID}' y='{bottom + 18}' text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>"
                 f"input: [CLS] x_1 … [MASK] … [SEP], at most {n['P']} positions</text>")
    return parts, bottom + 24


def bert_diagram(config: BertConfig, title: str, compare: BertConfig | None = None) -> str:
    """An SVG of BERT with the sizes of ``config``; numbers that differ from ``compare`` marked."""
    n = _sizes(config, compare)
    parts = [f"<text x='{MID}' y='18' text-anchor='middle' fill='{TEXT_COLOR}' {FAMILY} font-size='14' "
             f"font-weight='bold'>{escape(title)}</text>"]
    parts += _heads(n, 30)
    encoder, y = _encoder(n, 30 + 3 * BOX_H + 2 * GAP + 40)
    embeddings, height = _embeddings(n, y + 20)
    parts += encoder + embeddings + [_arrow(MID, y + 20, y)]
    parts.append(f"<text x='{MID}' y='{height + 16}' text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>"
                 f"{n['total']} parameters (counted from the config)</text>")
    # One arrowhead per drawing, under an id of its own: two drawings may share a page.
    arrow = f"arrow-{zlib.crc32(title.encode()):08x}"
    marker = (f"<defs><marker id='{arrow}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
              f"markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
              f"fill='{TEXT_COLOR}'/></marker></defs>")
    label = escape(f"{title}: a diagram of BERT's layers with the sizes of its config")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {WIDTH} {height + 26}' width='{WIDTH}'><title>{label}</title>{marker}"
            + "".join(parts).replace("#ARROW", "#" + arrow) + "</svg>")
