"""The live formula charts on the built site, moved in a real browser (Debian's chromium).

Run after ``make book``, like ``test_site.py`` (it honours ``BOOK_BUILD_DIR`` too). On each page
with a live chart (``mlm_lib/book/live.py``), the test sets the chart's controls as a reader would
(``fill`` on a slider, ``select_option`` on a menu, ``check`` on a box), reads the numbers the
chart then shows (text in its SVG) and compares them with what the chapter's own Python function
prints for the same settings (``live_reference.py``). Every control must have a visible label.
Controls that still need a kernel must sit under the note that says so (a cell that also shows a
model control, which answers in the browser, needs none).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from browser import move_control
from live_reference import (expected_masked, expected_masked_sum, expected_p_hill, expected_sgd,
                            expected_softmax, expected_temperature, load, mismatches)

KERNEL_NOTE = "This control needs a running kernel"
# The charts' controls as the page has them, and put back: a chart test leaves the shared visit as
# it found it, for the page's other checks (each moves a control one step from where it stands).
CHART_CONTROLS = "document.querySelectorAll('.live-chart input, .live-chart select')"
SNAPSHOT = f"() => [...{CHART_CONTROLS}].map(e => e.type === 'checkbox' ? e.checked : e.value)"
RESTORE = f"""values => [...{CHART_CONTROLS}].forEach((e, i) => {{
  if ((e.type === 'checkbox' ? e.checked : e.value) === values[i]) return;
  if (e.type === 'checkbox') e.checked = values[i]; else e.value = values[i];
  e.dispatchEvent(new Event('input', {{bubbles: true}}));
  e.dispatchEvent(new Event('change', {{bubbles: true}}));
}})"""


@pytest.fixture
def open_chart(site_pages):
    """A chapter's shared visit (conftest.site_pages), once its live charts are drawn; at the end,
    its controls are put back and nothing went wrong during the visit."""
    visits, found = [], []

    def _open(chapter: str):
        visit = site_pages.visit(f"notebooks/{chapter}.html")
        page = visit.page
        page.wait_for_selector(".live-chart[data-drawn]")
        page.wait_for_function("() => [...document.querySelectorAll('.live-chart')]"
                               ".every(d => d.dataset.drawn !== 'pending')")
        state = page.get_attribute(".live-chart", "data-drawn")
        assert state == "yes", f"{chapter}: {state}, {visit.problems()}"
        visits.append(visit)
        found.append(page.evaluate(SNAPSHOT))
        return page

    yield _open
    for visit, values in zip(visits, found):
        visit.page.evaluate(RESTORE, values)
        assert visit.page.evaluate(SNAPSHOT) == values
        assert not visit.problems(), visit.problems()


def shown_texts(page, marks, top_down: bool = False) -> dict[str, list[str]]:
    """The texts of each named mark, in the order of its items, or from the top of the chart
    down (items that enter as a control changes are drawn after the others, wherever they sit)."""
    read = ("es => es.map(e => [e.getBoundingClientRect().top, e.textContent])"
            ".sort((a, b) => a[0] - b[0]).map(p => p[1])" if top_down
            else "es => es.map(e => e.textContent)")
    return {mark: page.eval_on_selector_all(f".live-chart g.{mark} text", read) for mark in marks}


def agree(page, expected: dict[str, list[str]], timeout_s: float = 10.0, top_down: bool = False
          ) -> None:
    """Wait for the chart to redraw, then compare every named mark with Python's text."""
    deadline = time.time() + timeout_s
    while True:
        problems = mismatches(shown_texts(page, expected, top_down), expected)
        if not problems or time.time() > deadline:
            break
        page.wait_for_timeout(100)
    assert not problems, "\n".join(problems)


def set_range(page, name: str, value: float) -> float:
    """Move a slider as a reader would; return where it landed (the value the chart uses)."""
    control = page.locator(f'.live-chart input[name="{name}"]')
    control.fill(str(value))
    return float(control.input_value())


def labels_of_controls(page) -> list[str]:
    return page.eval_on_selector_all(
        ".live-chart input, .live-chart select",
        "es => es.map(e => (e.closest('label') ? e.closest('label').innerText : '').trim())")


def sweep_sliders(page, expected: Callable[..., dict[str, list[str]]],
                  settings: list[dict[str, float]]) -> None:
    """Move the chart's sliders to each setting in turn (slider name -> value) and compare the
    chart with ``expected`` of the values they landed on; then every control must have a label."""
    for setting in settings:
        agree(page, expected(*(set_range(page, name, v) for name, v in setting.items())))
    assert all(labels_of_controls(page))


@pytest.mark.on_page("notebooks/00_how_to_read.html")
def test_p_hill_chart(open_chart):
    ns, _ = load("p_hill")
    page = open_chart("00_how_to_read")
    agree(page, expected_p_hill(ns, float(page.input_value('.live-chart input[name="log10_p_hill"]'))))
    sweep_sliders(page, lambda x: expected_p_hill(ns, x), [{"log10_p_hill": x} for x in (-1.5, -4)])


@pytest.mark.on_page("notebooks/01_words_and_symbols.html")
def test_masked_set_chart(open_chart):
    ns, _ = load("masked")
    page = open_chart("01_words_and_symbols")
    agree(page, expected_masked(ns, 0.3, 5))
    sweep_sliders(page, lambda rate, seed: expected_masked(ns, rate, int(seed)),
                  [{"rate": 0.15, "seed": 17}, {"rate": 0.8, "seed": 0}])


@pytest.mark.on_page("notebooks/02_vocabulary_softmax.html")
def test_temperature_chart(open_chart):
    ns, _ = load("temperature")
    page = open_chart("02_vocabulary_softmax")
    sweep_sliders(page, lambda T: expected_temperature(ns, T), [{"T": T} for T in (1.0, 0.1, 0.3, 4.7)])


@pytest.mark.on_page("notebooks/03_the_log.html")
def test_softmax_chart(open_chart):
    ns, _ = load("softmax")
    page = open_chart("03_the_log")
    for shift, spread, dtype in ((0, 1, "float32"), (12, 1, "float16"), (90, 1, "float32"),
                                 (-300, 1, "float32"), (0, 60, "float16")):
        page.select_option('.live-chart select[name="dtype"]', dtype)
        s = set_range(page, "shift", shift)
        w = set_range(page, "spread", spread)
        agree(page, expected_softmax(ns, s, w, dtype))
    assert all(labels_of_controls(page))


@pytest.mark.on_page("notebooks/04_the_minus_sign.html")
def test_sgd_chart(open_chart):
    ns, _ = load("sgd")
    page = open_chart("04_the_minus_sign")
    agree(page, expected_sgd(ns, 0.01, 1.0, False))
    box = page.locator('.live-chart input[name="drop_minus"]')
    for p0, lr, drop in ((0.3, 2.5, False), (0.3, 2.5, True), (0.9, 0.1, True)):
        box.check() if drop else box.uncheck()
        agree(page, expected_sgd(ns, set_range(page, "p0", p0), set_range(page, "lr", lr), drop))
    assert all(labels_of_controls(page))


@pytest.mark.on_page("notebooks/05_masked_only_sum.html")
def test_masked_sum_chart(open_chart):
    ns, _ = load("masked_sum")
    page = open_chart("05_masked_only_sum")
    agree(page, expected_masked_sum(ns, [4, 7, 8, 12]), top_down=True)
    chosen = {4, 7, 8, 12}
    # a reader's clicks: the "predict first" step, then emptying M, then two neighbours
    for clicks in ([5], [4, 5, 7, 8, 12], [12, 13]):
        for p in clicks:
            box = page.locator(f'.live-chart input[name="m{p}"]')
            box.click()
            chosen ^= {p}
            assert box.is_checked() == (p in chosen)
        agree(page, expected_masked_sum(ns, sorted(chosen)), top_down=True)
    labels = labels_of_controls(page)
    assert labels[:3] == ["2: was", "4: greek", "5: philosopher"] and all(labels), labels


CHAPTERS = ["00_how_to_read", "01_words_and_symbols", "02_vocabulary_softmax", "03_the_log",
            "04_the_minus_sign", "05_masked_only_sum", "06_corrupting_the_input", "07_inside_bert",
            "08_both_directions", "09_wordpiece", "10_pretraining", "11_next_sentence_prediction",
            "12_fine_tuning"]
# A reader's controls: every input, menu and token button a chapter's outputs show, except the
# self-tests (recall widgets, tested in test_site.py) and the site's copy-the-code buttons.
CONTROLS = ("() => [...document.querySelectorAll('.cell_output input, .cell_output select, "
            ".cell_output .bert-live-tokens button')].filter(e => !e.closest('.recall') && "
            "!e.disabled && e.offsetParent !== null)")
# What a control's cell shows: the charts' drawings and the model controls' answers.
SHOWN = ("e => { const out = e.closest('.cell_output'); return [...out.querySelectorAll('svg')]"
         ".map(g => g.outerHTML).join('') + [...out.querySelectorAll('.bert-live-result, "
         ".bert-live-status')].map(r => r.innerText).join('|'); }")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_control_of_the_page_changes_what_its_cell_shows(chapter, site_pages):
    """Walk every control of the chapter page: moved or typed into, it must redraw its cell. A
    control that needed a kernel would change nothing here: none may be left on the site."""
    visit = site_pages.visit(f"notebooks/{chapter}.html")
    page = visit.page
    for root in page.locator(".live-chart, .bert-live[data-kind]").all():
        root.scroll_into_view_if_needed()  # a model control loads and answers once in view
    page.wait_for_function("() => [...document.querySelectorAll('.bert-live[data-kind]')]"
                           ".every(r => r.hasAttribute('data-answered'))"
                           " && [...document.querySelectorAll('.live-chart')]"
                           ".every(c => c.dataset.drawn === 'yes')")
    n = page.evaluate(f"() => ({CONTROLS})().length")
    assert n, f"{chapter}: no control found"
    for k in range(n):
        control = page.evaluate_handle(f"() => ({CONTROLS})()[{k}]").as_element()
        assert control is not None, f"{chapter}: control {k} went away"
        name = control.evaluate("e => e.labels && e.labels.length ? e.labels[0].innerText : e.innerText")
        before = control.evaluate(SHOWN)
        move_control(control)
        try:
            page.wait_for_function(f"([e, b]) => ({SHOWN})(e) !== b", arg=[control, before], timeout=15_000)
        except Exception:
            pytest.fail(f"{chapter}: moving control {k} ({name!r}) changed nothing in its cell")
    assert not visit.problems(), visit.problems()
