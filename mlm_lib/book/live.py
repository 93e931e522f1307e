"""Formula widgets that compute in the reader's browser, with no kernel behind them.

A slider drawn by ipywidgets needs Python to answer each move, so on the published site it would
move and change nothing. The charts here are Vega-Lite specifications instead: each control is a
parameter bound to an HTML input, and the formula is written as Vega expressions (``exp``, ``log``,
sums over a handful of rows), so the browser recomputes the numbers itself. The chapters compute
the same numbers with their own Python functions; the charts only receive those functions'
inputs, and the tests check that both give the same digits at every setting they try.

Each chart is shown twice over: JupyterLab draws the ``application/vnd.vegalite.v5+json`` output
live, and the site draws the ``text/html`` output, a ``<div>`` and the specification as JSON,
which ``book/static/live-charts.js`` hands to the Vega libraries the site serves itself. The two
are separate outputs because JupyterLab prefers ``text/html`` to Vega-Lite when an output holds
both, and the html alone does nothing in JupyterLab (it runs no page scripts).

Every formula a chart uses comes from a function of its own below (:func:`p_hill_formulas` and so
on), so that a reader, or a test, can read the arithmetic without the drawing around it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt

from mlm_lib.book.viz import (BROKEN_COLOR, MODEL_COLOR, REFERENCE_COLOR, REST_LABEL, TEXT_COLOR,
                              TRUE_COLOR, TRUE_TEXT_COLOR)

VEGALITE_MIME = "application/vnd.vegalite.v5+json"
# The class the site's script looks for; the JSON specification sits next to the chart's div.
SPEC_CLASS = "live-chart-spec"
CHART_CLASS = "live-chart"


@dataclass(frozen=True)
class LiveChart:
    """A Vega-Lite chart, displayed as the two outputs described in the module docstring."""

    spec: dict[str, Any]
    description: str

    def html(self) -> str:
        """The site's output: a div, its id a hash of the specification (the same on every run,
        so a re-executed chapter does not change), and the specification as inert JSON."""
        text = json.dumps(self.spec, sort_keys=True, separators=(",", ":"))
        chart_id = "live-" + hashlib.sha256(text.encode()).hexdigest()[:12]
        # "</" inside a <script> element would end it early; "<\/" is the same JSON string.
        safe = text.replace("</", "<\\/")
        return (f'<div class="{CHART_CLASS}" id="{chart_id}" role="figure" '
                f'aria-label="{_attr(self.description)}"></div>\n'
                f'<script type="application/json" class="{SPEC_CLASS}" data-for="{chart_id}">'
                f"{safe}</script>")

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display({VEGALITE_MIME: self.spec}, raw=True)
        display({"text/html": self.html(), "text/plain": self.description}, raw=True)


def _attr(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace(">", "&gt;"))


def _finish(chart: alt.TopLevelMixin, description: str) -> LiveChart:
    # A white card in light and dark page themes alike; no frame around views that hold text.
    chart = chart.properties(description=description, background="white").configure_view(
        stroke=None)
    spec = chart.to_dict()
    return LiveChart(spec=spec, description=description)


def _slider(name: str, label: str, value: float, lo: float, hi: float, step: float
            ) -> alt.Parameter:
    """A parameter bound to a range input; ``name`` becomes the input's name attribute and
    ``label`` its visible label, which is also its accessible name."""
    return alt.param(name=name, value=value,
                     bind=alt.binding_range(min=lo, max=hi, step=step, name=label + " "))


def _text_layer(base: alt.Chart, text: str, name: str, **encoding: Any) -> alt.Chart:
    return base.mark_text(fontSize=12, color=TEXT_COLOR, **encoding).encode(
        text=alt.Text(text)).properties(name=name)


# ---------------------------------------------------------------------------------------------
# Chapter 0: the loss of one blank as P(hill) moves.

def p_hill_formulas() -> dict[str, str]:
    """Chapter 0's arithmetic as Vega expressions, in the order they are computed."""
    return {
        # 1 / 10^-x rather than 10^x: the browser's pow(10, -4) is a hair below 0.0001, and
        # halving it would then print 0.0000 where Python prints 0.0001
        "p_hill": "1 / pow(10, -log10_p_hill)",
        # hill takes p; the other words split what is left in their fixed shares
        "q": "datum.is_true ? datum.p_hill : datum.share * (1 - datum.p_hill)",
        "loss": "-log(datum.p_hill)",
        "half": "-log(datum.p_hill / 2)",
    }


def p_hill_loss(words: Sequence[str], shares: Sequence[float], true_word: str) -> LiveChart:
    """Move P(hill) and watch the five probabilities and the loss -log P(hill).

    Why: the loss only looks at the true word's probability, so the other four words are held
    in fixed proportions (``shares``, summing to 1 over the words other than ``true_word``) while
    P(hill) moves. Halving P(hill) always adds log 2 = 0.693 to the loss, from any start; seeing
    it at 0.6 and at 0.001 makes that concrete.
    """
    if len(words) != len(shares):
        raise ValueError(f"{len(words)} words but {len(shares)} shares")
    rows = [{"word": w, "share": float(s), "is_true": w == true_word}
            for w, s in zip(words, shares)]
    slider = _slider("log10_p_hill", f"log10 P({true_word})", round(math.log10(0.6), 2),
                     -4, 0, 0.02)
    base = alt.Chart(alt.Data(values=rows))
    for field, expr in p_hill_formulas().items():
        base = base.transform_calculate(**{field: expr})
    left = _p_hill_bars(base, words)
    one = base.transform_filter("datum.is_true")
    chart = alt.vconcat(alt.hconcat(left, _p_hill_loss_bars(one, true_word)),
                        _p_hill_summary(one, true_word)).add_params(slider)
    return _finish(chart, f"Bar charts of the {len(words)} probabilities and of the loss "
                          f"-log P({true_word}), now and after halving P({true_word}), recomputed "
                          f"as the P({true_word}) slider moves.")


def _p_hill_bars(base: alt.Chart, words: Sequence[str]) -> alt.LayerChart:
    """The words' probabilities, the true word's bar in its colour, each bar with its number."""
    bars = base.mark_bar().encode(
        x=alt.X("word:N", sort=list(words), title=None, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("q:Q", scale=alt.Scale(domain=[0, 1]), title="probability"),
        color=alt.condition("datum.is_true", alt.value(TRUE_COLOR), alt.value(MODEL_COLOR)))
    labels = _text_layer(base.transform_calculate(label="format(datum.q, '.4f')"), "label:N",
                         "p_hill_bar_labels", dy=-8).encode(
        x=alt.X("word:N", sort=list(words)), y="q:Q")
    return alt.layer(bars, labels).properties(width=240, height=200,
                                              title=f"the {len(words)} probabilities")


def _p_hill_loss_bars(one: alt.Chart, true_word: str) -> alt.LayerChart:
    """The loss now and after halving P(true word), as two labelled bars (``one``: the true
    word's row)."""
    pairs = one.transform_fold(["loss", "half"], as_=["which", "value"]).transform_calculate(
        bar=f"datum.which == 'loss' ? 'loss now' : 'after halving P({true_word})'",
        label="format(datum.value, '.3f')")
    loss_bars = pairs.mark_bar().encode(
        y=alt.Y("bar:N", sort=["loss now", f"after halving P({true_word})"], title=None),
        x=alt.X("value:Q", scale=alt.Scale(domain=[0, 10], clamp=True),
                title=f"loss = -log P({true_word})"),
        color=alt.condition("datum.which == 'loss'", alt.value(TRUE_COLOR),
                            alt.value(REFERENCE_COLOR)))
    loss_labels = _text_layer(pairs, "label:N", "p_hill_loss_labels", align="left", dx=4).encode(
        y=alt.Y("bar:N", sort=["loss now", f"after halving P({true_word})"]),
        x=alt.X("value:Q", scale=alt.Scale(domain=[0, 10], clamp=True)))
    return alt.layer(loss_bars, loss_labels).properties(
        width=200, height=200, title=["the loss, and what", f"halving P({true_word}) adds"])


def _p_hill_summary(one: alt.Chart, true_word: str) -> alt.Chart:
    """Two lines of text: P(true word) and the loss, and what halving P adds to the loss."""
    p, half_p = "format(datum.p_hill, '.4f')", "format(datum.p_hill / 2, '.4f')"
    loss, half = "format(datum.loss, '.3f')", "format(datum.half, '.3f')"
    gap = "format(datum.half - datum.loss, '.3f')"
    lines = one.transform_calculate(
        line1=f"'P({true_word}) = ' + {p} + '   loss = ' + {loss}",
        line2=f"'halve P({true_word}) to ' + {half_p} + ' and the loss becomes ' + {half}"
              f" + ' (+' + {gap} + ')'",
    ).transform_fold(["line1", "line2"], as_=["line", "text"])
    return _text_layer(lines, "text:N", "p_hill_summary", align="left").encode(
        y=alt.Y("line:N", axis=None), x=alt.value(0)).properties(width=560, height=40)


# ---------------------------------------------------------------------------------------------
# Chapter 1: the random set M, at every rate and seed.

def masked_sets(tokens: Sequence[str], states: dict[tuple[float, int], Sequence[int]],
                start: tuple[float, int] = (0.3, 5), mask_token: str = "[MASK]") -> LiveChart:
    """Move the mask rate and the seed and watch which positions form M.

    Why: M is drawn at random, so the chart cannot compute it from a formula; drawing it needs
    the library's own sampler. ``states`` maps every (rate, seed) the sliders can reach to the
    positions of M that :func:`mlm_lib.masking.mask_tokens` drew for ``tokens`` there (computed
    in Python beforehand); the browser looks the chosen one up and shows the same table as
    :func:`mlm_lib.book.viz.token_table`: the rate sets how many positions M takes, the seed which.
    """
    rates, seeds, rate_step = _rate_and_seed_stops(states)
    n = len(tokens)
    # One row per rate: the masks of every seed, one 0/1 character per position, end to end.
    looked_up = [{"rate_key": f"{r:.2f}", "masks": "".join(
        "".join("1" if i in set(states[r, s]) else "0" for i in range(n)) for s in seeds)}
        for r in rates]
    rows = [{"i": i, "token": t} for i, t in enumerate(tokens)]
    if start not in states:
        raise ValueError(f"the starting setting {start} is not one of the states")
    params = [_slider("rate", "mask rate", start[0], rates[0], rates[-1], rate_step),
              _slider("seed", "seed", start[1], seeds[0], seeds[-1], 1)]
    base = (alt.Chart(alt.Data(values=rows))
            .transform_calculate(rate_key="format(rate, '.2f')")
            .transform_lookup(lookup="rate_key", from_=alt.LookupData(
                data=alt.Data(values=looked_up), key="rate_key", fields=["masks"]))
            .transform_calculate(mask=f"substring(datum.masks, (seed - {seeds[0]}) * {n}, "
                                      f"(seed - {seeds[0]} + 1) * {n})")
            .transform_calculate(member="substring(datum.mask, datum.i, datum.i + 1) == '1'"))
    table = _masked_table(base, n, mask_token)
    chart = alt.vconcat(_masked_header(base, n), table).add_params(*params)
    return _finish(chart, "A table of the sentence's positions and tokens, marking which are in "
                          "M and what the model sees, for the mask rate and seed on the sliders.")


def _rate_and_seed_stops(states: dict[tuple[float, int], Sequence[int]]
                         ) -> tuple[list[float], list[int], float]:
    """The rates and seeds of ``states`` (every pair present, each evenly spaced) and the rate
    slider's step."""
    rates = sorted({r for r, _ in states})
    seeds = sorted({s for _, s in states})
    if len(states) != len(rates) * len(seeds):
        raise ValueError("states must hold every (rate, seed) pair of the two sliders")
    steps = {round(b - a, 10) for a, b in zip(rates, rates[1:])}
    if len(steps) > 1 or seeds != list(range(seeds[0], seeds[-1] + 1)):
        raise ValueError("the rates and the seeds must each be evenly spaced")
    return rates, seeds, steps.pop() if steps else 1.0


def _masked_table(base: alt.Chart, n: int, mask_token: str) -> alt.Chart:
    """The table of :func:`mlm_lib.book.viz.token_table`: i, x_i, in M, x_\\M, one row per
    position, the positions of M in the true word's text colour."""
    cells = base.transform_calculate(
        c_i="'' + datum.i", c_token="datum.token", c_in_m="datum.member ? 'yes' : ''",
        c_seen=f"datum.member ? '{mask_token}' : datum.token").transform_fold(
        ["c_i", "c_token", "c_in_m", "c_seen"], as_=["field", "text"]).transform_calculate(
        column="{'c_i': 'i', 'c_token': 'x_i', 'c_in_m': 'in M', 'c_seen': 'x_\\\\M'}[datum.field]")
    return cells.mark_text(fontSize=12, align="left").encode(
        x=alt.X("column:N", sort=["i", "x_i", "in M", "x_\\M"], title=None,
                axis=alt.Axis(orient="top", labelAngle=0, ticks=False, domain=False,
                              labelFontWeight="bold", labelFontSize=12, labelAlign="left",
                              labelPadding=6)),
        y=alt.Y("i:O", axis=None),
        text="text:N",
        color=alt.condition("datum.member", alt.value(TRUE_TEXT_COLOR), alt.value(TEXT_COLOR)),
    ).properties(width=380, height=18 * n, name="masked_table")


def _masked_header(base: alt.Chart, n: int) -> alt.Chart:
    """One line above the table listing M's positions, e.g. "M = {2, 5}"."""
    listed = " + ".join(f"(substring(datum.mask, {i}, {i + 1}) == '1' ? '{i}, ' : '')"
                        for i in range(n))
    return _text_layer(base.transform_filter("datum.i == 0").transform_calculate(
        listed=listed).transform_calculate(
        m_text="length(datum.listed) ? 'M = {' + slice(datum.listed, 0, -2) + '}' "
               ": 'M = {} (empty)'"),
        "m_text:N", "masked_set", align="left", fontWeight="bold").encode(
        x=alt.value(0), y=alt.value(10)).properties(width=380, height=20)


# ---------------------------------------------------------------------------------------------
# Chapter 2: temperature over the whole vocabulary.

def temperature_grid(lo: float, hi: float, step: float) -> list[float]:
    """The temperatures a slider from lo to hi in steps of step can stop at."""
    n = round((hi - lo) / step)
    return [round(lo + k * step, 10) for k in range(n + 1)]


def rest_log_sum_exp(scores: Sequence[float], shown: Sequence[int], T: float) -> float:
    """log sum over the words not shown of exp(score / T), in float64.

    The exact identity that lets a chart of a few words hold the whole vocabulary: the softmax
    of the shown words' scores / T together with one extra entry equal to this number gives each
    shown word the probability it has in the full softmax over V, and the extra entry the mass
    of everything not shown.
    """
    hidden = set(int(i) for i in shown)
    rest = [float(s) / T for i, s in enumerate(scores) if i not in hidden]
    if not rest:
        return -math.inf
    m = max(rest)
    return m + math.log(math.fsum(math.exp(x - m) for x in rest))


def temperature_formulas() -> dict[str, str]:
    """Chapter 2's softmax over the shown words plus the rest of V, as Vega expressions."""
    return {
        # a shown word's entry is its score over T; the rest of V's entry is precomputed per T
        "z": "datum.kind == 'rest' ? datum.rest_lse : datum.score / T",
        # then a softmax over these few entries, shifted by their largest (chapter 3's trick)
        "e": "exp(datum.z - datum.z_max)",
        "p": "datum.e / datum.e_sum",
    }


def temperature_softmax(words: Sequence[str], scores: Sequence[float], shown: Sequence[int],
                        true_word: str, lo: float = 0.1, hi: float = 5.0, step: float = 0.1
                        ) -> LiveChart:
    """Move the temperature T and watch the shown words and the rest of V share the mass.

    Why: dividing the scores by T sharpens (T < 1) or flattens (T > 1) the softmax over the
    *whole* vocabulary; the grey bar is where flattening sends the probability. ``scores`` is the
    full row of |V| scores and ``shown`` the indices of ``words`` in it. The browser holds only
    the shown words' scores and, for each stop of the slider, one number for all the others
    (:func:`rest_log_sum_exp`), so every stop is exact. The y axis is fixed at 0..1.
    """
    if len(words) != len(shown):
        raise ValueError(f"{len(words)} words but {len(shown)} indices")
    rows: list[dict[str, Any]] = [
        {"word": w, "kind": "true_word" if w == true_word else "word", "score": float(scores[i]),
         "T": None, "rest_lse": None} for w, i in zip(words, shown)]
    rows += [{"word": REST_LABEL, "kind": "rest", "score": None, "T": T,
              "rest_lse": rest_log_sum_exp(scores, shown, T)}
             for T in temperature_grid(lo, hi, step)]
    slider = _slider("T", "temperature T", 1.0, lo, hi, step)
    formulas = temperature_formulas()
    base = (alt.Chart(alt.Data(values=rows))
            .transform_filter("datum.kind != 'rest' || abs(datum.T - T) < 1e-6")
            .transform_calculate(z=formulas["z"])
            .transform_joinaggregate(z_max="max(z)")
            .transform_calculate(e=formulas["e"])
            .transform_joinaggregate(e_sum="sum(e)")
            .transform_calculate(p=formulas["p"], label="format(datum.p, '.3f')"))
    order = list(words) + [REST_LABEL]
    bars = base.mark_bar().encode(
        x=alt.X("word:N", sort=order, title=None, axis=alt.Axis(labelAngle=-45)),
        y=alt.Y("p:Q", scale=alt.Scale(domain=[0, 1]), title="P(v | x without M)"),
        color=alt.Color("kind:N", scale=alt.Scale(domain=["true_word", "word", "rest"],
                                                  range=[TRUE_COLOR, MODEL_COLOR, REFERENCE_COLOR]),
                        legend=None))
    labels = _text_layer(base, "label:N", "temperature_bar_labels", dy=-8).encode(
        x=alt.X("word:N", sort=order), y="p:Q")
    title = _text_layer(
        base.transform_filter("datum.kind != 'word'").transform_pivot(
            "kind", value="p").transform_calculate(
            text=f"'T = ' + format(T, '.2f') + ': P({true_word}) = ' + "
                 "format(datum.true_word, '.3f') + ', rest of V = ' + format(datum.rest, '.3f')"),
        "text:N", "temperature_title", align="left").encode(x=alt.value(0), y=alt.value(0)
                                                             ).properties(height=20)
    chart = alt.vconcat(title.properties(width=420),
                        alt.layer(bars, labels).properties(width=420, height=240)
                        ).add_params(slider)
    return _finish(chart, f"Bar chart of the softmax probabilities of {len(words)} words and of "
                          "the rest of the vocabulary, recomputed as the temperature slider moves.")


# ---------------------------------------------------------------------------------------------
# Chapter 3: the naive softmax against log_softmax, in float32 or float16.

# IEEE formats: smallest normal exponent, mantissa bits, and the first magnitude that rounds to
# infinity (the largest finite number plus half a unit in its last place).
FLOAT_FORMATS = {
    "float32": {"emin": -126, "mantissa": 23, "overflow": (2 - 2 ** -24) * 2.0 ** 127},
    "float16": {"emin": -14, "mantissa": 10, "overflow": 65520.0},
}


def _dtype_value(key: str) -> str:
    f16, f32 = FLOAT_FORMATS["float16"][key], FLOAT_FORMATS["float32"][key]
    return f"(dtype == 'float16' ? {f16!r} : {f32!r})"


def round_to_dtype(field: str) -> list[tuple[str, str]]:
    """Calculate steps that round the float64 ``datum[field]`` to the chosen dtype, as the
    hardware would: to the nearest number with that many mantissa bits (fewer below the smallest
    normal number), and to +-infinity from the overflow threshold up. Returns (name, expression)
    pairs ending with ``field`` itself, rounded."""
    a, e, q = f"_{field}_abs", f"_{field}_exp", f"_{field}_q"
    return [
        (a, f"abs(datum.{field})"),
        (e, f"floor(log(datum.{a}) / LN2)"),
        # log / LN2 can land just below an exact power of two: correct by one either way
        (e, f"datum.{a} >= pow(2, datum.{e} + 1) ? datum.{e} + 1 : "
            f"(datum.{a} < pow(2, datum.{e}) ? datum.{e} - 1 : datum.{e})"),
        (q, f"pow(2, max(datum.{e}, {_dtype_value('emin')}) - {_dtype_value('mantissa')})"),
        (field, f"!isFinite(datum.{field}) || datum.{field} == 0 ? datum.{field} : "
                f"(datum.{a} >= {_dtype_value('overflow')} ? "
                f"(datum.{field} > 0 ? 1 / 0 : -1 / 0) : "
                f"(datum.{field} > 0 ? 1 : -1) * round(datum.{a} / datum.{q}) * datum.{q})"),
    ]


def _python_number(field: str) -> str:
    """A number as Python's f"{x:.4g}" spells inf and nan (the digits come from d3-format)."""
    return (f"isNaN(datum.{field}) ? 'nan' : (!isFinite(datum.{field}) ? "
            f"(datum.{field} > 0 ? 'inf' : '-inf') : format(datum.{field}, '.4~g'))")


SOFTMAX_COLUMNS = {"z": "score z", "exp_z": "exp(z)", "naive_p": "naive P",
                   "log_naive_p": "log of naive P", "log_softmax": "log_softmax"}


def softmax_formulas() -> list[tuple[str, str | tuple[str, str]]]:
    """Chapter 3's table as (field, expression) steps; ("sum", f) and ("max", f) steps are sums
    and maxima over the five rows. Each result is rounded to the dtype, as torch stores it."""
    return [
        ("z", "shift + spread * datum.base"),
        ("exp_z", "exp(datum.z)"),
        ("exp_sum", ("sum", "exp_z")),
        ("naive_p", "datum.exp_z / datum.exp_sum"),
        ("log_naive_p", "log(datum.naive_p)"),
        # log_softmax never exponentiates a large number: z - max(z) - log sum exp(z - max(z))
        ("z_max", ("max", "z")),
        ("shifted_exp", "exp(datum.z - datum.z_max)"),
        ("shifted_sum", ("sum", "shifted_exp")),
        ("log_softmax", "datum.z - datum.z_max - log(datum.shifted_sum)"),
    ]


def naive_vs_log_softmax(base: Sequence[float]) -> LiveChart:
    """Shift and stretch five scores and watch the naive softmax break while log_softmax holds.

    Why: exp overflows in float32 above 88.72 and in float16 above 11.09, and underflows to 0 far
    below zero; the naive formula then divides inf by inf (nan) or takes log 0 (-inf).
    log_softmax subtracts the largest score first and never does. Every intermediate is rounded
    to the chosen dtype in the browser, so overflow happens where the hardware's would.
    """
    rows = [{"row": k, "base": float(b)} for k, b in enumerate(base)]
    params = [
        _slider("shift", "shift", 0, -300, 300, 1),
        _slider("spread", "spread", 1, 1, 60, 1),
        alt.param(name="dtype", value="float32",
                  bind=alt.binding_select(options=list(FLOAT_FORMATS), name="dtype ")),
    ]
    chart = _softmax_steps(alt.Chart(alt.Data(values=rows)))
    table = _softmax_table(chart)
    summary = _text_layer(
        chart.transform_filter("datum.row == 0").transform_calculate(
            text=f"'naive: ' + datum.naive_broken + ' of {len(rows)} log-probabilities are inf "
                 f"or nan; ' + 'log_softmax: ' + datum.stable_finite + ' of {len(rows)} finite'"),
        "text:N", "softmax_summary", align="left").encode(x=alt.value(0), y=alt.value(10)
                                                           ).properties(width=600, height=20)
    top = alt.vconcat(table, summary).add_params(*params)
    return _finish(top, f"A table of {len(rows)} scores, their exponentials, the naive softmax, "
                        "its log and log_softmax, recomputed as the shift, spread and dtype "
                        "controls change.")


def _softmax_steps(chart: alt.Chart) -> alt.Chart:
    """:func:`softmax_formulas` on the rows, each result rounded to the dtype, then each column
    as Python prints it and the counts of broken and finite log-probabilities."""
    for field, expr in softmax_formulas():
        if isinstance(expr, tuple):
            chart = chart.transform_joinaggregate(**{field: f"{expr[0]}({expr[1]})"})
        else:
            chart = chart.transform_calculate(**{field: expr})
        for name, step in round_to_dtype(field):
            chart = chart.transform_calculate(**{name: step})
    for field in SOFTMAX_COLUMNS:
        chart = chart.transform_calculate(**{f"{field}_text": _python_number(field)})
    return chart.transform_calculate(
        naive_bad="isFinite(datum.log_naive_p) ? 0 : 1",
        stable_ok="isFinite(datum.log_softmax) ? 1 : 0").transform_joinaggregate(
        naive_broken="sum(naive_bad)", stable_finite="sum(stable_ok)")


def _softmax_table(chart: alt.Chart) -> alt.Chart:
    """The table of :data:`SOFTMAX_COLUMNS`, one line per score, inf and nan in their colour."""
    cells = chart.transform_fold([f"{f}_text" for f in SOFTMAX_COLUMNS],
                                 as_=["field", "text"]).transform_calculate(
        column="{" + ", ".join(f"'{f}_text': '{h}'" for f, h in SOFTMAX_COLUMNS.items())
               + "}[datum.field]",
        broken="datum.text == 'inf' || datum.text == '-inf' || datum.text == 'nan'")
    headers = list(SOFTMAX_COLUMNS.values())
    return cells.mark_text(fontSize=12, align="right", dx=40).encode(
        x=alt.X("column:N", sort=headers, title=None,
                axis=alt.Axis(orient="top", labelAngle=0, ticks=False, domain=False,
                              labelFontWeight="bold", labelFontSize=12)),
        y=alt.Y("row:O", axis=None, sort="ascending"),
        text="text:N",
        color=alt.condition("datum.broken", alt.value(BROKEN_COLOR), alt.value(TEXT_COLOR)),
    ).properties(width=600, height=130, name="softmax_table")


# ---------------------------------------------------------------------------------------------
# Chapter 4: ten SGD steps on one blank, with and without the minus sign.

def sgd_step_formulas(n: int = 10) -> dict[str, str]:
    """Chapter 4's ten steps, unrolled (Vega has no loops). The model has two logits, theta for
    hill and 0 for the other word, so P(hill) = sigmoid(theta) and d(-log p)/d theta = -(1 - p):
    one step of SGD is theta <- theta + lr (1 - p), and theta - lr (1 - p) without the minus."""
    steps = {"theta_0": "log(p0 / (1 - p0))", "p_0": "p0"}
    for k in range(1, n + 1):
        steps[f"theta_{k}"] = (f"datum.theta_{k - 1} + (drop_minus ? -1 : 1) * lr * "
                               f"(1 - datum.p_{k - 1})")
        steps[f"p_{k}"] = f"1 / (1 + exp(-datum.theta_{k}))"
    return steps


def sgd_steps(n: int = 10, floor: float = 1e-7) -> LiveChart:
    """Ten SGD steps from P(hill) = p0 on the -log p curve, or on log p with the minus dropped.

    Why: with the minus sign the steps climb towards p = 1, long where the loss is steep and
    short near 0; without it, minimising log p drives p to 0 and the quantity being minimised
    towards minus infinity. A p below ``floor`` is drawn at the floor, as in the chapter.
    """
    params = [
        _slider("p0", "p0", 0.01, 0.01, 0.99, 0.01),
        _slider("lr", "learning rate lr", 1.0, 0.1, 5.0, 0.1),
        alt.param(name="drop_minus", value=False,
                  bind=alt.binding_checkbox(name="drop_minus (minimise log p) ")),
    ]
    run = alt.Chart(alt.Data(values=[{"start": 0}]))
    for field, expr in sgd_step_formulas(n).items():
        run = run.transform_calculate(**{field: expr})
    for k in range(n + 1):
        run = run.transform_calculate(**{f"p_{k}": f"max(datum.p_{k}, {floor!r})"})
    picture = _sgd_picture(run, n)
    title, listing = _sgd_text(run, n)
    chart = alt.vconcat(title, picture, listing).add_params(*params)
    return _finish(chart, f"Line chart of -log p and log p against p, with the {n} SGD steps "
                          "from p0 drawn on it, recomputed as the p0, learning rate and "
                          "drop_minus controls change.")


def _sgd_picture(run: alt.Chart, n: int) -> alt.LayerChart:
    """The curves -log p and log p against p on a log scale, with the steps' path drawn on the
    curve that is being minimised."""
    path = run.transform_fold([f"p_{k}" for k in range(n + 1)], as_=["step_name", "p"]
                              ).transform_calculate(
        step="toNumber(slice(datum.step_name, 2))",
        objective="drop_minus ? log(datum.p) : -log(datum.p)",
        curve_name=f"'{n} SGD steps'")
    curve = (alt.Chart(alt.SequenceGenerator(sequence=alt.SequenceParams(start=0, stop=400)))
             .transform_calculate(p="pow(10, -7 + 7 * datum.data / 399)")
             .transform_calculate(loss="-log(datum.p)", log_p="log(datum.p)")
             .transform_fold(["loss", "log_p"], as_=["curve", "y"])
             .transform_calculate(
                 curve_name="datum.curve == 'loss' ? '-log p (the loss)' : 'log p'"))
    x = alt.X("p:Q", scale=alt.Scale(type="log", domain=[1e-7, 1]),
              axis=alt.Axis(values=[10.0 ** -k for k in range(8)], format=".0e"),
              title="P(hill), the probability of the true word (log scale)")
    y_scale = alt.Scale(domain=[-17, 17], clamp=True)
    names = ["-log p (the loss)", "log p", f"{n} SGD steps"]
    color = alt.Color("curve_name:N", title=None, legend=alt.Legend(orient="top-right"),
                      scale=alt.Scale(domain=names, range=[MODEL_COLOR, REFERENCE_COLOR, TRUE_COLOR]))
    lines = curve.mark_line().encode(
        x=x, y=alt.Y("y:Q", scale=y_scale, title=None), color=color,
        strokeDash=alt.StrokeDash("curve_name:N", title=None,
                                  legend=alt.Legend(orient="top-right"),
                                  scale=alt.Scale(domain=names, range=[[1, 0], [5, 3], [1, 0]])))
    points = path.mark_line(point=True).encode(
        x=x, y=alt.Y("objective:Q", scale=y_scale), color=color, order="step:Q")
    zero = alt.Chart(alt.Data(values=[{"y": 0}])).mark_rule(
        color="black", strokeWidth=0.8).encode(y=alt.Y("y:Q", scale=y_scale))
    return alt.layer(lines, zero, points).properties(width=520, height=300)


def _sgd_text(run: alt.Chart, n: int) -> tuple[alt.Chart, alt.Chart]:
    """A title line (what is minimised, where p starts and ends) and the p after each step."""
    fmt = [f"format(datum.p_{k}, '.3~g')" for k in range(n + 1)]
    title = _text_layer(run.transform_calculate(
        text="'minimising ' + (drop_minus ? 'log p (minus dropped)' : '-log p') + ': p goes ' + "
             f"{fmt[0]} + ' -> ' + {fmt[n]}"), "text:N", "sgd_title", align="left",
        fontWeight="bold").encode(x=alt.value(0), y=alt.value(10)).properties(
        width=520, height=20)
    listing = _text_layer(run.transform_calculate(
        text="'p after each step: ' + " + " + ', ' + ".join(fmt)), "text:N", "sgd_listing",
        align="left").encode(x=alt.value(0), y=alt.value(10)).properties(width=520, height=20)
    return title, listing


# ---------------------------------------------------------------------------------------------
# Chapter 5: the masked-only sum, for any M of a few positions.

def subset_index(m: Sequence[int], positions: Sequence[int]) -> int:
    """The number of the set ``m`` among all subsets of ``positions``: bit k is 1 when the k-th
    of ``positions`` is in ``m`` (the chart computes the same number from its checkboxes)."""
    return sum(2 ** k for k, p in enumerate(positions) if p in set(m))


def masked_sum_formulas(positions: Sequence[int]) -> dict[str, str]:
    """Chapter 5's arithmetic as Vega expressions, in the order they are computed. Each row is
    one position that can be ticked: its ``bit`` (k), the array ``terms`` (its term in every M
    that holds it, by subset number; null where M does not hold it) and ``alone``."""
    return {
        # the subset's number, from the checkboxes: checkbox m<p> is bit k of it
        "m_index": " + ".join(f"(m{p} ? {2 ** k} : 0)" for k, p in enumerate(positions)),
        "in_m": "floor(datum.m_index / pow(2, datum.bit)) % 2 == 1",
        # -log P(x_i | x_\M) for i in M; a position outside M has no term, drawn as 0
        "term": "datum.in_m ? datum.terms[datum.m_index] : 0",
        "alone_in_m": "datum.in_m ? datum.alone : 0",
    }


def masked_sum_terms(tokens: Sequence[str], terms: dict[tuple[int, ...], Sequence[float]],
                     start: Sequence[int] = ()) -> LiveChart:
    """Tick positions into M and watch the terms of L and their sum.

    Why: L adds one term per position of M and nothing for the others, and every term depends on
    the whole of M (a hidden neighbour takes evidence away). The model cannot run in the browser,
    so ``terms`` maps every subset M of a few positions (as a sorted tuple; the empty one may be
    left out) to its terms -log P(x_i | x_\\M), in position order, computed by the chapter with
    :func:`mlm_lib.inference.sentence_loss`. The browser works out which subset the checkboxes
    make, looks its terms up and adds them; the grey marks are each position's term hidden alone
    (the subsets of one position). Only the positions that can be ticked have rows of data; the
    axis lists every token. The x axis is fixed, so bars can be compared across settings.
    """
    positions = _subset_positions(terms, start)
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    rows = _masked_sum_rows(terms, positions, labels)
    params = [alt.param(name=f"m{p}", value=p in start,
                        bind=alt.binding_checkbox(name=f"{labels[p]} ")) for p in positions]
    base = alt.Chart(alt.Data(values=rows))
    for field, expr in masked_sum_formulas(positions).items():
        base = base.transform_calculate(**{field: expr})
    top = max(float(v) for values in terms.values() for v in values)
    picture = _masked_sum_bars(base, labels, math.ceil(top) + 2)
    chart = alt.vconcat(_masked_sum_total(base), picture).add_params(*params)
    return _finish(chart, f"Bar chart of the loss term -log P(x_i | x_\\M) at each of the "
                          f"{len(tokens)} positions of the sentence, orange for the positions in "
                          "M and zero elsewhere, with grey marks at each term hidden alone and "
                          "the sum L, recomputed as the position checkboxes change.")


def _subset_positions(terms: dict[tuple[int, ...], Sequence[float]], start: Sequence[int]
                      ) -> list[int]:
    """The positions that can be ticked, once ``terms`` is checked to hold every non-empty
    subset of them with one term per position, and ``start`` to lie within them."""
    positions = sorted({p for m in terms for p in m})
    wanted = {tuple(p for k, p in enumerate(positions) if index >> k & 1)
              for index in range(1, 2 ** len(positions))}
    if set(terms) - {()} != wanted:
        raise ValueError(f"terms must hold every non-empty subset of the positions {positions}")
    if any(len(v) != len(m) for m, v in terms.items()):
        raise ValueError("each subset needs one term per position")
    if not set(start) <= set(positions):
        raise ValueError(f"the starting set {sorted(start)} is not within {positions}")
    return positions


def _masked_sum_rows(terms: dict[tuple[int, ...], Sequence[float]], positions: Sequence[int],
                     labels: Sequence[str]) -> list[dict[str, Any]]:
    """One row per position that can be ticked: its bit, its term in every M that holds it (by
    subset number, None elsewhere) and its term when hidden alone."""
    rows: list[dict[str, Any]] = []
    for k, p in enumerate(positions):
        by_index: list[float | None] = [None] * 2 ** len(positions)
        for m, values in terms.items():
            if p in m:
                by_index[subset_index(m, positions)] = float(values[list(m).index(p)])
        rows.append({"i": p, "label": labels[p], "bit": k, "terms": by_index,
                     "alone": float(terms[(p,)][0])})
    return rows


def _masked_sum_bars(base: alt.Chart, labels: Sequence[str], x_max: float) -> alt.LayerChart:
    """Each position's term in this M (a bar) and hidden alone (a grey mark), on a fixed x axis
    from 0 to ``x_max``, with every token on the y axis."""
    x_scale = alt.Scale(domain=[0, x_max])
    y = alt.Y("label:N", sort=labels, scale=alt.Scale(domain=labels), title=None)
    kinds = ["term in this M", "term if hidden alone"]
    color = alt.Color("kind:N", title=None, legend=alt.Legend(orient="top"),
                      scale=alt.Scale(domain=kinds, range=[TRUE_COLOR, REFERENCE_COLOR]))
    bars = base.transform_calculate(kind=f"'{kinds[0]}'").mark_bar().encode(
        x=alt.X("term:Q", scale=x_scale, title="-log P(x_i | x_\\M)"), y=y, color=color)
    in_m = base.transform_filter("datum.in_m")
    alone = in_m.transform_calculate(kind=f"'{kinds[1]}'").mark_tick(thickness=3).encode(
        x=alt.X("alone:Q", scale=x_scale), y=y, color=color)
    # each label sits right of its bar or of its grey mark, whichever reaches further
    bar_labels = _text_layer(in_m.transform_calculate(
        text="format(datum.term, '.3f')", label_x="max(datum.term, datum.alone)"),
        "text:N", "masked_sum_bar_labels", align="left", dx=5).encode(
        x=alt.X("label_x:Q", scale=x_scale), y=y)
    return alt.layer(bars, alone, bar_labels).properties(width=250, height=16 * len(labels))


def _masked_sum_total(base: alt.Chart) -> alt.Chart:
    """Two lines of text: L and |M|, and what the same positions add up to hidden one by one."""
    total = base.transform_joinaggregate(
        L="sum(term)", size="sum(in_m)", alone_sum="sum(alone_in_m)").transform_filter(
        "datum.bit == 0").transform_calculate(
        line1="datum.size ? 'L = ' + format(datum.L, '.3f') + ' over |M| = ' + datum.size "
              ": 'M is empty, so L = 0'",
        line2="datum.size ? 'the same positions, each hidden alone, add up to ' + "
              "format(datum.alone_sum, '.3f') : 'a sum with no terms: tick a box to add one'",
    ).transform_fold(["line1", "line2"], as_=["line", "text"])
    return _text_layer(total, "text:N", "masked_sum_total", align="left").encode(
        y=alt.Y("line:N", axis=None), x=alt.value(0)).properties(width=250, height=36)
