"""The map of the book: the game BERT plays on every batch, each chapter on its stage.

``game_map()`` draws the game (a sentence, choose M, corrupt, encode, score every word of V, the
loss, one step, and again) with each stage's piece of the formula and links to the chapters that
take it apart, and below it what the book does with the encoder the game trains. Chapter 0 shows
it, and the landing page and the whole formula through the site's ``{game-map}`` directive, so
there is one drawing, not copies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from mlm_lib.book.diagram import EMBED_FILL, ENCODER_FILL, FAMILY, FONT, HEAD_FILL, LEFT, arrow_marker
from mlm_lib.book.viz import COLUMN_WIDTH_PX, REFERENCE_COLOR, TEXT_COLOR, TRUE_TEXT_COLOR

# ---------------------------------------------------------------- the map of the book: the game
# The game BERT plays on every batch, a stage per box in the order it runs, each with the piece of
# the formula it produces and the chapters that take it apart (tests/content/test_toc.py checks
# that every chapter of _toc.yml is on the map).
GAME_STAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("a sentence", "tokens x_1 ... x_n", ("01_words_and_symbols", "09_wordpiece")),
    ("choose M", "about 15% of positions", ("01_words_and_symbols", "06_corrupting_the_input")),
    ("corrupt", "x\\M: [MASK] 80/10/10", ("06_corrupting_the_input",)),
    ("encode", "h_i, both sides read", ("07_inside_bert", "08_both_directions")),
    ("score every word", "P(v | x\\M) over V", ("02_vocabulary_softmax",)),
    ("the loss", "−Σ over M of log P", ("03_the_log", "04_the_minus_sign", "05_masked_only_sum")),
    ("one step", "θ ← θ − η ∇L", ("10_pretraining", "14_one_sentence")),
)
# What the book does with the game's encoder, or instead of the game.
AFTER_GAME: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("a second game: is B next?", ("11_next_sentence_prediction",)),
    ("keep the encoder, add a head", ("12_fine_tuning", "13_task_shapes")),
    ("another game: ELECTRA", ("15_after_mlm",)),
)
GAME_ROW = 4  # stages in the top row; the rest run back along the bottom row, right to left
GAME_BOX_H, GAME_GAP_X, GAME_GAP_Y = 62, 24, 34


def _chapter_links(x: float, y: float, stems: Sequence[str], href: Callable[[str], str]) -> str:
    """'ch. 1 · ch. 9', centred on x, each number a link to its chapter named for screen readers."""
    labels = [f"ch. {int(s[:2])}" for s in stems]
    width = sum(len(t) for t in labels) * 6.6 + (len(labels) - 1) * 14
    left = x - width / 2
    out = []
    for stem, text in zip(stems, labels):
        name = escape(f"{text}: chapter {int(stem[:2])}, " + stem[3:].replace("_", " "))  # holds the visible text
        out.append(f"<a href='{escape(href(stem))}' aria-label='{name}'><text x='{left}' y='{y}' "
                   f"fill='{TRUE_TEXT_COLOR}' {FONT} text-decoration='underline'>{text}</text></a>")
        left += len(text) * 6.6 + 14
    return "".join(out)


def _stage_box(x: float, y: float, w: float, number: int, name: str, piece: str, stems: Sequence[str],
               href: Callable[[str], str], fill: str) -> str:
    return (f"<rect x='{x}' y='{y}' width='{w}' height='{GAME_BOX_H}' rx='6' fill='{fill}' "
            f"stroke='{REFERENCE_COLOR}'/><text x='{x + w / 2}' y='{y + 17}' text-anchor='middle' "
            f"fill='{TEXT_COLOR}' {FONT} font-weight='bold'>{number}. {escape(name)}</text>"
            f"<text x='{x + w / 2}' y='{y + 35}' text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>"
            f"{escape(piece)}</text>" + _chapter_links(x + w / 2, y + 53, stems, href))


def game_map(href: Callable[[str], str] = lambda stem: f"{stem}.ipynb",
             stages: Sequence[tuple[str, str, Sequence[str]]] = GAME_STAGES,
             after: Sequence[tuple[str, Sequence[str]]] = AFTER_GAME) -> str:
    """An SVG of the game BERT plays on every batch (a sentence, choose M, corrupt, encode, score
    every word of V, the loss, one step, and again), each stage with the piece of the formula it
    produces and links to the chapters that take it apart; below it, what the book does with the
    encoder the game trains. ``href`` turns a chapter's notebook stem into a link (a chapter's
    output names the .ipynb, which the site's build points at the page; a page outside
    ``notebooks/`` gives its own path).

    As wide as the site's column, so that its text is shown at its own size."""
    width = COLUMN_WIDTH_PX
    w = (width - 2 * LEFT - (GAME_ROW - 1) * GAME_GAP_X) / GAME_ROW
    body = [f"<text x='{LEFT}' y='18' fill='{TEXT_COLOR}' {FAMILY} font-size='14' font-weight='bold'>"
            "The game BERT plays on every batch, and the chapters that take it apart</text>"]
    top, bottom = 34, 34 + GAME_BOX_H + GAME_GAP_Y
    where = []  # (x, y) of each stage's box
    for k, (name, piece, stems) in enumerate(stages):
        row, col = divmod(k, GAME_ROW)
        col = col if row == 0 else GAME_ROW - 1 - col  # the bottom row runs back, right to left
        x, y = LEFT + col * (w + GAME_GAP_X), top if row == 0 else bottom
        fill = ENCODER_FILL if name == "encode" else HEAD_FILL if row else EMBED_FILL
        body.append(_stage_box(x, y, w, k + 1, name, piece, stems, href, fill))
        where.append((x, y))
    for (x0, y0), (x1, y1) in zip(where, where[1:]):
        if y0 == y1 and x1 > x0:
            body.append(f"<line x1='{x0 + w}' y1='{y0 + GAME_BOX_H / 2}' x2='{x1 - 1}' "
                        f"y2='{y1 + GAME_BOX_H / 2}' stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>")
        elif y0 == y1:
            body.append(f"<line x1='{x0}' y1='{y0 + GAME_BOX_H / 2}' x2='{x1 + w + 1}' "
                        f"y2='{y1 + GAME_BOX_H / 2}' stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>")
        else:
            body.append(f"<line x1='{x0 + w / 2}' y1='{y0 + GAME_BOX_H}' x2='{x1 + w / 2}' y2='{y1 - 1}' "
                        f"stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>")
    # the last stage leads back to the first: the next batch
    (xl, yl), (xf, yf) = where[-1], where[0]
    if yl != yf:
        mid = yl + GAME_BOX_H / 2
        body.append(f"<path d='M{xl},{mid} L{xf + w / 2},{mid} L{xf + w / 2},{yf + GAME_BOX_H + 1}' "
                    f"fill='none' stroke='{TEXT_COLOR}' marker-end='url(#ARROW)'/>"
                    f"<text x='{xf + w / 2 - 6}' y='{mid - 8}' text-anchor='end' fill='{TEXT_COLOR}' "
                    f"{FONT}>next</text><text x='{xf + w / 2 - 6}' y='{mid + 18}' text-anchor='end' "
                    f"fill='{TEXT_COLOR}' {FONT}>batch</text>")
    y = bottom + GAME_BOX_H + 26
    body.append(f"<text x='{LEFT}' y='{y}' fill='{TEXT_COLOR}' {FONT} font-weight='bold'>"
                "With the encoder the game trains</text>")
    y += 10
    aw = (width - 2 * LEFT - (len(after) - 1) * 16) / max(len(after), 1)
    for k, (name, stems) in enumerate(after):
        x = LEFT + k * (aw + 16)
        body.append(f"<rect x='{x}' y='{y}' width='{aw}' height='{GAME_BOX_H - 18}' rx='6' "
                    f"fill='{ENCODER_FILL}' stroke='{REFERENCE_COLOR}'/><text x='{x + aw / 2}' y='{y + 17}' "
                    f"text-anchor='middle' fill='{TEXT_COLOR}' {FONT}>{escape(name)}</text>"
                    + _chapter_links(x + aw / 2, y + 35, stems, href))
    height = y + GAME_BOX_H - 18 + 4
    arrow = "arrow-game-map"
    # Not role='img': its links must stay reachable (an image's children are not).
    label = escape("The game BERT plays on every batch: " + "; then ".join(
        f"{k + 1}, {name}: {piece} (chapters {', '.join(str(int(s[:2])) for s in stems)})"
        for k, (name, piece, stems) in enumerate(stages)) + "; and again with the next batch. With the "
        "encoder it trains: " + "; ".join(f"{name} (chapters {', '.join(str(int(s[:2])) for s in stems)})"
                                          for name, stems in after))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='group' aria-label='{label}' "
            f"viewBox='0 0 {width} {height}' width='{width}' style='max-width: 100%; height: auto'>"
            f"<title>{label}</title>{arrow_marker(arrow)}" + "".join(body).replace("#ARROW", "#" + arrow)
            + "</svg>")
