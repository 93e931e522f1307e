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
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
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
    without reading the numbers. The first row is at the top. Returns the ``ErrorbarContainer``
    of the filled rows' bars plus the hollow rows' (a list), so a test can read them.
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
            ax.legend(loc="best", fontsize="small", frameon=False)
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
    """The book's picture of a multi-seed experiment: the arms on the left (mean and 95%
    interval over seeds, against ``reference``: chance or a baseline), and beside them the paired
    differences against 0, which is where a comparison is decided. Returns the figure."""
    import matplotlib.pyplot as plt  # matplotlib is optional: only the chapters draw

    panels = 2 if differences else 1
    height = 0.9 + 0.45 * max(len(arms), len(differences))
    fig, axes = plt.subplots(1, panels, figsize=(10 if panels == 2 else 6, height), squeeze=False)
    forest(axes[0][0], arms, reference, reference_label, xlabel=metric,
           title="each arm (mean of seeds, 95% interval)")
    if differences:
        forest(axes[0][1], differences, 0.0, None, xlabel=f"difference in {metric}" if metric else "",
               title="paired difference (95% interval)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
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
