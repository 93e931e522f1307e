"""What the live charts of chapters 0-5 must show, computed by the chapters' own Python.

The charts (``mlm_lib/book/live.py``) redo a chapter's formula in the browser. Both tests of them,
``test_live.py`` (the chart's arithmetic evaluated by Vega under Node.js) and ``test_site_live.py``
(the built site in a browser), compare what a chart shows against the numbers computed here, by
the functions the chapter itself defines (``with_p_hill``, ``with_temperature``,
``softmax_table``, ``ten_steps``, and chapter 5's ``sentence_loss`` on its sentence), taken from
the committed notebook and run on their own.
"""

from __future__ import annotations

import ast
import json
import math
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# The typographic minus d3-format writes; Python writes "-".
MINUS = "\u2212"


def _code_cells(chapter: str) -> list[str]:
    nb = json.loads((NOTEBOOKS / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def chapter_namespace(chapter: str, needles: list[str]) -> tuple[dict[str, Any], Any]:
    """Run the chapter's imports, then every statement except bare expressions (prints, plots)
    of the code cells containing one of ``needles``; return the namespace and the chart the
    chapter's ``live.`` call builds (None if it has none)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    cells = _code_cells(chapter)
    ns: dict[str, Any] = {"__name__": f"chapter_{chapter}"}
    for src in cells:
        for node in ast.parse(src).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                exec(compile(ast.Module([node], []), chapter, "exec"), ns)
    chart_call = None
    for needle in needles:
        hits = [src for src in cells if needle in src]
        assert len(hits) == 1, f"{chapter}: {len(hits)} code cells contain {needle!r}"
        for node in ast.parse(hits[0]).body:
            if isinstance(node, ast.Expr):
                if ast.unparse(node).startswith("live."):
                    chart_call = node.value
                continue
            exec(compile(ast.Module([node], []), chapter, "exec"), ns)
    chart = eval(compile(ast.Expression(chart_call), chapter, "eval"), ns) if chart_call else None
    return ns, chart


CHAPTERS = {
    "p_hill": ("00_how_to_read", ["V = [", "def with_p_hill("]),
    "masked": ("01_words_and_symbols", ["tok = book_model_tokenizer()",
                                        'text = "the river flows', "def draw_m("]),
    "temperature": ("02_vocabulary_softmax", ["model = book_model()", 'true_word = "defeat"',
                                              "def with_temperature(",
                                              "words = tok.convert_ids_to_tokens(order)",
                                              "live.temperature_softmax("]),
    "softmax": ("03_the_log", ["def softmax_table("]),
    "sgd": ("04_the_minus_sign", ["def ten_steps("]),
    "masked_sum": ("05_masked_only_sum", ["model = book_model()", 'text = "aristotle',
                                          "def terms_for_every_m(", "live.masked_sum_terms("]),
}


def load(widget: str) -> tuple[dict[str, Any], Any]:
    chapter, needles = CHAPTERS[widget]
    return chapter_namespace(chapter, needles)


# Each expected_* returns {mark name: [texts]} for the chart's named text marks, given the
# settings of its controls, as the chapter's Python prints them.

def expected_p_hill(ns: dict[str, Any], log10_p_hill: float) -> dict[str, list[str]]:
    p_hill = 10 ** log10_p_hill
    q, loss = ns["with_p_hill"](p_hill)
    _, half = ns["with_p_hill"](p_hill / 2)
    return {
        "p_hill_bar_labels_marks": [f"{v:.4f}" for v in q.tolist()],
        "p_hill_loss_labels_marks": [f"{loss:.3f}", f"{half:.3f}"],
        "p_hill_summary_marks": [
            f"P(hill) = {p_hill:.4f}   loss = {loss:.3f}",
            f"halve P(hill) to {p_hill / 2:.4f} and the loss becomes {half:.3f} (+{half - loss:.3f})"],
    }


def expected_masked(ns: dict[str, Any], rate: float, seed: int) -> dict[str, list[str]]:
    m, table = ns["draw_m"](ns["text"], rate, seed)
    cells = []
    for line in table.splitlines()[2:]:
        fields = line.split()
        cells += fields if len(fields) == 4 else [fields[0], fields[1], "", fields[2]]
    # a set has no order; the chart lists M in increasing order
    listed = "{" + ", ".join(str(i) for i in sorted(m)) + "}" if m else "{} (empty)"
    return {"masked_set_marks": ["M = " + listed],
            "masked_table_marks": cells}


def expected_temperature(ns: dict[str, Any], T: float) -> dict[str, list[str]]:
    p = ns["with_temperature"](T)
    order, true_id, true_word = ns["order"], ns["true_id"], ns["true_word"]
    rest = 1 - p[order].sum().item()
    return {
        "temperature_bar_labels_marks": [f"{v:.3f}" for v in p[order].tolist()] + [f"{rest:.3f}"],
        "temperature_title_marks": [
            f"T = {T:.2f}: P({true_word}) = {p[true_id].item():.3f}, rest of V = {rest:.3f}"],
    }


def expected_softmax(ns: dict[str, Any], shift: float, spread: float, dtype: str
                     ) -> dict[str, list[str]]:
    lines = ns["softmax_table"](shift, spread, dtype).splitlines()
    cells = [c for line in lines[2:7] for c in line.split()]
    return {"softmax_table_marks": cells, "softmax_summary_marks": [lines[7]]}


def expected_sgd(ns: dict[str, Any], p0: float, lr: float, drop_minus: bool,
                 floor: float = 1e-7) -> dict[str, list[str]]:
    path = [max(v, floor) for v in ns["ten_steps"](p0, lr, drop_minus)]
    what = "log p (minus dropped)" if drop_minus else "-log p"
    return {
        "sgd_title_marks": [f"minimising {what}: p goes {path[0]:.3g} -> {path[-1]:.3g}"],
        "sgd_listing_marks": ["p after each step: " + ", ".join(f"{v:.3g}" for v in path)],
    }


def expected_masked_sum(ns: dict[str, Any], chosen: list[int]) -> dict[str, list[str]]:
    """Asked of the model itself, not of the chart's table: sentence_loss for this M, and for
    each of its positions hidden alone."""
    if not chosen:
        return {"masked_sum_total_marks": ["M is empty, so L = 0",
                                           "a sum with no terms: tick a box to add one"],
                "masked_sum_bar_labels_marks": []}
    model, tok, text, sentence_loss = ns["model"], ns["tok"], ns["text"], ns["sentence_loss"]
    r = sentence_loss(model, tok, text, positions=chosen)
    alone = sum(sentence_loss(model, tok, text, positions=[i]).loss for i in sorted(chosen))
    return {"masked_sum_total_marks": [f"L = {r.loss:.3f} over |M| = {len(r.positions)}",
                                       f"the same positions, each hidden alone, add up to {alone:.3f}"],
            "masked_sum_bar_labels_marks": [f"{-lp:.3f}" for lp in r.log_probs]}


def _as_number(token: str) -> float | str:
    token = token.replace(MINUS, "-")
    try:
        value = float(token)
    except ValueError:
        return token
    return "nan" if math.isnan(value) else value


def same_shown(shown: str, expected: str) -> bool:
    """Equal as text, once every number in both is read as a number: the browser writes
    1.234e+4 and a typographic minus where Python writes 1.234e+04 and "-"."""
    a, b = shown.replace(",", " , ").split(), expected.replace(",", " , ").split()
    return len(a) == len(b) and all(_as_number(x) == _as_number(y) for x, y in zip(a, b))


def mismatches(shown: dict[str, list[str]], expected: dict[str, list[str]]) -> list[str]:
    problems = []
    for mark, want in expected.items():
        got = shown.get(mark)
        if got is None or len(got) != len(want) or not all(map(same_shown, got, want)):
            problems.append(f"{mark}: chart shows {got}, Python prints {want}")
    return problems
