"""Tables and pictures shared by the book's chapters.

The chapters show the same few objects again and again: a tokenized sentence with its positions
and the set M, a probability distribution over the vocabulary, one number per position, one
head's attention. Each has one helper here so that every chapter draws it the same way and a
notebook cell stays short.

Tables are plain text (monospace, fixed column widths): they print the same on the site, in a
terminal and in a notebook, and nbval can compare them. Figures are drawn on a matplotlib ``Axes``
the caller owns, so a chapter can put several side by side. The colours are hex strings, so that
matplotlib figures and the browser's live charts (:mod:`mlm_lib.book.live`) share them as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from mlm_lib.stats import Interval

MASK_TOKEN = "[MASK]"
# Tick labels are turned so that neighbouring words do not overlap; the "i:token" labels of
# position_bars are longer and need a steeper angle.
WORD_LABEL_ROTATION = 45
POSITION_LABEL_ROTATION = 60

# One meaning per colour in every chapter's figures (chapter 0 says so to the reader).
# They are matplotlib's tab:orange, tab:blue and tab:gray.
TRUE_COLOR = "#ff7f0e"       # the true word x_i, and the positions of M where it is hidden
MODEL_COLOR = "#1f77b4"      # the model's probabilities for the other words; positions outside M
REFERENCE_COLOR = "#7f7f7f"  # what is not the model: counting baselines, reference lines, the rest of V
# Text on white, dark enough to read (WCAG AA): plain, the true word's orange darkened, and numbers
# that broke (inf, nan).
TEXT_COLOR = "#222222"
TRUE_TEXT_COLOR = "#b35300"
BROKEN_COLOR = "#b22222"
HIGHLIGHT_COLOR = "#ff0000"  # red: the box around the rows of interest in an attention map
REST_LABEL = "rest of V"
# Lines that compare arms of equal standing (none is the true word or a reference): the model's
# blue first, then colours that no other meaning uses (tab:green, tab:purple, tab:brown), so that
# four arms stay apart in colour as well as in line style.
SERIES_COLORS = (MODEL_COLOR, "#2ca02c", "#9467bd", "#8c564b")
SERIES_STYLES = ("-", "--", ":", "-.")

# The size a figure is shown at. The site's text column is COLUMN_WIDTH_PX wide on a desktop, and an
# image wider than it is scaled down to fit: a figure drawn 10 inches wide at 100 dpi shows at 0.69
# of its size, and its 10-point ticks at 9.6 px. So the book draws every figure exactly as wide as the
# column (COLUMN_WIDTH_IN at FIGURE_DPI, no cropping), and sizes its fonts in points for that dpi:
# a point is FIGURE_DPI / 72 pixels, so 8 points are 11.1 px, the least a reader should be asked to read.
COLUMN_WIDTH_PX = 688
FIGURE_DPI = 100
COLUMN_WIDTH_IN = COLUMN_WIDTH_PX / FIGURE_DPI
SMALLEST_TEXT_PX = 11.0
PX_PER_POINT = FIGURE_DPI / 72
BASE_FONT_PT = 10.0    # labels and text: 13.9 px
TICK_FONT_PT = 9.0     # ticks, legends, token labels: 12.5 px
TITLE_FONT_PT = 10.5   # panel titles: 14.6 px
SMALLEST_FONT_PT = SMALLEST_TEXT_PX / PX_PER_POINT  # 7.92: the floor for any explicit fontsize
# The height of one row of panels, in inches; a caller passes its own for tall or short figures.
PANEL_HEIGHT_IN = 2.8
COLUMN_RC = {
    "figure.dpi": FIGURE_DPI, "savefig.dpi": FIGURE_DPI,
    "font.size": BASE_FONT_PT, "axes.labelsize": BASE_FONT_PT,
    "axes.titlesize": TITLE_FONT_PT, "figure.titlesize": TITLE_FONT_PT,
    "xtick.labelsize": TICK_FONT_PT, "ytick.labelsize": TICK_FONT_PT,
    "legend.fontsize": TICK_FONT_PT, "legend.title_fontsize": TICK_FONT_PT,
}
# PNG text chunks that say how a figure was drawn, so that a test can measure its text as shown
# from the committed output alone.
# A forest panel's height in inches: its title and axis, plus one row per estimate.
FOREST_PANEL_IN = 1.1
FOREST_ROW_IN = 0.32
# Characters of a title line at TITLE_FONT_PT that fit the column's width.
TITLE_CHARS = 80
SHOWN_WIDTH_KEY = "Shown width px"
SMALLEST_TEXT_KEY = "Smallest text px"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
               float_format: str = "{:.3f}") -> str:
    """A fixed-width text table: one header line, a rule, one line per row.

    Floats are formatted with ``float_format`` so that printed numbers are rounded and stable
    from run to run; everything else goes through ``str``. Numbers are right-aligned, text
    left-aligned, which is how people scan columns.
    """
    headers = [str(h) for h in headers]
    if not headers:
        raise ValueError("text_table needs at least one column header")
    cells: list[list[str]] = []
    numeric = [True] * len(headers)
    for r, row in enumerate(rows):
        row = list(row)
        if len(row) != len(headers):
            raise ValueError(f"row {r} has {len(row)} cells but there are {len(headers)} headers")
        line = []
        for c, value in enumerate(row):
            if isinstance(value, float):
                line.append(float_format.format(value))
            else:
                line.append(str(value))
                if not isinstance(value, int):
                    numeric[c] = False
        cells.append(line)
    widths = [max([len(h)] + [len(line[c]) for line in cells]) for c, h in enumerate(headers)]

    def fmt(line: Sequence[str]) -> str:
        parts = [s.rjust(w) if numeric[c] else s.ljust(w)
                 for c, (s, w) in enumerate(zip(line, widths))]
        return "  ".join(parts).rstrip()

    out = [fmt(headers), "  ".join("-" * w for w in widths)]
    out.extend(fmt(line) for line in cells)
    return "\n".join(out)


def _check_masked(tokens: Sequence[str], masked: Sequence[bool] | None) -> list[bool]:
    if masked is None:
        return [False] * len(tokens)
    masked = [bool(m) for m in masked]
    if len(masked) != len(tokens):
        raise ValueError(f"masked has {len(masked)} entries but there are {len(tokens)} tokens")
    return masked


def corrupt(tokens: Sequence[str], masked: Sequence[bool], mask_token: str = MASK_TOKEN
            ) -> list[str]:
    """x_\\M as tokens: every position in M shows ``mask_token``, the others their own token.

    This is only for display; the library corrupts ids with :func:`mlm_lib.masking.mask_tokens`
    (which also does the 10% random and 10% unchanged replacements).
    """
    masked = _check_masked(tokens, masked)
    return [mask_token if m else t for t, m in zip(tokens, masked)]


def token_table(tokens: Sequence[str], masked: Sequence[bool] | None = None,
                seen: Sequence[str] | None = None) -> str:
    """Positions i, tokens x_i, membership in M and what the model sees (x_\\M), one row each.

    ``seen`` defaults to :func:`corrupt` of ``tokens``; pass the real corrupted tokens when some
    positions of M were replaced by a random token or kept unchanged.
    """
    masked = _check_masked(tokens, masked)
    if seen is None:
        seen = corrupt(tokens, masked)
    if len(seen) != len(tokens):
        raise ValueError(f"seen has {len(seen)} tokens but x has {len(tokens)}")
    rows = [(i, t, "yes" if m else "", s) for i, (t, m, s) in enumerate(zip(tokens, masked, seen))]
    return text_table(["i", "x_i", "in M", "x_\\M"], rows)


def prob_bars(ax: Any, labels: Sequence[str], probs: Sequence[float],
              highlight: str | None = None, title: str | None = None,
              ylabel: str = "probability", rest: float | None = None) -> Any:
    """A bar chart of a distribution; the bar labelled ``highlight`` (the true word) in orange.

    A chart of the top few words hides where the rest of the probability went. Pass ``rest``
    (the mass of every word not shown, ``1 - sum(probs)``) to draw it as one grey bar at the end,
    so the bars always add up to 1. Returns the matplotlib ``BarContainer`` so a caller (or a
    test) can read the heights.
    """
    labels = [str(x) for x in labels]
    probs = [float(p) for p in probs]
    if len(labels) != len(probs):
        raise ValueError(f"{len(labels)} labels but {len(probs)} probabilities")
    if highlight is not None and highlight not in labels:
        raise ValueError(f"highlight {highlight!r} is not one of the labels")
    colors = [TRUE_COLOR if x == highlight else MODEL_COLOR for x in labels]
    if rest is not None:
        if not -1e-6 <= rest <= 1 + 1e-6:
            raise ValueError(f"rest is the probability of the words not shown, in [0, 1]; got {rest}")
        labels, probs, colors = labels + [REST_LABEL], probs + [max(0.0, float(rest))], colors + [REFERENCE_COLOR]
    bars = ax.bar(range(len(labels)), probs, color=colors)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=WORD_LABEL_ROTATION, ha="right")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return bars


def position_bars(ax: Any, tokens: Sequence[str], values: Sequence[float],
                  masked: Sequence[bool] | None = None, ylabel: str = "",
                  title: str | None = None) -> Any:
    """One bar per position of a sentence, tokens on the x axis; positions in M in orange.

    Used for anything that lives on positions: the loss term of each position, a probability
    per position. Returns the ``BarContainer``.
    """
    masked = _check_masked(tokens, masked)
    values = [float(v) for v in values]
    if len(values) != len(tokens):
        raise ValueError(f"{len(values)} values but {len(tokens)} tokens")
    colors = [TRUE_COLOR if m else MODEL_COLOR for m in masked]
    bars = ax.bar(range(len(tokens)), values, color=colors)
    ax.set_xticks(range(len(tokens)))
    ax.set_xticklabels([f"{i}:{t}" for i, t in enumerate(tokens)], rotation=POSITION_LABEL_ROTATION,
                       ha="right")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return bars


def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between every pair of rows of a position table ([P, H] -> [P, P])."""
    if table.dim() != 2:
        raise ValueError(f"a position table is [positions, hidden], got {tuple(table.shape)}")
    unit = torch.nn.functional.normalize(table.float(), dim=-1)
    return unit @ unit.T


def plot_attention(ax: Any, attention: torch.Tensor, tokens: Sequence[str], title: str = "",
                   highlight: Sequence[int] = ()) -> Any:
    """Draw one head's attention [T, T] (rows: the position that reads, columns: the position it
    reads from) with token labels; ``highlight`` puts a box around the rows of interest."""
    from matplotlib.patches import Rectangle  # matplotlib is optional: only the chapters draw

    a = attention.detach().float().cpu()
    if a.dim() != 2 or a.shape[0] != a.shape[1] or a.shape[0] != len(tokens):
        raise ValueError(f"attention must be [T, T] with T = {len(tokens)} tokens, "
                         f"got {tuple(a.shape)}")
    im = ax.imshow(a.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=TICK_FONT_PT)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=TICK_FONT_PT)
    ax.set_xlabel("reads from (key)")
    ax.set_ylabel("position reading (query)")
    for r in highlight:
        ax.add_patch(Rectangle((-0.5, r - 0.5), len(tokens), 1, fill=False,
                               edgecolor=HIGHLIGHT_COLOR, linewidth=1.5))
    if title:
        ax.set_title(title)
    return im


def forest(ax: Any, rows: Sequence[tuple[str, Interval]], reference: float | None = None,
           reference_label: str | None = None, xlabel: str = "", title: str | None = None,
           color: str = MODEL_COLOR) -> Any:
    """A forest plot: one row per estimate, a dot at its mean and a bar over its 95% interval.

    An interval read as a picture answers the question a bracketed pair of numbers hides: does it
    reach the reference line (chance, a baseline, or 0 for a difference)? A row whose interval
    excludes ``reference`` is drawn filled, one that reaches it hollow, so the verdict is visible
    without reading the numbers. The first row is at the top. ``reference_label`` names the dashed
    line under the x axis rather than in a legend, which in a column-wide panel would sit on the
    rows. Returns the ``ErrorbarContainer`` of the filled rows' bars plus the hollow rows' (a list),
    so a test can read them.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("forest needs at least one (label, interval) row")
    for label, iv in rows:
        if not iv.low <= iv.mean <= iv.high:
            raise ValueError(f"row {label!r}: mean {iv.mean} lies outside [{iv.low}, {iv.high}]")
    y = list(range(len(rows)))[::-1]
    drawn = []
    for yi, (label, iv) in zip(y, rows):
        clear = reference is None or not iv.low <= reference <= iv.high
        drawn.append(ax.errorbar([iv.mean], [yi], xerr=[[iv.mean - iv.low], [iv.high - iv.mean]],
                                 fmt="o", color=color, capsize=4, markersize=7,
                                 markerfacecolor=color if clear else "white"))
    if reference is not None:
        ax.axvline(reference, color=REFERENCE_COLOR, linestyle="--", linewidth=1,
                   label=reference_label)
        if reference_label:
            xlabel = f"{xlabel}\n(dashed: {reference_label})" if xlabel else f"dashed: {reference_label}"
    ax.set_yticks(y)
    ax.set_yticklabels([label for label, _ in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    return drawn


def forest_figure(arms: Sequence[tuple[str, Interval]],
                  differences: Sequence[tuple[str, Interval]] = (),
                  reference: float | None = None, reference_label: str | None = None,
                  metric: str = "", title: str | None = None) -> Any:
    """The book's picture of a multi-seed experiment: the arms on top (mean and 95% interval over
    seeds, against ``reference``: chance or a baseline), and under them the paired differences
    against 0, which is where a comparison is decided. Stacked rather than side by side, so that
    each panel has the column's width for its row labels. Returns the figure."""
    arms, differences = list(arms), list(differences)
    rows = [len(arms)] + ([len(differences)] if differences else [])
    height = sum(FOREST_PANEL_IN + FOREST_ROW_IN * n for n in rows) + (0.4 if title else 0)
    fig, axes = column_figure(len(rows), 1, height=height, squeeze=False,
                              gridspec_kw={"height_ratios": [FOREST_PANEL_IN + FOREST_ROW_IN * n
                                                             for n in rows]})
    forest(axes[0][0], arms, reference, reference_label, xlabel=metric,
           title="each arm (mean of seeds, 95% interval)")
    if differences:
        forest(axes[1][0], differences, 0.0, None, xlabel=f"difference in {metric}" if metric else "",
               title="paired difference (95% interval)")
    if title:
        fig.suptitle(wrap_title(title))
    return fig


# What a notebook shows for a kernel-only control before its cell is run (JupyterLab falls back
# to the text when the widget's state is not saved, which ipywidgets' own text does badly:
# "interactive(children=(FloatSlider(...").
RUN_HINT = "Run this cell to use the controls."


def kernel_controls(function: Any, /, **controls: Any) -> None:
    """Controls that call ``function`` in the running kernel, as ``ipywidgets.interact`` does.

    Used where the answer needs Python (a tokenizer, the model), so no browser-side chart can
    stand in. ``ipywidgets.interactive`` labels every control with its keyword's name unless it
    brings its own ``description``, so each has an accessible name; the output's plain-text form
    is :data:`RUN_HINT`. Returns nothing, so that a cell ending with the call shows the controls
    once.
    """
    import ipywidgets

    show_controls(ipywidgets.interactive(function, **controls))


def show_controls(panel: Any) -> None:
    """Display a ready-made ipywidgets panel (buttons wired to Python callbacks) with
    :data:`RUN_HINT` as its plain-text form, like :func:`kernel_controls`."""
    from IPython.display import display

    bundle = panel._repr_mimebundle_()
    bundle["text/plain"] = RUN_HINT
    display(bundle, raw=True)


def use_column_style() -> None:
    """Set the book's figure fonts and dpi (:data:`COLUMN_RC`).

    rcParams rather than a context manager: matplotlib reads the font size of a tick label when it
    draws it, after the cell that made the figure has moved on. Safe to call again.
    """
    import matplotlib

    matplotlib.rcParams.update(COLUMN_RC)


def _show_uncropped() -> None:
    """In a notebook, show a figure made by :func:`column_figure` whole (the inline backend crops
    to the drawn area, which would make it narrower or wider than the column), with its measured
    text size in the PNG's metadata; other figures as before.

    Called after a figure exists: the inline backend registers its own printer only then.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: nothing is displayed
        return
    shell = get_ipython()
    if shell is None or "image/png" not in shell.display_formatter.formatters:
        return
    import base64

    from matplotlib.figure import Figure

    formatter = shell.display_formatter.formatters["image/png"]
    try:
        cropped = formatter.lookup_by_type(Figure)
    except KeyError:
        cropped = None
    if getattr(cropped, "_column", False):
        return

    def png(fig: Any) -> Any:
        if not getattr(fig, "_column", False):  # a figure drawn some other way keeps its cropping
            return cropped(fig) if cropped else None
        return base64.b64encode(column_png(fig)).decode("ascii")

    png._column = True
    formatter.for_type(Figure, png)


def column_figure(nrows: int = 1, ncols: int = 1, *, height: float | None = None,
                  **subplots: Any) -> tuple[Any, Any]:
    """``plt.subplots`` for the book: as wide as the text column, in the book's fonts, laid out by
    matplotlib's constrained layout so that nothing is cropped or overlaps.

    A figure drawn wider than the column would be scaled down on the page and its text with it;
    this one is shown at its own size. ``height`` is in inches (default :data:`PANEL_HEIGHT_IN`
    per row). Returns ``(fig, axes)`` like ``plt.subplots``.
    """
    import matplotlib.pyplot as plt

    use_column_style()
    if height is None:
        height = PANEL_HEIGHT_IN * nrows
    fig, axes = plt.subplots(nrows, ncols, figsize=(COLUMN_WIDTH_IN, height), layout="constrained",
                             **subplots)
    fig._column = True
    _show_uncropped()
    return fig, axes


def shown_text_px(fig: Any) -> float:
    """The smallest visible text of ``fig`` in pixels as shown in the column on a desktop: its size
    in points times FIGURE_DPI / 72, times the scale the page shows the figure at (below 1 only for
    a figure wider than the column)."""
    from matplotlib.text import Text

    fig.draw_without_rendering()  # tick labels exist only once drawn
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]  # shared axes hide their labels
    width_px = fig.get_figwidth() * fig.dpi
    scale = min(1.0, COLUMN_WIDTH_PX / width_px)
    return min(sizes, default=float("inf")) * fig.dpi / 72 * scale


def column_png(fig: Any) -> bytes:
    """The PNG a notebook shows for a column figure: the whole figure at FIGURE_DPI (no cropping:
    it is as wide as the column), with :data:`SHOWN_WIDTH_KEY` and :data:`SMALLEST_TEXT_KEY` in
    its metadata."""
    import io

    smallest = shown_text_px(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=FIGURE_DPI, metadata={
        SHOWN_WIDTH_KEY: f"{min(COLUMN_WIDTH_PX, round(fig.get_figwidth() * FIGURE_DPI))}",
        SMALLEST_TEXT_KEY: f"{smallest:.1f}"})
    return out.getvalue()


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """A title broken into lines that fit the column (matplotlib never wraps a title, and one wider
    than the figure runs off both edges)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) if len(text) > width else text


def legend_below(fig: Any, ax: Any = None, ncols: int = 2) -> Any:
    """The figure's legend under its panels, outside every data area: a legend inside a
    column-wide panel sits on a curve or a bar sooner or later (and one per panel repeats itself).

    Takes the entries of ``ax`` (default: every panel, each label once, a twin axis's included).
    """
    handles, labels = [], []
    for a in [ax] if ax is not None else fig.axes:
        for h, label in zip(*a.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    return fig.legend(handles, labels, loc="outside lower center", ncols=min(ncols, len(labels)),
                      frameon=False)
