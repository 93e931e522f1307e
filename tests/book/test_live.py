"""The live charts' arithmetic against the chapters' own Python, without a browser.

Each chart of ``mlm_lib/book/live.py`` is compiled and run by the same Vega and Vega-Lite the site
serves (from ``node_modules``, under Node.js, no rendering), with its controls set to several
positions; every number its named text marks show must be what the chapter's function prints
(``live_reference.py``). Plain-Python checks cover the exact identity behind the temperature
chart, the float rounding behind the softmax table, and the outputs a chart cell stores.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest
import torch

from live_reference import (ROOT, expected_masked, expected_masked_sum, expected_p_hill,
                            expected_sgd, expected_softmax, expected_temperature, load, mismatches)
from mlm_lib.book import live

NODE = shutil.which("node")
# Compile the spec, set the signals of each run, run the dataflow, report every named text mark.
VEGA_RUNNER = r"""
const vega = require('vega'), vl = require('vega-lite');
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
(async () => {
  const results = [];
  for (const signals of input.runs) {
    const view = new vega.View(vega.parse(vl.compile(input.spec).spec), {renderer: 'none'});
    for (const [name, value] of Object.entries(signals)) view.signal(name, value);
    await view.runAsync();
    const texts = {};
    (function walk(scene) {
      if (scene.marktype === 'text' && scene.name) {
        texts[scene.name] = (texts[scene.name] || []).concat(scene.items.map(i => String(i.text)));
      }
      for (const item of scene.items || []) for (const child of item.items || []) walk(child);
    })(view.scenegraph().root);
    results.push(texts);
    view.finalize();
  }
  process.stdout.write(JSON.stringify(results));
})().catch(e => { console.error(e); process.exit(1); });
"""


def run_vega(spec: dict, runs: list[dict]) -> list[dict[str, list[str]]]:
    if NODE is None or not (ROOT / "node_modules" / "vega-lite").is_dir():
        pytest.fail("Node.js and the npm packages are needed to run the charts: run `make setup`")
    out = subprocess.run([NODE, "-e", VEGA_RUNNER], input=json.dumps({"spec": spec, "runs": runs}),
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def check_runs(chart, runs, expected):
    shown = run_vega(chart.spec, runs)
    problems = [f"{run}: {p}" for run, got in zip(runs, shown) for p in mismatches(got, expected(run))]
    assert not problems, "\n".join(problems)


def test_p_hill_chart_matches_with_p_hill():
    ns, chart = load("p_hill")
    runs = [{"log10_p_hill": x} for x in (-0.22, 0.0, -1.5, -3.0, -4.0)]
    check_runs(chart, runs, lambda run: expected_p_hill(ns, **run))


def test_masked_set_chart_shows_what_draw_m_drew():
    ns, chart = load("masked")
    runs = [{"rate": r, "seed": s} for r, s in ((0.3, 5), (0.05, 0), (0.15, 17), (0.6, 50), (1.0, 3))]
    check_runs(chart, runs, lambda run: expected_masked(ns, **run))


@pytest.fixture(scope="module")
def temperature():
    return load("temperature")


def test_temperature_chart_matches_with_temperature_at_every_stop(temperature):
    ns, chart = temperature
    runs = [{"T": T} for T in live.temperature_grid(0.1, 5.0, 0.1)]
    check_runs(chart, runs, lambda run: expected_temperature(ns, **run))


def test_rest_of_v_is_one_exact_number_per_temperature(temperature):
    """The identity the chart rests on: the shown words plus one log-sum-exp entry for the rest
    give the full softmax's probabilities."""
    ns, _ = temperature
    scores, order = ns["scores"][0].double(), ns["order"]
    for T in (0.1, 1.0, 3.7):
        full = torch.softmax(scores / T, dim=-1)
        lse = live.rest_log_sum_exp(scores.tolist(), order.tolist(), T)
        few = torch.softmax(torch.cat([scores[order] / T, torch.tensor([lse], dtype=torch.float64)]), 0)
        assert torch.allclose(few[:-1], full[order], rtol=1e-12, atol=1e-15)
        assert math.isclose(few[-1].item(), 1 - full[order].sum().item(), rel_tol=1e-9, abs_tol=1e-15)


SOFTMAX_RUNS = [{"shift": s, "spread": w, "dtype": d} for d in ("float32", "float16")
                for s, w in ((0, 1), (10, 1), (12, 1), (85, 1), (90, 1), (-100, 1), (-300, 1),
                             (300, 1), (0, 30), (0, 60), (-20, 7))]


def test_softmax_chart_matches_softmax_table():
    ns, _ = load("softmax")
    chart = live.naive_vs_log_softmax(ns["BASE"].tolist())
    check_runs(chart, SOFTMAX_RUNS, lambda run: expected_softmax(ns, **run))


def test_sgd_chart_matches_ten_steps():
    ns, _ = load("sgd")
    runs = [{"p0": p0, "lr": lr, "drop_minus": drop} for p0, lr, drop in
            ((0.01, 1.0, False), (0.5, 5.0, False), (0.99, 0.1, False), (0.01, 1.0, True),
             (0.3, 5.0, True), (0.9, 2.5, True))]
    check_runs(chart := live.sgd_steps(), runs, lambda run: expected_sgd(ns, **run))
    assert chart.spec["params"][0]["name"] == "p0"


# The chapter's start, the empty M, every position, the "predict first" step (add philosopher),
# the two pieces of scientist together and apart, and the city with its neighbours.
MASKED_SUM_SETS = [[4, 7, 8, 12], [], [2, 4, 5, 7, 8, 11, 12, 13], [4, 5, 7, 8, 12], [7, 8], [8],
                   [11, 12, 13], [2]]


def test_masked_sum_chart_adds_what_sentence_loss_gives():
    ns, chart = load("masked_sum")
    positions = list(ns["toggleable"])
    assert [p["name"] for p in chart.spec["params"]] == [f"m{p}" for p in positions]
    assert [p for p in positions if next(q for q in chart.spec["params"] if q["name"] == f"m{p}")["value"]
            ] == [4, 7, 8, 12], "the chart starts from the chapter's M"
    runs = [{f"m{p}": p in m for p in positions} for m in MASKED_SUM_SETS]
    check_runs(chart, runs, lambda run: expected_masked_sum(ns, [p for p in positions if run[f"m{p}"]]))


def test_masked_sum_chart_holds_one_row_per_position():
    """The data stay small: one row per position that can be ticked, holding its terms in every
    M by the subset's number; the axis still lists every token."""
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    terms = {(1,): [0.5], (3,): [2.0], (1, 3): [1.5, 2.5]}
    chart = live.masked_sum_terms(tokens, terms, start=(1,))
    (rows,) = [d["values"] for d in _datasets(chart.spec)]
    assert [r["i"] for r in rows] == [1, 3]
    assert rows[0]["terms"] == [None, 0.5, None, 1.5] and rows[1]["terms"] == [None, None, 2.0, 2.5]
    assert rows[0]["alone"] == 0.5 and rows[1]["alone"] == 2.0
    assert [f"{i}: {t}" for i, t in enumerate(tokens)] in [
        e.get("y", {}).get("scale", {}).get("domain") for e in _encodings(chart.spec)]
    assert live.subset_index([1, 3], [1, 3]) == 3
    with pytest.raises(ValueError, match="every non-empty subset"):
        live.masked_sum_terms(tokens, {(1,): [0.5], (3,): [2.0]})


def _datasets(spec):
    found = []
    if isinstance(spec, dict):
        if isinstance(spec.get("data"), dict) and "values" in spec["data"]:
            found.append(spec["data"])
        for v in spec.get("datasets", {}).values():
            found.append({"values": v})
        for k, v in spec.items():
            if k not in ("data", "datasets"):
                found += _datasets(v)
    elif isinstance(spec, list):
        for v in spec:
            found += _datasets(v)
    return found


def _encodings(spec):
    if isinstance(spec, dict):
        return ([spec["encoding"]] if "encoding" in spec else []) + [
            e for k, v in spec.items() if k != "encoding" for e in _encodings(v)]
    return [e for v in spec for e in _encodings(v)] if isinstance(spec, list) else []


def test_float_rounding_matches_torch():
    """The chart rounds every float64 result to the dtype as torch stores it: here, the
    rounding expressions run in Python on numbers at and around each format's limits."""
    values = [1.0, 65504.0, 65519.0, 65520.0, 3e-8, 6e-8, 1e-5, 1 / 3, 88.72, 1e38, 3.4028235e38,
              3.4028236e38, 1e-45, 7e-46, -2.5e-7, 2 ** -24 * 1.5]
    for dtype in ("float16", "float32"):
        for v in values:
            want = torch.tensor(v, dtype=torch.float64).to(getattr(torch, dtype)).item()
            got = _round_in_python(v, dtype)
            assert got == want or (math.isinf(got) and math.isinf(want) and got == want), (dtype, v, got, want)


def _round_in_python(v: float, dtype: str) -> float:
    """mlm_lib.book.live.round_to_dtype's expressions, translated to Python one for one."""
    f = live.FLOAT_FORMATS[dtype]
    if not math.isfinite(v) or v == 0:
        return v
    a = abs(v)
    e = math.floor(math.log(a) / math.log(2))
    e = e + 1 if a >= 2.0 ** (e + 1) else (e - 1 if a < 2.0 ** e else e)
    q = 2.0 ** (max(e, f["emin"]) - f["mantissa"])
    if a >= f["overflow"]:
        return math.copysign(math.inf, v)
    return math.copysign(math.floor(a / q + 0.5) * q, v)


def test_chart_cell_stores_vegalite_and_a_deterministic_html():
    chart = live.sgd_steps()
    again = live.sgd_steps()
    assert chart.html() == again.html(), "the html must not change from run to run (nbval, git)"
    html = chart.html()
    assert html.count("<script") == 1 and 'type="application/json"' in html
    assert "</" not in html.split(">", 2)[2].rsplit("</script>", 1)[0], "an unescaped </ in the JSON"
    assert chart.spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v5")
    assert all(p.get("bind", {}).get("name") for p in chart.spec["params"]), "every control labelled"


def test_every_control_is_labelled_in_every_chart():
    charts = [live.p_hill_loss(["a", "b"], [0.0, 1.0], "a"),
              live.masked_sets(["a", "b"], {(0.3, 5): [1]}),
              live.temperature_softmax(["a"], [1.0, 0.0, -1.0], [0], "a"),
              live.naive_vs_log_softmax([1.0, 0.0]), live.sgd_steps(),
              live.masked_sum_terms(["[CLS]", "a", "[SEP]"], {(1,): [0.5]})]
    for chart in charts:
        params = chart.spec["params"]
        assert params and all(p["bind"]["name"].strip() for p in params)
        assert chart.description and chart.spec["description"] == chart.description


CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
KERNEL_NOTE = "This control needs a running kernel"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_kernel_only_controls_sit_under_the_note(path):
    """A control that needs Python says so right above it, unless its cell also shows the model
    control that answers in the browser (mlm_lib.book.model_controls); none is a bare widgets.interact,
    whose unrun output reads "interactive(children=(FloatSlider(..." instead of a hint."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        assert "widgets.interact(" not in src, f"{path.name} cell {i}: use viz.kernel_controls"
        calls = src.replace("import kernel_controls", "").replace("import show_controls", "")
        # a cell that also shows a model control answers on the site, and says so itself
        if ("kernel_controls(" in calls or "show_controls(" in calls) and "model_control(" not in calls:
            above = "".join(cells[i - 1]["source"]) if i else ""
            assert cells[i - 1]["cell_type"] == "markdown" and KERNEL_NOTE in above, (
                f"{path.name} cell {i}: no note above the kernel-only control")


def test_kernel_controls_text_is_a_hint():
    from IPython.core.interactiveshell import InteractiveShell
    from mlm_lib.book.viz import RUN_HINT, kernel_controls, show_controls

    shell = InteractiveShell.instance()
    shown = []
    shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    import ipywidgets

    kernel_controls(lambda rate=0.3, text="a b": None, rate=(0.05, 1.0, 0.05),
                    text=ipywidgets.Text(value="a b"))
    show_controls(ipywidgets.VBox([ipywidgets.ToggleButton(description="0: [CLS]")]))
    assert len(shown) == 2 and all(s["text/plain"] == RUN_HINT for s in shown)
    assert all("application/vnd.jupyter.widget-view+json" in s for s in shown)
