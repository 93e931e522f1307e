"""Words, pieces and windows drawn for chapter 13: how labels and answers cross from words to pieces.

``alignment_diagram`` draws a tagged sentence as the tagger trains on it: each word spanning its
pieces, the pieces' ``word_ids``, and the label on each word's first piece, every other position
``-100`` (left out of the loss). ``windows_diagram`` draws a long context cut into overlapping
windows: one bar per window over the context's pieces, the answer marked where a window holds all
of it. Both read only what ``mlm_lib.spans`` returned, so they cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mlm_lib.loss import IGNORE_INDEX as IGNORED  # the label of a position out of the loss
from mlm_lib.spans import Window
from mlm_lib.book.diagram import EMBED_FILL, ENCODER_FILL, FAMILY, FONT, GRID_FILLS
from mlm_lib.book.viz import COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR, wrap_title

CHAR_W, PAD, ROW_H, ROW_GAP, MARGIN = 7.0, 10, 24, 4, 4
TITLE_CHARS, TITLE_LINE_H = 80, 18
ANSWER_FILL = GRID_FILLS["in M"]


def _title(title: str) -> tuple[list[str], float]:
    lines = wrap_title(title, TITLE_CHARS).split("\n")
    return ([f"<text x='{MARGIN}' y='{18 + k * TITLE_LINE_H}' fill='{TEXT_COLOR}' {FAMILY} font-size='14' "
             f"font-weight='bold'>{escape(line)}</text>" for k, line in enumerate(lines)],
            12 + len(lines) * TITLE_LINE_H)


def _cell(x: float, y: float, w: float, text: str, fill: str, color: str = TEXT_COLOR) -> str:
    return (f"<rect x='{x}' y='{y}' width='{w - 2}' height='{ROW_H}' rx='3' fill='{fill}' "
            f"stroke='{REFERENCE_COLOR}'/><text x='{x + (w - 2) / 2}' y='{y + 16}' text-anchor='middle' "
            f"fill='{color}' {FONT}>{escape(text)}</text>")


def _svg(width: float, height: float, label: str, body: list[str]) -> str:
    label = escape(label)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>" + "".join(body) + "</svg>")


def alignment_diagram(words: Sequence[str], pieces: Sequence[str], word_ids: Sequence[int | None],
                      labels: Sequence[int], tag_names: Sequence[str], title: str) -> str:
    """An SVG of one tagged sentence as pieces: the words over their pieces, ``word_ids`` (None
    for [CLS] and [SEP]) and the labels (a tag on each word's first piece, -100 elsewhere)."""
    if not len(pieces) == len(word_ids) == len(labels):
        raise ValueError(f"{len(pieces)} pieces, {len(word_ids)} word ids and {len(labels)} labels: "
                         "one of each per position")
    widths = [max(len(p), len(str(w)), len(tag_names[y]) if y != IGNORED else 4) * CHAR_W + PAD
              for p, w, y in zip(pieces, word_ids, labels)]
    names = ("word", "piece", "word_ids", "label")
    label_w = max(len(n) for n in names) * CHAR_W + 2 * PAD
    lefts = [MARGIN + label_w + sum(widths[:k]) for k in range(len(pieces))]
    if lefts[-1] + widths[-1] + MARGIN > COLUMN_WIDTH_PX:
        raise ValueError(f"{len(pieces)} pieces are wider than the {COLUMN_WIDTH_PX} px column")
    body, y = _title(title)
    for r, name in enumerate(names):
        body.append(f"<text x='{MARGIN}' y='{y + r * (ROW_H + ROW_GAP) + 16}' fill='{TEXT_COLOR}' {FONT} "
                    f"font-weight='bold'>{name}</text>")
    k = 0
    while k < len(pieces):  # a word spans the pieces that share its id
        end = k + 1
        while word_ids[k] is not None and end < len(pieces) and word_ids[end] == word_ids[k]:
            end += 1
        if word_ids[k] is not None:
            body.append(_cell(lefts[k], y, sum(widths[k:end]), words[word_ids[k]], "white"))
        k = end
    for k, (piece, wid, lab) in enumerate(zip(pieces, word_ids, labels)):
        body.append(_cell(lefts[k], y + ROW_H + ROW_GAP, widths[k], piece, "white"))
        body.append(_cell(lefts[k], y + 2 * (ROW_H + ROW_GAP), widths[k], "None" if wid is None else str(wid),
                          "white"))
        ignored = lab == IGNORED
        body.append(_cell(lefts[k], y + 3 * (ROW_H + ROW_GAP), widths[k], str(IGNORED) if ignored else
                          tag_names[lab], EMBED_FILL if ignored else ANSWER_FILL))
    y += 4 * (ROW_H + ROW_GAP) + 4
    body += [f"<rect x='{MARGIN}' y='{y + 2}' width='14' height='14' fill='{ANSWER_FILL}' stroke='{REFERENCE_COLOR}'/>",
             f"<text x='{MARGIN + 20}' y='{y + 14}' fill='{TEXT_COLOR}' {FONT}>a word's first piece: its tag, in the loss</text>",
             f"<rect x='{MARGIN + 300}' y='{y + 2}' width='14' height='14' fill='{EMBED_FILL}' stroke='{REFERENCE_COLOR}'/>",
             f"<text x='{MARGIN + 320}' y='{y + 14}' fill='{TEXT_COLOR}' {FONT}>-100: left out of the loss</text>"]
    label = (f"{title}: " + "; ".join(f"{p} (word {w}, label {tag_names[y] if y != IGNORED else IGNORED})"
                                      for p, w, y in zip(pieces, word_ids, labels)))
    return _svg(COLUMN_WIDTH_PX, y + 24, label, body)


def windows_diagram(windows: Sequence[Window], context_pieces: int, answer: tuple[int, int] | None,
                    title: str) -> str:
    """An SVG of ``windows`` over a context of ``context_pieces`` pieces: a bar per window over
    the pieces it holds, the answer's pieces (``answer``, first and last, in the context)
    coloured in each window that holds all of it and marked by a line through the others."""
    if not windows or context_pieces < 1:
        raise ValueError("windows_diagram needs at least one window over a non-empty context")
    label_w = 80
    left, right = MARGIN + label_w, COLUMN_WIDTH_PX - MARGIN - 8
    scale = (right - left) / context_pieces
    body, y = _title(title)
    y += 4
    for k, w in enumerate(windows):
        n = sum(o is not None for o in w.offsets)  # the window's context pieces
        holds = w.start_position is not None
        body.append(f"<text x='{MARGIN}' y='{y + 12}' fill='{TEXT_COLOR}' {FONT}>window {k}</text>"
                    f"<rect x='{left + w.piece_start * scale}' y='{y}' width='{n * scale}' height='16' rx='2' "
                    f"fill='{ENCODER_FILL}' stroke='{REFERENCE_COLOR}'/>")
        if answer is not None and holds:
            body.append(f"<rect x='{left + answer[0] * scale}' y='{y}' width='{max((answer[1] - answer[0] + 1) * scale, 3)}' "
                        f"height='16' fill='{TRUE_TEXT_COLOR}'/>")
        y += 20
    if answer is not None:
        x = left + (answer[0] + answer[1] + 1) / 2 * scale
        top = y - 20 * len(windows)
        body.append(f"<line x1='{x}' y1='{top - 4}' x2='{x}' y2='{y}' stroke='{TRUE_TEXT_COLOR}' "
                    f"stroke-dasharray='3 2'/><text x='{x + 4}' y='{y + 14}' fill='{TRUE_TEXT_COLOR}' {FONT}>"
                    "the answer</text>")
    for tick in range(0, context_pieces + 1, 50):  # the context's piece positions
        x = left + tick * scale
        body.append(f"<line x1='{x}' y1='{y + 20}' x2='{x}' y2='{y + 24}' stroke='{TEXT_COLOR}'/>"
                    f"<text x='{x}' y='{y + 37}' text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>{tick}</text>")
    body.append(f"<line x1='{left}' y1='{y + 20}' x2='{right}' y2='{y + 20}' stroke='{TEXT_COLOR}'/>"
                f"<text x='{MARGIN}' y='{y + 37}' fill='{TEXT_COLOR}' {FONT}>piece</text>")
    holding = [k for k, w in enumerate(windows) if w.start_position is not None]
    label = (f"{title}: {len(windows)} windows over {context_pieces} pieces, starting at pieces "
             + ", ".join(str(w.piece_start) for w in windows)
             + (f"; the answer, pieces {answer[0]} to {answer[1]}, is whole in windows {holding}"
                if answer is not None else ""))
    return _svg(COLUMN_WIDTH_PX, y + 44, label, body)
