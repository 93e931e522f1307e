"""Words as WordPiece units, drawn letter under letter (chapter 9's pictures).

``pieces_diagram(rows, title)`` draws words cut into pieces, one row per stage (a merge of the
trainer, or a vocabulary size): every letter has a fixed column, so a piece is a box as wide as its
letters and the same word lines up from row to row. Merging two units joins two boxes into one; a
larger vocabulary cuts a word into fewer, wider boxes. A continuation piece (``##...``) is shaded
and shown without its ``##``; a row's new unit is drawn in the book's colour of M.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from mlm_lib.book.diagram import EMBED_FILL, FAMILY, FONT, GRID_FILLS
from mlm_lib.book.viz import COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, wrap_title

CONTINUATION = "##"
CHAR_W, ROW_H, ROW_GAP, WORD_GAP, MARGIN = 12, 24, 6, 16, 4
MONO = "font-family='DejaVu Sans Mono, Menlo, Consolas, monospace' font-size='11.5'"
TITLE_CHARS, TITLE_LINE_H = 80, 18


def _letters(piece: str) -> str:
    return piece[len(CONTINUATION):] if piece.startswith(CONTINUATION) else piece


def pieces_diagram(rows: Sequence[tuple[str, Sequence[Sequence[str]], str | None]], title: str) -> str:
    """An SVG of ``rows``, each (its label, the words as lists of pieces, the unit this row made
    or None); every row holds the same words. At most as wide as the site's column."""
    if not rows:
        raise ValueError("pieces_diagram needs at least one row")
    words = ["".join(_letters(p) for p in pieces) for pieces in rows[0][1]]
    for label, pieces_of, _ in rows:
        spelled = ["".join(_letters(p) for p in pieces) for pieces in pieces_of]
        if spelled != words:
            raise ValueError(f"row {label!r} spells {spelled}, not the first row's {words}")
    label_w = max(len(label) for label, _, _ in rows) * 7 + 2 * MARGIN + 6
    starts, x = [], MARGIN + label_w
    for w in words:
        starts.append(x)
        x += len(w) * CHAR_W + WORD_GAP
    if x - WORD_GAP + MARGIN > COLUMN_WIDTH_PX:
        raise ValueError(f"{len(''.join(words))} letters are {x - WORD_GAP + MARGIN} px wide, more than the "
                         f"{COLUMN_WIDTH_PX} px column: draw fewer or shorter words")
    width = COLUMN_WIDTH_PX  # the title and the key take the column's width
    lines = wrap_title(title, TITLE_CHARS).split("\n")
    body = [f"<text x='{MARGIN}' y='{18 + k * TITLE_LINE_H}' fill='{TEXT_COLOR}' {FAMILY} font-size='14' "
            f"font-weight='bold'>{escape(line)}</text>" for k, line in enumerate(lines)]
    y = 12 + len(lines) * TITLE_LINE_H
    for label, pieces_of, new in rows:
        body.append(f"<text x='{MARGIN}' y='{y + 16}' fill='{TEXT_COLOR}' {FONT}>{escape(label)}</text>")
        for start, pieces in zip(starts, pieces_of):
            x = start
            for piece in pieces:
                letters = _letters(piece)
                w = len(letters) * CHAR_W
                fill = (GRID_FILLS["in M"] if piece == new else
                        EMBED_FILL if piece.startswith(CONTINUATION) else "white")
                body.append(f"<rect x='{x}' y='{y}' width='{w}' height='{ROW_H}' rx='3' fill='{fill}' "
                            f"stroke='{REFERENCE_COLOR}'/><text x='{x + w / 2}' y='{y + 16}' "
                            f"text-anchor='middle' fill='{TEXT_COLOR}' {MONO}>{escape(letters)}</text>")
                x += w
        y += ROW_H + ROW_GAP
    # the key: what a shaded box and a coloured one mean
    key = [("white", "a word's first piece"), (EMBED_FILL, "a continuation piece (##)")]
    if any(new for _, _, new in rows):
        key.append((GRID_FILLS["in M"], "the unit this row made"))
    x = MARGIN
    for fill, text in key:
        body.append(f"<rect x='{x}' y='{y + 4}' width='14' height='14' fill='{fill}' stroke='{REFERENCE_COLOR}'/>"
                    f"<text x='{x + 20}' y='{y + 16}' fill='{TEXT_COLOR}' {FONT}>{escape(text)}</text>")
        x += 34 + len(text) * 6.6
    height = y + 26
    label = escape(f"{title}: " + "; ".join(f"{row_label}: " + " | ".join(" ".join(p) for p in pieces_of)
                                           for row_label, pieces_of, _ in rows))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>" + "".join(body) + "</svg>")
