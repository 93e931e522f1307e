"""Show it, then say less: every chapter draws its central idea, and intervals are pictures.

- Every chapter shows at least one figure (a matplotlib image, a drawn SVG, or a Vega-Lite chart
  that responds on the static page), and the first comes in the first half of what the chapter
  teaches: the picture of its idea where the idea is taught, not after it.
- Every image says what it shows to a reader who cannot see it: a matplotlib output carries alt
  text in its cell's ``mystnb.image.alt`` (without it the site's ``alt`` is the image's file name),
  and a drawn SVG is ``role='img'`` (``'group'`` when it holds links) with an ``aria-label``.
- A figure drawn for the column (``mlm_lib.book.viz.column_figure``, which records in its PNG the
  width it is shown at and its smallest text as shown) is no wider than the column and shows no
  text under ``SMALLEST_TEXT_PX`` on a desktop.
- A cell that draws a matplotlib figure folds its code on the site (tag ``hide-input``: a "Show
  code cell source" toggle): the page shows the figure the prose discusses, the notebook all of it.
- A legend sits outside the data: chapters place legends through ``legend_below`` (or a figure
  legend placed ``outside``), never inside a panel, where it covers a curve or a bar sooner or later.
- A multi-seed experiment is shown as a forest plot (``mlm_lib.book.viz.forest_figure``), and the
  prose names its conclusion: at most a couple of bracketed ``mean [low, high]`` intervals remain in
  any chapter's prose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import base64
import io

import pytest

from mlm_lib.book.viz import COLUMN_WIDTH_PX, SMALLEST_TEXT_KEY, SMALLEST_TEXT_PX
from word_count import CLOSING_HEADING

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

MOST_BRACKETED_INTERVALS = 2
# "0.169 [0.149, 0.191]", "-0.006 [-0.067, 0.056]", "0.240 [0.179, 0.301]"
NUMBER = r"[-−]?\d[\d,]*(?:\.\d+)?"
BRACKETED_INTERVAL = re.compile(rf"{NUMBER}\s*\[\s*{NUMBER}\s*,\s*{NUMBER}\s*\]")
IMAGE_TYPES = ("image/png", "image/svg+xml", "application/vnd.vegalite.v5+json")
SVG_DRAWING = re.compile(r"<svg\b[^>]*>", re.S)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _prose(path: Path) -> str:
    """The chapter's Markdown before its closing summary."""
    parts = []
    for cell in _cells(path):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith(CLOSING_HEADING):
            break
        parts.append(source)
    return "\n".join(parts)


def bracketed_intervals(markdown: str) -> list[str]:
    return BRACKETED_INTERVAL.findall(markdown)


def figures(path: Path) -> list[tuple[str, str | None]]:
    """(kind, alt text or None) of every figure the chapter's outputs show."""
    found = []
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt")
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for kind in IMAGE_TYPES:
                if kind in data:
                    found.append((kind, alt if kind == "image/png" else kind))
            html = "".join(data.get("text/html", ""))
            for tag in SVG_DRAWING.findall(html):
                label = re.search(r"aria-label=(['\"])(.+?)\1", tag)
                role = re.search(r"role=['\"](img|group)['\"]", tag)  # group: a drawing with links
                found.append(("svg", label.group(2) if label and role else None))
    return found


def test_the_interval_pattern_finds_what_the_prose_wrote():
    prose = ("fills 0.169 [0.149, 0.191] of them, a difference of -0.006 [−0.067, 0.056]; "
             "BERT's [MASK] token and a list [1, 2] are not intervals")
    assert bracketed_intervals(prose) == ["0.169 [0.149, 0.191]", "-0.006 [−0.067, 0.056]"]


def test_an_svg_without_a_label_is_no_figure(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": "<svg viewBox='0 0 1 1'></svg>"}},
        {"output_type": "display_data", "data": {"text/html": "<svg role='img' aria-label='A map'>"}},
        {"output_type": "display_data", "data": {"image/png": "iVBOR"}}]}
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert figures(path) == [("svg", None), ("svg", "A map"), ("image/png", None)]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_shows_a_figure(path):
    assert figures(path), f"{path.stem} shows no figure: draw its central idea"


# The first figure lies within this share of the chapter's teaching cells (those before its
# closing summary), counted in characters of source.
FIRST_FIGURE_BY = 0.5


def _shows_a_figure(cell: dict) -> bool:
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(kind in data for kind in IMAGE_TYPES) or SVG_DRAWING.search("".join(data.get("text/html", ""))):
            return True
    return False


def first_figure_at(path: Path) -> float | None:
    """Where the chapter's first figure comes, as a share of its teaching cells' source."""
    teaching = []
    for cell in _cells(path):
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).lstrip().startswith(CLOSING_HEADING):
            break
        teaching.append(cell)
    sizes = [len("".join(c["source"])) for c in teaching]
    for k, cell in enumerate(teaching):
        if _shows_a_figure(cell):
            return sum(sizes[:k]) / max(sum(sizes), 1)
    return None


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_chapters_idea_is_drawn_in_its_first_half(path):
    at = first_figure_at(path)
    assert at is not None and at <= FIRST_FIGURE_BY, (
        f"{path.stem}: its first figure comes at {at:.0%} of the chapter; draw its central idea in the "
        f"section that teaches it, within the first {FIRST_FIGURE_BY:.0%}")


def test_a_figure_after_the_middle_is_found_late(tmp_path):
    code = lambda outputs: {"cell_type": "code", "metadata": {}, "source": "x" * 100, "outputs": outputs}  # noqa: E731
    figure = [{"output_type": "display_data", "data": {"image/png": "iVBOR"}}]
    cells = [code([]), code([]), code([]), code(figure),
             {"cell_type": "markdown", "metadata": {}, "source": CLOSING_HEADING + "\n"}, code(figure)]
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert first_figure_at(path) == 0.75
    cells[3]["outputs"] = []
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert first_figure_at(path) is None  # a figure after the summary does not count


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_has_alt_text(path):
    missing = [kind for kind, alt in figures(path) if not (alt and alt.strip())]
    assert not missing, (f"{path.stem}: {len(missing)} figure(s) without alt text ({missing}); "
                         "give a matplotlib cell metadata mystnb.image.alt, an SVG role='img' and "
                         "aria-label")


FOLDED_CODE = {"hide-input", "remove-input"}


def unfolded_figure_cells(path: Path) -> list[int]:
    """Cells that draw a matplotlib figure and still show their code on the site."""
    return [k for k, cell in enumerate(_cells(path)) if cell["cell_type"] == "code"
            and any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
            and not FOLDED_CODE & set(cell["metadata"].get("tags", []))]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figure_code_is_folded_on_the_page(path):
    cells = unfolded_figure_cells(path)
    assert not cells, (f"{path.stem}: cells {cells} draw a figure and show their plotting code on the "
                       "page: tag them hide-input")


def test_an_unfolded_figure_cell_is_found(tmp_path):
    figure = [{"output_type": "display_data", "data": {"image/png": "iVBOR"}}]
    cells = [{"cell_type": "code", "metadata": {}, "source": "plt.show()", "outputs": figure},
             {"cell_type": "code", "metadata": {"tags": ["hide-input"]}, "source": "", "outputs": figure},
             {"cell_type": "code", "metadata": {}, "source": "print(1)", "outputs": []}]
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert unfolded_figure_cells(path) == [0]


# A legend drawn inside a panel: ax.legend(...), axes[0].legend(...), or a figure legend not
# placed outside the panels.
LEGEND_IN_A_PANEL = re.compile(r"\b(?:ax\w*|axes\[[^]]+\])\.legend\(|\bfig\.legend\((?![\s\S]{0,300}?loc=[\"']outside)")


def legends_in_panels(path: Path) -> list[tuple[int, str]]:
    found = []
    for k, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code":
            found += [(k, m.group(0)) for m in LEGEND_IN_A_PANEL.finditer("".join(cell["source"]))]
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_legends_sit_outside_the_data(path):
    found = legends_in_panels(path)
    assert not found, f"{path.stem}: legends inside a panel {found}: use legend_below(fig, ax)"


def test_a_legend_inside_a_panel_is_found(tmp_path):
    sources = ['ax1.legend(loc="lower left")', "axes[0].legend()", "fig.legend(handles)",
               'fig.legend(handles=[Patch(lw=2)],\n           loc="outside lower center")', "legend_below(fig, ax)"]
    cells = [{"cell_type": "code", "metadata": {}, "source": s, "outputs": []} for s in sources]
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert [k for k, _ in legends_in_panels(path)] == [0, 1, 2]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_intervals_are_pictures_not_brackets(path):
    found = bracketed_intervals(_prose(path))
    assert len(found) <= MOST_BRACKETED_INTERVALS, (
        f"{path.stem} quotes {len(found)} bracketed intervals in its prose ({found[:4]}...): show "
        f"the arms as a forest plot (mlm_lib.book.viz.forest_figure) and name the conclusion")


def column_pngs(path: Path) -> list[tuple[int, int, float]]:
    """(cell index, width in px, smallest text shown in px) of each PNG drawn for the column."""
    from PIL import Image

    found = []
    for k, cell in enumerate(_cells(path)):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if not png:
                continue
            image = Image.open(io.BytesIO(base64.b64decode(png)))
            if SMALLEST_TEXT_KEY in image.info:
                found.append((k, image.size[0], float(image.info[SMALLEST_TEXT_KEY])))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_column_figures_fit_the_column_and_their_text_is_readable(path):
    bad = [(k, width, text) for k, width, text in column_pngs(path)
           if width > COLUMN_WIDTH_PX or text < SMALLEST_TEXT_PX]
    assert not bad, (f"{path.stem}: figures (cell, width px, smallest text px) {bad} are wider than "
                     f"the {COLUMN_WIDTH_PX} px column or show text under {SMALLEST_TEXT_PX} px: "
                     "draw them with column_figure and fonts of at least SMALLEST_FONT_PT")


SVG_ELEMENT = re.compile(r"<svg\b.*?</svg>", re.S)
VIEW_WIDTH = re.compile(r"viewBox=['\"][-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)")
FONT_SIZE = re.compile(r"font-size[=:]\s*['\"]?([\d.]+)")


def svg_text_sizes(path: Path) -> list[tuple[int, float]]:
    """(cell index, smallest text shown in px) of each SVG drawing a chapter prints: its smallest
    font size, scaled down as the page scales a drawing wider than the column."""
    found = []
    for k, cell in enumerate(_cells(path)):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for text in ("".join(data.get(m, "")) for m in ("text/html", "image/svg+xml")):
                for svg in SVG_ELEMENT.findall(text):
                    sizes = [float(s) for s in FONT_SIZE.findall(svg)]
                    width = VIEW_WIDTH.search(SVG_DRAWING.match(svg).group(0))
                    if sizes:
                        scale = min(1.0, COLUMN_WIDTH_PX / float(width.group(1))) if width else 1.0
                        found.append((k, min(sizes) * scale))
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_diagrams_show_their_text_at_a_readable_size(path):
    bad = [(k, round(px, 1)) for k, px in svg_text_sizes(path) if px < SMALLEST_TEXT_PX]
    assert not bad, (f"{path.stem}: diagrams (cell, smallest text px) {bad} show text under "
                     f"{SMALLEST_TEXT_PX} px in the {COLUMN_WIDTH_PX} px column")


def test_a_diagram_wider_than_the_column_shows_its_text_smaller(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "source": "", "outputs": [
        {"output_type": "display_data", "data": {"text/html": [
            "<svg viewBox='0 0 1376 200'><text font-size='16'>a</text></svg>",
            "<svg viewBox='0 0 500 90'><text font-size='11.5'>b</text></svg>"]}}]}
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert svg_text_sizes(path) == [(0, 8.0), (0, 11.5)]


def test_the_record_of_a_column_figure_is_read_from_its_png(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mlm_lib.book.viz import column_figure, column_png

    fig, ax = column_figure()
    ax.plot([0, 1])
    png = base64.b64encode(column_png(fig)).decode()
    plt.close(fig)
    cell = {"cell_type": "code", "metadata": {}, "source": "", "outputs": [
        {"output_type": "display_data", "data": {"image/png": png}}]}
    path = tmp_path / "00_x.ipynb"
    path.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    [(k, width, text)] = column_pngs(path)
    assert (k, width) == (0, COLUMN_WIDTH_PX) and text >= SMALLEST_TEXT_PX
