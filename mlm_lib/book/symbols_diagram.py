"""Every symbol of the MLM loss drawn on one sentence (chapter 1's picture).

``symbols_diagram(result, hidden_size, vocab_size)`` takes what ``mlm_lib.inference.sentence_loss``
returned for a sentence and its set M and draws, from top to bottom: the positions i, the tokens
x_i with M marked, the corrupted input x\\M, the encoder reading all of it, and under each masked
position its h_i, its |V| scores w_v.h_i, the probability of the true token and the model's top
guess, its -log P; at the bottom their sum L. Every number comes from ``result``, so the picture
cannot drift from what the chapter computed.
"""

from __future__ import annotations

import math
import zlib
from html import escape

from mlm_lib.inference import SentenceLoss
from mlm_lib.book.diagram import (EMBED_FILL, ENCODER_FILL, FAMILY, FONT, GRID_FILLS, HEAD_FILL, arrow_marker)
from mlm_lib.book.viz import COLUMN_WIDTH_PX, MASK_TOKEN, REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR

CHAR_W, PAD, ROW_H, LABEL_W, MARGIN = 7.0, 10, 26, 44, 4
BOX_H, BOX_GAP, LANE_GAP = 40, 14, 16
TITLE = "Every symbol of the loss on one sentence"


def _text(x: float, y: float, s: str, anchor: str = "middle", bold: bool = False,
          color: str = TEXT_COLOR) -> str:
    weight = " font-weight='bold'" if bold else ""
    return (f"<text x='{x}' y='{y}' text-anchor='{anchor}' fill='{color}' {FONT}{weight}>"
            f"{escape(s)}</text>")


def _box(x: float, y: float, w: float, lines: list[str], fill: str) -> str:
    out = [f"<rect x='{x}' y='{y}' width='{w}' height='{BOX_H}' rx='5' fill='{fill}' "
           f"stroke='{REFERENCE_COLOR}'/>"]
    first = y + BOX_H / 2 + 4 - 7.5 * (len(lines) - 1)
    out += [_text(x + w / 2, first + 15 * k, line, bold=k == 0) for k, line in enumerate(lines)]
    return "".join(out)


def _line(x1: float, y1: float, x2: float, y2: float) -> str:
    return (f"<line x1='{x1}' y1='{y1}' x2='{x2}' y2='{y2}' stroke='{TEXT_COLOR}' "
            f"marker-end='url(#ARROW)'/>")


def symbols_diagram(result: SentenceLoss, hidden_size: int, vocab_size: int) -> str:
    """An SVG of the loss's symbols on ``result``'s sentence (see the module's docstring), as wide
    as the site's column at most, so that its text is shown at its own size."""
    tokens, positions = result.tokens, result.positions
    if not positions:
        raise ValueError("symbols_diagram needs a non-empty M")
    widths = [max(len(t), len(MASK_TOKEN) if i in positions else 0) * CHAR_W + PAD
              for i, t in enumerate(tokens)]
    grid_w = LABEL_W + sum(widths)
    if grid_w + 2 * MARGIN > COLUMN_WIDTH_PX:
        raise ValueError(f"the sentence's {len(tokens)} tokens are {grid_w:.0f} px wide, more than the "
                         f"{COLUMN_WIDTH_PX} px column: draw a shorter sentence")
    width = COLUMN_WIDTH_PX
    lefts = [MARGIN + LABEL_W + sum(widths[:k]) for k in range(len(tokens))]
    centre = [lefts[k] + (widths[k] - 2) / 2 for k in range(len(tokens))]
    parts = [f"<text x='{MARGIN}' y='18' fill='{TEXT_COLOR}' {FAMILY} font-size='14' "
             f"font-weight='bold'>{TITLE}</text>"]
    y = 34
    parts.append(_text(MARGIN, y + 4, "i", anchor="start", bold=True))
    parts += [_text(centre[k], y + 4, str(k)) for k in range(len(tokens))]
    y += 12
    rows = [("x", tokens), ("x\\M", [MASK_TOKEN if k in positions else t for k, t in enumerate(tokens)])]
    for name, shown in rows:
        parts.append(_text(MARGIN, y + 17, name, anchor="start", bold=True))
        for k, token in enumerate(shown):
            fill = GRID_FILLS["in M"] if k in positions else "white"
            parts.append(f"<rect x='{lefts[k]}' y='{y}' width='{widths[k] - 2}' height='{ROW_H}' rx='3' "
                         f"fill='{fill}' stroke='{REFERENCE_COLOR}'/>" + _text(centre[k], y + 17, token))
        y += ROW_H + 4
    parts.append(_text(width - MARGIN, y - 2 * (ROW_H + 4) + 17, "M = {" + ", ".join(map(str, positions)) + "}",
                       anchor="end", bold=True, color=TRUE_TEXT_COLOR))
    # the encoder reads every position of x\M at once
    y += 14
    enc_x, enc_w = MARGIN + LABEL_W, sum(widths) - 2
    parts.append(_line(enc_x + enc_w / 2, y - 14, enc_x + enc_w / 2, y - 2))
    parts.append(_box(enc_x, y, enc_w, ["encoder", "reads every position of x\\M at once, both sides"],
                      ENCODER_FILL))
    y += BOX_H + 30
    # a lane per position of M, under it as far as the lanes allow
    n = len(positions)
    lane_w = (width - 2 * MARGIN - (n - 1) * LANE_GAP) / n
    lane_x = [MARGIN + j * (lane_w + LANE_GAP) for j in range(n)]
    terms = [-lp for lp in result.log_probs]
    for j, (i, lp, guess) in enumerate(zip(positions, result.log_probs, result.predicted)):
        x, mid = lane_x[j], lane_x[j] + lane_w / 2
        parts.append(_line(centre[i], y - 30, mid, y - 2))
        steps = [([f"h_{i}", f"{hidden_size} numbers: position {i} in context"], ENCODER_FILL),
                 ([f"w_v·h_{i} for every v in V", f"{vocab_size:,} scores"], HEAD_FILL),
                 ([f"P({tokens[i]} | x\\M) = {math.exp(lp):.3g}", f"softmax over V; top guess: {guess}"],
                  HEAD_FILL),
                 ([f"−log P = {terms[j]:.2f}"], EMBED_FILL)]
        for k, (lines, fill) in enumerate(steps):
            top = y + k * (BOX_H + BOX_GAP)
            if k:
                parts.append(_line(mid, top - BOX_GAP, mid, top - 2))
            parts.append(_box(x, top, lane_w, lines, fill))
    y += 4 * (BOX_H + BOX_GAP) + 8
    total = " + ".join(f"{t:.2f}" for t in terms)
    parts.append(_text(width / 2, y, f"L = −Σ over M of log P = {total} = {sum(terms):.2f}", bold=True,
                       color=TRUE_TEXT_COLOR))
    height = y + 12
    arrow = f"arrow-symbols-{zlib.crc32(' '.join(tokens).encode()):08x}"
    label = escape(f"{TITLE}: x = {' '.join(tokens)}; M = positions {', '.join(map(str, positions))}; the "
                   "encoder reads x\\M; " + "; ".join(
                       f"at position {i}, h_{i} ({hidden_size} numbers), {vocab_size:,} scores, "
                       f"P({tokens[i]}) = {math.exp(lp):.3g}, top guess {guess}, -log P = {-lp:.2f}"
                       for i, lp, guess in zip(positions, result.log_probs, result.predicted))
                   + f"; L = {sum(terms):.2f}")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>{arrow_marker(arrow)}" + "".join(parts).replace("#ARROW", "#" + arrow)
            + "</svg>")
