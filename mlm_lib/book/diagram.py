"""BERT drawn from its config: the drawing reads every size it shows from a ``BertConfig``.

``bert_diagram(config)`` returns an SVG (it renders on the static site as it is, no kernel, no
JavaScript): the three embeddings summed at the bottom, the stack of L post-LN layers, and at
the top the two heads, the MLM head at every position of M and the pooler with the NSP head at
[CLS]. Given ``compare`` (another config), the numbers that differ from it are drawn in colour,
so the book's model and BERT-base can be read side by side.

``flow_diagram(stages, title)`` draws one sentence's path through the model, a box per stage with
its tensor's shape and a few of the values a chapter computed (chapter 14). ``token_grid`` and
``nsp_diagram`` draw tokens position by position and how an NSP pair is made.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from mlm_lib.config import BertConfig
from mlm_lib.sizes import parameter_counts
from mlm_lib.book.viz import (COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, TRUE_COLOR, TRUE_TEXT_COLOR,
                              wrap_title)

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


def arrow_marker(marker_id: str) -> str:
    """The arrowhead every drawing's lines end in (the book's other drawings too, so that all
    arrows look alike), under an id of the drawing's own (two drawings may share a page)."""
    return (f"<defs><marker id='{marker_id}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
            f"markerHeight='7' orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' "
            f"fill='{TEXT_COLOR}'/></marker></defs>")


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
    marker = arrow_marker(arrow)
    label = escape(f"{title}: a diagram of BERT's layers with the sizes of its config")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {WIDTH} {height + 26}' width='{WIDTH}'><title>{label}</title>{marker}"
            + "".join(parts).replace("#ARROW", "#" + arrow) + "</svg>")


# ---------------------------------------------------------------- one sentence through the model
FLOW_WIDTH, FLOW_BOX_H, FLOW_GAP = 640, 46, 16


@dataclass(frozen=True)
class Stage:
    """One step of a sentence through the model: what it is, the shape of its tensor, and a few of
    its actual values (as the chapter printed them)."""
    name: str
    shape: tuple[int, ...]
    values: str


def _shape(shape: tuple[int, ...]) -> str:
    return "scalar" if not shape else "[" + ", ".join(f"{s:,}" for s in shape) + "]"


def flow_diagram(stages: Sequence[Stage], title: str) -> str:
    """An SVG of ``stages`` from bottom (the text) to top (the loss), one box each with its name,
    its tensor's shape and a few of its values: the path of one sentence through the model, drawn
    from the numbers a chapter computed, so the drawing cannot drift from them."""
    if not stages:
        raise ValueError("flow_diagram needs at least one stage")
    top = 30
    height = top + len(stages) * (FLOW_BOX_H + FLOW_GAP) - FLOW_GAP + 6
    w = FLOW_WIDTH - 2 * LEFT
    parts = [f"<text x='{FLOW_WIDTH / 2}' y='18' text-anchor='middle' fill='{TEXT_COLOR}' {FAMILY} "
             f"font-size='14' font-weight='bold'>{escape(title)}</text>"]
    for k, stage in enumerate(reversed(stages)):  # the last stage on top
        y = top + k * (FLOW_BOX_H + FLOW_GAP)
        fill = HEAD_FILL if k == 0 else ENCODER_FILL if k < len(stages) - 1 else EMBED_FILL
        parts.append(f"<rect x='{LEFT}' y='{y}' width='{w}' height='{FLOW_BOX_H}' rx='5' fill='{fill}' "
                     f"stroke='{REFERENCE_COLOR}'/>"
                     f"<text x='{LEFT + 10}' y='{y + 18}' fill='{TEXT_COLOR}' {FONT} font-weight='bold'>"
                     f"{escape(stage.name)}</text>"
                     f"<text x='{LEFT + w - 10}' y='{y + 18}' text-anchor='end' fill='{TRUE_TEXT_COLOR}' "
                     f"{FONT}>{escape(_shape(stage.shape))}</text>"
                     f"<text x='{LEFT + 10}' y='{y + 36}' fill='{TEXT_COLOR}' {FONT}>"
                     f"{escape(stage.values)}</text>")
        if k:
            parts.append(_arrow(FLOW_WIDTH / 2, y, y - FLOW_GAP))
    arrow = f"arrow-{zlib.crc32(title.encode()):08x}"
    marker = arrow_marker(arrow)
    label = escape(f"{title}: " + "; then ".join(f"{s.name}, shape {_shape(s.shape)}" for s in stages))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {FLOW_WIDTH} {height}' width='{FLOW_WIDTH}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>{marker}" + "".join(parts).replace("#ARROW", "#" + arrow) + "</svg>")


# ---------------------------------------------------------------- tokens, position by position
GRID_CHAR_W, GRID_PAD, GRID_ROW_H = 7.0, 10, 26
# Characters of a 14-pixel bold title line in a column-wide drawing.
TITLE_CHARS = 80
TITLE_LINE_H = 18
# What a cell of the grid shows, and its fill: chosen for M (hidden from the generator), replaced
# by a sample that differs from the original, and the labels of L_Disc.
GRID_FILLS = {None: "white", "in M": "#ffe0bf", "replaced": "#f8c9c5", "original": "#dcefdc"}


def token_grid(rows: Sequence[tuple[str, Sequence[str], Sequence[str | None]]], title: str) -> str:
    """An SVG of aligned token rows, one column per position: each row is (its name, a token per
    position, a mark per position: None, "in M", "replaced" or "original"), so the reader can
    follow one position down from the original text to what each network sees and is graded on.

    Drawn no wider than the site's column (COLUMN_WIDTH_PX), so its text is shown at its own size:
    a sentence too long for one band of columns continues in a second band below, the row names
    repeated, as a printed table continues on the next page."""
    if not rows:
        raise ValueError("token_grid needs at least one row")
    n = len(rows[0][1])
    for name, tokens, marks in rows:
        if len(tokens) != n or len(marks) != n:
            raise ValueError(f"row {name!r} has {len(tokens)} tokens and {len(marks)} marks, not {n}")
        unknown = set(marks) - set(GRID_FILLS)
        if unknown:
            raise ValueError(f"row {name!r}: unknown marks {sorted(map(str, unknown))}")
    widths = [max(len(r[1][k]) for r in rows) * GRID_CHAR_W + GRID_PAD for k in range(n)]
    label_w = max(len(name) for name, _, _ in rows) * GRID_CHAR_W + 2 * GRID_PAD
    bands: list[list[int]] = [[]]  # the positions of each band, each band fitting the column
    for k, w in enumerate(widths):
        if bands[-1] and label_w + sum(widths[j] for j in bands[-1]) + w + 4 > COLUMN_WIDTH_PX:
            bands.append([])
        bands[-1].append(k)
    width = max(label_w + sum(widths[j] for j in band) + 4 for band in bands)
    lines = wrap_title(title, TITLE_CHARS).split("\n")
    parts = [f"<text x='4' y='{18 + i * TITLE_LINE_H}' fill='{TEXT_COLOR}' {FAMILY} font-size='14' "
             f"font-weight='bold'>{escape(line)}</text>" for i, line in enumerate(lines)]
    top = 12 + len(lines) * TITLE_LINE_H
    for band in bands:
        for r, (name, tokens, marks) in enumerate(rows):
            y = top + r * (GRID_ROW_H + 4)
            parts.append(f"<text x='4' y='{y + 17}' fill='{TEXT_COLOR}' {FONT} font-weight='bold'>"
                         f"{escape(name)}</text>")
            x = label_w
            for k in band:
                w = widths[k]
                parts.append(f"<rect x='{x}' y='{y}' width='{w - 2}' height='{GRID_ROW_H}' rx='3' "
                             f"fill='{GRID_FILLS[marks[k]]}' stroke='{REFERENCE_COLOR}'/>"
                             f"<text x='{x + (w - 2) / 2}' y='{y + 17}' text-anchor='middle' "
                             f"fill='{TEXT_COLOR}' {FONT}>{escape(tokens[k])}</text>")
                x += w
        top += len(rows) * (GRID_ROW_H + 4) + 10
    y = top
    legend = [(m, m) for m in GRID_FILLS if m]
    x = 4
    for mark, text in legend:
        parts.append(f"<rect x='{x}' y='{y}' width='14' height='14' fill='{GRID_FILLS[mark]}' "
                     f"stroke='{REFERENCE_COLOR}'/><text x='{x + 20}' y='{y + 12}' fill='{TEXT_COLOR}' "
                     f"{FONT}>{escape(text)}</text>")
        x += 30 + len(text) * GRID_CHAR_W
    height = y + 22
    label = escape(f"{title}: " + "; ".join(f"{name}: " + " ".join(tokens) for name, tokens, _ in rows))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>" + "".join(parts) + "</svg>")


# ---------------------------------------------------------------- how an NSP pair is made and read
PAIR_WIDTH, PAIR_SENT_H, PAIR_CHARS, PAIR_LABEL_W = 660, 24, 44, 130


def _short(text: str, chars: int = PAIR_CHARS) -> str:
    """``text`` cut to ``chars`` at a space, so that no word is cut in half ("the riv…")."""
    if len(text) <= chars:
        return text
    cut = text[: chars - 1].rsplit(" ", 1)[0]
    return cut + " …"


def nsp_diagram(own: tuple[str, Sequence[str]], other: tuple[str, Sequence[str]], config: BertConfig) -> str:
    """An SVG of next sentence prediction: two documents (title, sentences), the two pairs the
    coin can make from the first sentence of ``own`` (IsNext: B is the sentence that follows;
    NotNext: B comes from ``other``), and the path that reads a pair, from ``[CLS]`` through the
    pooler to the two scores of the NSP head, with the sizes of ``config``."""
    if len(own[1]) < 2 or not other[1]:
        raise ValueError("nsp_diagram needs two sentences in the first document and one in the other")
    col_w = (PAIR_WIDTH - 2 * LEFT - 20) / 2
    parts = [f"<text x='{LEFT}' y='18' fill='{TEXT_COLOR}' {FAMILY} font-size='14' font-weight='bold'>"
             "Next sentence prediction: how a pair is made, and what reads it</text>"]
    y0 = 32
    for k, (title, sentences) in enumerate((own, other)):
        x = LEFT + k * (col_w + 20)
        parts.append(f"<text x='{x}' y='{y0 + 12}' fill='{TEXT_COLOR}' {FONT} font-weight='bold'>"
                     f"document: {escape(title)}</text>")
        for j, sentence in enumerate(sentences[:3]):
            y = y0 + 20 + j * (PAIR_SENT_H + 4)
            parts.append(f"<rect x='{x}' y='{y}' width='{col_w}' height='{PAIR_SENT_H}' rx='3' fill='{EMBED_FILL}' "
                         f"stroke='{REFERENCE_COLOR}'/><text x='{x + 6}' y='{y + 16}' fill='{TEXT_COLOR}' {FONT}>"
                         f"{escape(_short(sentence))}</text>")
    y = y0 + 20 + 3 * (PAIR_SENT_H + 4) + 14
    a = own[1][0]
    rows = [("keep → IsNext", own[1][1]), ("replace → NotNext", other[1][0])]
    for label, b in rows:
        parts.append(f"<text x='{LEFT}' y='{y + 16}' fill='{TRUE_TEXT_COLOR}' {FONT} font-weight='bold'>"
                     f"{escape(label)}</text>"
                     f"<rect x='{LEFT + PAIR_LABEL_W}' y='{y}' width='{PAIR_WIDTH - 2 * LEFT - PAIR_LABEL_W}' "
                     f"height='{PAIR_SENT_H}' rx='3' fill='{ENCODER_FILL}' stroke='{REFERENCE_COLOR}'/>"
                     f"<text x='{LEFT + PAIR_LABEL_W + 6}' y='{y + 16}' fill='{TEXT_COLOR}' {FONT}>"
                     f"{escape('[CLS] ' + _short(a, 28) + ' [SEP] ' + _short(b, 28) + ' [SEP]')}"
                     "</text>")
        y += PAIR_SENT_H + 6
    H = config.hidden_size
    path = [f"h at [CLS]: {H} numbers", f"pooler: tanh, {H} × {H}", f"NSP head: {H} → 2",
            "softmax: IsNext / NotNext"]
    y += 14
    box_w = (PAIR_WIDTH - 2 * LEFT - 3 * 16) / 4
    for k, text in enumerate(path):
        x = LEFT + k * (box_w + 16)
        parts.append(f"<rect x='{x}' y='{y}' width='{box_w}' height='{BOX_H + 8}' rx='5' fill='{HEAD_FILL}' "
                     f"stroke='{REFERENCE_COLOR}'/>")
        for line, piece in enumerate(text.split(": ", 1)):
            parts.append(f"<text x='{x + box_w / 2}' y='{y + 15 + line * 15}' text-anchor='middle' "
                         f"fill='{TEXT_COLOR}' {FONT}>{escape(piece)}</text>")
        if k:
            parts.append(f"<line x1='{x - 16}' y1='{y + (BOX_H + 8) / 2}' x2='{x - 3}' y2='{y + (BOX_H + 8) / 2}' "
                         f"stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>")
    height = y + BOX_H + 12
    arrow = f"arrow-nsp-{zlib.crc32((own[0] + other[0]).encode()):08x}"
    marker = arrow_marker(arrow)
    label = escape(f"Next sentence prediction. A is '{a}'. If the coin keeps the chunk, B is the sentence "
                   f"that follows, '{own[1][1]}', labelled IsNext; otherwise B comes from '{other[0]}', "
                   f"'{other[1][0]}', labelled NotNext. The pair is read at [CLS]: " + ", then ".join(path))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {PAIR_WIDTH} {height}' width='{PAIR_WIDTH}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>{marker}" + "".join(parts).replace("#ARROW", "#" + arrow) + "</svg>")
