"""Chapter 15's three encoders drawn side by side: BERT's layer, and what ModernBERT and DeBERTa-v3
changed in it, each column read from a built model (:func:`mlm_lib.book.successors.anatomy`).

Each column is one encoder, read bottom up as chapter 7's drawing is: the input, one layer of the
stack ("× L"), the MLM head, and the parameters counted from the model. A box that differs from
BERT's is drawn in colour, so the drawing is chapter 7's with the successors' edits marked.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from html import escape

from mlm_lib.book.diagram import FAMILY, FONT, arrow_marker
from mlm_lib.book.successors import BERT, DEBERTA, MODERNBERT, Anatomy
from mlm_lib.book.viz import COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR

COLUMN_W, GAP, BOX_H, ROW_GAP = 220, 14, 28, 10
CHANGED_FILL, SAME_FILL, LAYER_FILL = "#fff1e3", "white", "#e8f0fa"


def _rows(a: Anatomy) -> list[str]:
    """The column's boxes, bottom up: input, the layer's four steps, the head."""
    h = a.hidden
    if a.positions == "learned":
        first = "token + position + segment, LN"
    else:
        first = "token only (no position), LN"
    attention = {"learned": "attention: q_i · k_j",
                 "rotary": "LN, attention: Rq_i · Rk_j",
                 "relative": "attention: q·k + c2p + p2c"}.get(a.positions, f"attention ({a.positions})")
    add = "Add, then LayerNorm" if a.norm == "post-LN" else "Add (no norm after)"
    ff = (f"{a.feed_forward}: {h} → {a.inner} → {h}" if a.feed_forward == "GELU"
          else f"LN, {a.feed_forward}: {h} → 2×{a.inner} → {h}")
    head = "final LN, MLM head" if a.norm == "pre-norm" else "MLM head (tied decoder)"
    return [first, attention, add, ff, add, head]


def _layers_label(a: Anatomy) -> str:
    kinds = sorted(set(a.attention))
    return f"× {a.layers} layers, " + (", ".join(kinds) if len(kinds) > 1 else f"all {kinds[0]}")


def _box(x: float, y: float, label: str, changed: bool) -> str:
    color = TRUE_TEXT_COLOR if changed else TEXT_COLOR
    return (f"<rect x='{x + 8}' y='{y}' width='{COLUMN_W - 16}' height='{BOX_H}' rx='5' "
            f"fill='{CHANGED_FILL if changed else SAME_FILL}' stroke='{REFERENCE_COLOR}'/>"
            f"<text x='{x + COLUMN_W / 2}' y='{y + BOX_H / 2 + 4}' text-anchor='middle' "
            f"fill='{color}' {FONT}>{escape(label)}</text>")


def successors_diagram(anatomies: Sequence[Anatomy], title: str) -> str:
    """An SVG with one column per encoder; boxes that differ from the first (BERT's) in colour."""
    if not anatomies or anatomies[0].name != BERT:
        raise ValueError("the first column is BERT's: the others are drawn as changes to it")
    base = _rows(anatomies[0])
    width = len(anatomies) * COLUMN_W + (len(anatomies) - 1) * GAP
    if width > COLUMN_WIDTH_PX:
        raise ValueError(f"{len(anatomies)} columns are {width} px wide; the column is {COLUMN_WIDTH_PX}")
    step = BOX_H + ROW_GAP
    top = 60  # under the title and the names
    layer_top, layer_bottom = top + step - 6, top + 5 * step - ROW_GAP + 22
    height = top + len(base) * step + 38
    parts = [f"<text x='{width / 2}' y='18' text-anchor='middle' fill='{TEXT_COLOR}' {FAMILY} "
             f"font-size='14' font-weight='bold'>{escape(title)}</text>"]
    for k, a in enumerate(anatomies):
        x = k * (COLUMN_W + GAP)
        rows = _rows(a)
        parts.append(f"<text x='{x + COLUMN_W / 2}' y='44' text-anchor='middle' fill='{TEXT_COLOR}' "
                     f"{FAMILY} font-size='13' font-weight='bold'>{escape(a.name)}</text>")
        parts.append(f"<rect x='{x}' y='{layer_top}' width='{COLUMN_W}' "
                     f"height='{layer_bottom - layer_top}' rx='8' fill='{LAYER_FILL}' "
                     f"stroke='{REFERENCE_COLOR}' stroke-dasharray='5 3'/>")
        parts.append(f"<text x='{x + COLUMN_W / 2}' y='{layer_bottom - 6}' text-anchor='middle' "
                     f"fill='{TEXT_COLOR}' {FONT} font-style='italic'>{escape(_layers_label(a))}</text>")
        for r, label in enumerate(rows):
            # bottom up: the input lowest, the head on top
            y = top + (len(rows) - 1 - r) * step + (22 if r == 0 else 0) - (8 if r == len(rows) - 1 else 0)
            parts.append(_box(x, y, label, label != base[r]))
        parts.append(f"<text x='{x + COLUMN_W / 2}' y='{height - 8}' text-anchor='middle' "
                     f"fill='{TEXT_COLOR}' {FONT}>{a.parameters:,} parameters</text>")
    label = escape(f"{title}: " + "; ".join(
        f"{a.name}: {a.positions} positions, {a.norm}, {a.feed_forward}, {a.parameters:,} parameters"
        for a in anatomies))
    arrow = f"arrow-{zlib.crc32(title.encode()):08x}"
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}'><title>{label}</title>"
            f"{arrow_marker(arrow)}" + "".join(parts) + "</svg>")
