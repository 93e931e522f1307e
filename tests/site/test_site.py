"""The built site in a real browser: Debian's chromium driven by Playwright, offline.

Run after ``make book`` (``make test-site`` does both). Every page of ``_build/html`` is opened
once, from the server on 127.0.0.1 (``conftest.py``: the same visit then serves the page's chart and
model-control checks in ``test_site_live.py`` and ``test_site_model.py``), and the checks of that
page run on it one by one, each its own test: formulas typeset (no raw TeX left), ipywidgets drawn, no broken internal
link, alt text on every image, axe-core's WCAG 2.1 A and AA rules, every recall widget opens from
the keyboard and on a click and shows its answer, every exercise solution stays folded until
clicked, no sideways overflow at a phone's width, formulas, model controls and printed output
that fit their boxes at desktop and phone widths, and, last, no console error and no failed or off-machine
request during the whole visit. (Screenshots of every page: ``screenshots.py``, ``make
screenshots``.) axe comes from npm (``node_modules/axe-core``), for this test only.

Then the reader's progress: answers committed on a page are remembered across pages and reloads,
counted on the progress page, filtered and shuffled in the gym, cleared on request, and printing
opens every answer. Each of those tests opens its own browser context, so no test sees another's
answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from PIL import Image

from mlm_lib.book.viz import SMALLEST_TEXT_KEY, SMALLEST_TEXT_PX

from browser import DESKTOP, SITE, WIDGET_VIEW, Visit, built_site, node_package, open_page

SKIP_PAGES = {"genindex.html", "search.html"}  # Sphinx's generated index and search pages
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
STORE_KEY = "fill-in-the-blank.recall.v1"  # the one localStorage key of recall-score.js
GYM = "book/gym.html"
PROGRESS = "book/progress.html"
PHONE = {"width": 390, "height": 844}


def _pages() -> list[str]:
    """Every page a reader can open; before a build, one name, whose tests fail saying so."""
    if not (SITE / "index.html").exists():
        return ["index.html"]
    pages = []
    for path in sorted(SITE.rglob("*.html")):
        rel = path.relative_to(SITE).as_posix()
        if rel.startswith(("_static/", "_sources/", "_images/")) or rel in SKIP_PAGES:
            continue
        if 'http-equiv="Refresh"' in path.read_text(encoding="utf-8", errors="replace")[:300]:
            continue  # a redirect (index.html -> the first page), tested as its target
        pages.append(rel)
    return pages


PAGES = _pages()


# --- One visit per page ---------------------------------------------------------------------------

@pytest.fixture(params=PAGES)
def visit(request, site_pages) -> Visit:
    """The page, opened once at desktop width for all of its checks here and in the other browser
    modules (conftest orders a page's tests together)."""
    return site_pages.visit(request.param)


def _set_theme(page: Page, theme: str) -> None:
    """Switch the theme and wait until its colour transitions have ended: on a slow machine a
    fixed wait caught the search button half-way, in colours neither theme has."""
    page.evaluate("t => { document.documentElement.dataset.mode = t; "
                  "document.documentElement.dataset.theme = t; }", theme)
    page.wait_for_timeout(200)
    page.wait_for_function("() => document.getAnimations().filter(a => a instanceof CSSTransition)"
                           ".every(a => a.playState !== 'running')")


# --- What a reader sees ------------------------------------------------------------------------------

RAW_TEX_JS = r"""
() => {
  const bad = [];
  const walker = document.createTreeWalker(document.querySelector('main') || document.body,
                                           NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode;
    if (n.parentElement.closest('pre, code, script, style, mjx-container, .highlight, textarea')) continue;
    const t = n.textContent;
    if (/\\\(|\\\[|\$\$|\\begin\{|\\frac|\\sum/.test(t)) bad.push(t.trim().slice(0, 80));
  }
  return bad;
}
"""

DRAWN_WIDGETS = ("() => document.querySelectorAll('.jupyter-widgets.widget-interact, "
                 ".jupyter-widgets .widget-slider, .jupyter-widgets.widget-slider, "
                 ".jupyter-widgets .widget-toggle-button, .jupyter-widgets .widget-dropdown, "
                 ".jupyter-widgets.widget-dropdown, .jupyter-widgets.widget-hprogress').length")


def test_formulas_are_typeset(visit):
    """MathJax ran where the page has formulas, and no raw TeX is left in the text (a recall
    widget is marked for MathJax whether or not its text holds a formula: the raw-TeX walk below
    is what catches one left untypeset)."""
    page, rel = visit.page, visit.rel
    if page.evaluate("() => document.querySelectorAll('.math').length"):
        assert page.evaluate("() => document.querySelectorAll('mjx-container').length") > 0, \
            f"{rel}: formulas present but none typeset"
    raw = page.evaluate(RAW_TEX_JS)
    assert not raw, f"{rel}: raw TeX left on the page: {raw[:5]}"


def test_ipywidgets_are_drawn(visit):
    """Every page with embedded widget views has them drawn by the local embed manager."""
    views = visit.page.locator(WIDGET_VIEW).count()
    if views:
        assert visit.page.evaluate(DRAWN_WIDGETS) >= 1, \
            f"{visit.rel}: {views} widget views embedded but none drawn"


def _broken(href: str) -> bool:
    """An internal link to a file, or an anchor in a page, that is not there."""
    target, anchor = urldefrag(href)
    path = SITE / unquote(urlparse(target).path).lstrip("/")
    if path.is_dir():
        path = path / "index.html"
    if not path.exists():
        return True
    if anchor and path.suffix == ".html":
        text = path.read_text(encoding="utf-8", errors="replace")
        return not re.search(r'id="%s"' % re.escape(unquote(anchor)), text)
    return False


def test_internal_links_resolve(visit):
    # SVG links too (a drawing's a.href is not a string): resolve the attribute against the page
    hrefs = visit.page.evaluate("() => Array.from(document.querySelectorAll('a[href]'),"
                                " a => new URL(a.getAttribute('href'), document.baseURI).href)")
    broken = [h for h in hrefs if urlparse(urldefrag(h)[0]).hostname == "127.0.0.1" and _broken(h)]
    assert not broken, f"{visit.rel}: broken internal links: {broken[:10]}"


def test_images_have_alt_text(visit):
    """Every figure in the content says what it shows, logos and icons included: an alt that is
    the image's file name (what the site writes for a figure whose cell gives none) says nothing."""
    no_alt = visit.page.evaluate(r"""() => Array.from(document.querySelectorAll('main img, article img'))
        .filter(i => { const alt = (i.getAttribute('alt') || '').trim();
                       return !alt || /_images\/|\.(png|svg|jpe?g)$/.test(alt); })
        .map(i => i.src.slice(0, 80))""")
    assert not no_alt, f"{visit.rel}: images without alt text (or with a file name as alt): {no_alt[:5]}"


# --- Accessibility: axe-core, every page in light, the dark theme where it can differ ----------------

# resultTypes: only violations are reported in full (axe's documented speed-up); every rule still runs.
AXE_JS = """runOnly => axe.run(document, {runOnly, resultTypes: ['violations']}).then(r =>
  r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ': ' +
                       (n.failureSummary || '').replace(/\\s+/g, ' ').trim())})))"""
# What decides a colour pair: the element, its classes (the theme's and the book's CSS select by
# them), the colour and text-size declarations of its inline style and, in SVG (the live charts),
# its fill and stroke. Inside a formula every glyph takes the formula's colour, so only the
# formula's own container counts.
STYLE_KEYS_JS = """() => Array.from(document.body.querySelectorAll('*'))
  .filter(e => !(e.parentElement && e.parentElement.closest('mjx-container'))).map(e => [e.tagName,
  ...(e.getAttribute('class') || '').split(/\\s+/).filter(Boolean).map(c => '.' + c),
  ...(e.getAttribute('style') || '').split(';').map(d => d.trim())
    .filter(d => /color|background|fill|stroke|opacity|filter|font/.test(d)).map(d => 'style=' + d),
  'fill=' + (e.getAttribute('fill') || ''), 'stroke=' + (e.getAttribute('stroke') || '')]).flat()"""
# The dark theme is the light page with other colours: the same markup, restyled by the theme's and
# recall.css's dark rules, which select by element and class, and by the inline colours of some
# outputs. A page whose elements, classes and inline colours have all been audited in dark on the
# pages before it can only repeat their colour pairs, so the dark audit runs where a page brings
# something not yet seen (in the order of PAGES: the first page, then those with other components:
# a table of contents, the gym's toolbar, code, ipywidgets, each live chart...). The light audit,
# which also checks structure (names, labels, headings, landmarks), runs on every page; the dark
# audit runs only the rules a colour decides (the markup is the light page's).
_seen_in_dark: set[str] = set()
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


def _readable(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  {v['id']} ({v['impact']}): {v['help']}")
        lines.extend(f"      {node[:300]}" for node in v["nodes"][:8])
        if len(v["nodes"]) > 8:
            lines.append(f"      ... and {len(v['nodes']) - 8} more")
    return "\n".join(lines)


def test_accessibility(visit):
    """axe-core finds no WCAG 2.1 A or AA violation in the light theme and, where the page shows
    markup not yet audited in dark, no colour violation in the dark theme."""
    page = visit.page
    # audit the page at rest: a pointer left over a control by an earlier check shows its hover style
    page.mouse.move(0, 0)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.add_script_tag(path=str(node_package("axe-core") / "axe.min.js"))
    themes = ["light"]
    keys = set(page.evaluate(STYLE_KEYS_JS))
    if keys - _seen_in_dark:
        themes.append("dark")
        _seen_in_dark.update(keys)
    found = {}
    for theme in themes:
        _set_theme(page, theme)
        run_only = ({"type": "tag", "values": AXE_TAGS} if theme == "light"
                    else {"type": "rule", "values": COLOUR_RULES})
        violations = page.evaluate(AXE_JS, run_only)
        if violations:
            found[theme] = violations
    _set_theme(page, "light")
    assert not found, f"{visit.rel}: accessibility violations (axe-core, {', '.join(AXE_TAGS)}):\n" + \
        "\n".join(f" {theme} theme:\n{_readable(v)}" for theme, v in found.items())


# --- What a reader does --------------------------------------------------------------------------------

def _score_says(page: Page, n: int) -> str:
    """The score counter's text once it counts n of n answered (a details' toggle event fires
    after the click returns), or what it says after 5 s."""
    try:
        page.wait_for_function("n => (document.querySelector('.recall-score') || {}).textContent"
                               "?.includes(n + ' of ' + n + ' answered')", arg=n, timeout=5000)
    except PlaywrightTimeout:
        pass
    return page.locator(".recall-score").inner_text()


def test_recall_widgets_open(visit):
    """Each recall widget opens from its keyboard-focusable summary (Tab and Enter) and on a
    click, shows its answer only then, and the score counter sees every widget answered."""
    page, rel = visit.page, visit.rel
    widgets = page.locator(".recall")
    n = widgets.count()
    if not n:
        return
    first = page.locator(".recall details").first
    first.locator("summary").focus()
    page.keyboard.press("Enter")
    assert first.evaluate("d => d.open"), f"{rel}: a recall widget does not open from the keyboard"
    page.keyboard.press("Enter")  # and closes again, for the clicks below
    assert not first.evaluate("d => d.open"), f"{rel}: Enter does not close a recall widget"
    for k in range(n):
        details = widgets.nth(k).locator("details")
        assert details.count() >= 1, f"{rel}: recall widget {k} has nothing to open"
        for d in range(details.count()):
            answer = details.nth(d).locator(".recall-answer")
            assert not answer.is_visible(), f"{rel}: recall widget {k} shows its answer before a click"
            details.nth(d).locator("summary").click()
            assert answer.is_visible(), f"{rel}: recall widget {k} did not open on click"
            assert answer.inner_text().strip(), f"{rel}: recall widget {k} has an empty answer"
    score = _score_says(page, n)
    assert f"{n} of {n} answered" in score, f"{rel}: score says {score!r}"


def test_solutions_stay_folded(visit):
    """A chapter's worked solutions (two or more) stay folded until the reader opens them."""
    page, rel = visit.page, visit.rel
    solutions = page.locator("details:has(> summary:text-is('Solution'))")
    if rel.startswith("notebooks/"):
        assert solutions.count() >= 2, f"{rel}: {solutions.count()} exercise solutions, expected 2 or more"
    for k in range(solutions.count()):
        sol = solutions.nth(k)
        assert not sol.evaluate("d => d.open"), f"{rel}: solution {k} is open before a click"
        sol.locator("summary").click()
        assert sol.evaluate("d => d.open && d.innerText.trim().length > 'Solution'.length + 40"), \
            f"{rel}: solution {k} did not open on click, or is empty"


def test_fits_a_phone(visit):
    """Narrowed to a phone's width, nothing overflows the screen sideways. The page is resized, not
    reloaded: the theme's layout is CSS media queries, which apply at once, and the charts and
    widgets lay out again on the resize event."""
    page = visit.page
    try:
        page.set_viewport_size(PHONE)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.wait_for_timeout(200)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    finally:
        page.set_viewport_size(DESKTOP)
    assert overflow <= 1, f"{visit.rel}: the page is {overflow}px wider than a phone screen"


# Every figure as shown: its drawn width (a PNG's pixels, an SVG's viewBox), the width it is shown
# at, an SVG's smallest text on screen (font size times the drawing's scale), and whether its
# "Enlarge figure" button (figure-zoom.js) is offered. A PNG's text size is the one its plotting
# helper recorded in the file (mlm_lib.book.viz.column_png), times the shown share of its width.
FIGURES_SELECTOR = re.search(r'var FIGURES = "([^"]+)"',
                             (Path(__file__).resolve().parents[2] / "book/static/figure-zoom.js")
                             .read_text(encoding="utf-8")).group(1)  # the figures figure-zoom.js offers
FIGURES_JS = r"""
(selector) => Array.from(document.querySelectorAll(selector))
  .filter(f => f.getBoundingClientRect().width > 0)
  .map(f => {
    const svg = f.tagName.toLowerCase() === 'svg';
    const button = f.nextElementSibling && f.nextElementSibling.classList.contains('figure-zoom-open')
      ? f.nextElementSibling : null;
    const texts = svg ? Array.from(f.querySelectorAll('text')).map(t =>
      parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a) : [];
    return {name: (f.getAttribute('alt') || f.getAttribute('aria-label') || '').slice(0, 50),
            src: svg ? null : f.getAttribute('src'),
            drawn: svg ? f.viewBox.baseVal.width : f.naturalWidth,
            shown: f.getBoundingClientRect().width,
            smallest: texts.length ? Math.min(...texts) : null,
            enlarge: !!button && !button.hidden};
  })
"""
SMALLEST_ON_A_PHONE_PX = 9.0  # below this a phone's reader needs the figure at full size


def _png_text_px(visit_url: str, src: str) -> float | None:
    """The smallest text of a PNG at its drawn size, as its plotting helper recorded it."""
    path = built_site() / unquote(urlparse(urljoin(visit_url, src)).path).lstrip("/")
    with Image.open(path) as image:
        value = image.info.get(SMALLEST_TEXT_KEY)
    return float(value) if value is not None else None


def _figure_text(page: Page, url: str) -> list[dict]:
    """FIGURES_JS, with each PNG's smallest text on screen filled in."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    found = page.evaluate(FIGURES_JS, FIGURES_SELECTOR)
    for f in found:
        if f["src"] is not None:
            drawn_px = _png_text_px(url, f["src"])
            f["smallest"] = None if drawn_px is None else drawn_px * f["shown"] / f["drawn"]
    return found


def _figure_problems(desktop: list[dict], phone: list[dict]) -> list[str]:
    problems = []
    for f in desktop:
        if f["smallest"] is None:
            problems.append(f"desktop: {f['name']!r}: no record of its text size (draw it with column_figure)")
        elif f["smallest"] < SMALLEST_TEXT_PX:
            problems.append(f"desktop: {f['name']!r}: text {f['smallest']:.1f} px (drawn {f['drawn']:.0f} px "
                            f"wide, shown at {f['shown']:.0f})")
    for f in phone:
        if f["smallest"] is not None and f["smallest"] < SMALLEST_ON_A_PHONE_PX and not f["enlarge"]:
            problems.append(f"phone: {f['name']!r}: text {f['smallest']:.1f} px and no 'Enlarge figure'")
    return problems


def test_figures_are_readable_as_shown(visit):
    """Every figure's smallest text on screen: at least SMALLEST_TEXT_PX at desktop width, and on a
    phone at least SMALLEST_ON_A_PHONE_PX or offered full size (and then it opens full size)."""
    page = visit.page
    desktop = _figure_text(page, visit.url)
    try:
        page.set_viewport_size(PHONE)
        phone = _figure_text(page, visit.url)
        opened = None
        button = page.locator(".figure-zoom-open:not([hidden])").first
        offered = button.count()
        if offered:
            button.click()
            opened = page.evaluate("() => { const d = document.querySelector('dialog.figure-zoom');"
                                   " const f = d && d.open && d.querySelector('.figure-zoom-scroll > *');"
                                   " return f ? f.getBoundingClientRect().width : null; }")
            page.keyboard.press("Escape")
            assert page.evaluate("() => !document.querySelector('dialog.figure-zoom').open"), \
                f"{visit.rel}: Escape did not close the enlarged figure"
    finally:
        page.set_viewport_size(DESKTOP)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    problems = _figure_problems(desktop, phone)
    if not offered and any(f["enlarge"] for f in phone):
        problems.append("phone: a figure offers 'Enlarge figure' but no button is visible")
    if opened is not None:
        first = next(f for f in phone if f["enlarge"])
        if abs(opened - first["drawn"]) > 1:
            problems.append(f"phone: {first['name']!r} opened {opened:.0f} px wide, drawn {first['drawn']:.0f}")
    assert not problems, f"{visit.rel}: figures as shown:\n  " + "\n  ".join(problems)


def test_the_figure_check_sees_planted_cases():
    desktop = [{"name": "small", "src": None, "drawn": 1000, "shown": 688, "smallest": 7.9, "enlarge": False},
               {"name": "unrecorded", "src": "x.png", "drawn": 688, "shown": 688, "smallest": None,
                "enlarge": False}]
    phone = [{"name": "tiny", "src": None, "drawn": 688, "shown": 356, "smallest": 6.0, "enlarge": False},
             {"name": "offered", "src": None, "drawn": 688, "shown": 356, "smallest": 6.0, "enlarge": True}]
    problems = _figure_problems(desktop, phone)
    assert len(problems) == 3 and not any("offered" in p for p in problems), problems


# How tall a page may be at desktop width: 20 screens of 800 px. Every chapter page is within it
# (the tallest, chapter 6, 15,688 px as last measured). A page that must be taller for a while is
# listed with the height it may not exceed (its height, 3% more for layout differences between
# machines, rounded up to 500 px); the list only shrinks, and a page back within the limit leaves it.
PAGE_HEIGHT_LIMIT_PX = 16_000
TALLER_TODAY_PX: dict[str, int] = {}


def _height_problems(rel: str, height: float) -> list[str]:
    cap = TALLER_TODAY_PX.get(rel)
    if cap is None and height > PAGE_HEIGHT_LIMIT_PX:
        return [f"{height:,.0f} px tall, over the {PAGE_HEIGHT_LIMIT_PX:,} px limit"]
    if cap is not None and height > cap:
        return [f"{height:,.0f} px tall, taller than the {cap:,} px it may not exceed"]
    if cap is not None and height <= PAGE_HEIGHT_LIMIT_PX:
        return [f"{height:,.0f} px tall, within the limit: remove it from TALLER_TODAY_PX"]
    return []


def test_pages_a_reader_can_finish(visit):
    """At desktop width, as it opens (every answer and solution folded), a page is at most
    PAGE_HEIGHT_LIMIT_PX tall (or no taller than it was, for the chapters of TALLER_TODAY_PX)."""
    problems = _height_problems(visit.rel, visit.height)
    assert not problems, f"{visit.rel}: {problems[0]}"


# What a chapter page shows at open, in words (browser.SHOWN_WORDS: prose, code and printed output
# as rendered; folded parts not counted). The book's pages showed 68,525 words before their code was
# folded and chapter 7 became two pages, 54,546 after (-20%); the longest, chapter 12, 4,314.
PAGE_WORDS_LIMIT = 4_500


def _words_problem(rel: str, words: int) -> str | None:
    if rel.startswith("notebooks/") and words > PAGE_WORDS_LIMIT:
        return f"shows {words:,} words at open, over the {PAGE_WORDS_LIMIT:,} a chapter page may show"
    return None


def test_pages_show_what_a_reader_can_read(visit):
    """A chapter page shows at most PAGE_WORDS_LIMIT words as it opens: what it does not discuss
    is folded (tests/content/test_page_code.py) or lives on another page."""
    problem = _words_problem(visit.rel, visit.words)
    assert problem is None, f"{visit.rel}: {problem}"
    assert visit.words > 0, f"{visit.rel}: no words counted"


def test_the_words_check_sees_planted_cases():
    assert _words_problem("notebooks/99_planted.html", PAGE_WORDS_LIMIT + 1)
    assert not _words_problem("notebooks/99_planted.html", PAGE_WORDS_LIMIT)
    assert not _words_problem("book/gym.html", 10 * PAGE_WORDS_LIMIT)  # the practice pages are lists


def test_the_height_check_sees_planted_cases():
    TALLER_TODAY_PX["planted.html"] = 20_000
    try:
        assert _height_problems("other.html", 17_000) and not _height_problems("other.html", 15_000)
        assert _height_problems("planted.html", 21_000) and not _height_problems("planted.html", 19_000)
        assert "remove it" in _height_problems("planted.html", 15_000)[0]
    finally:
        del TALLER_TODAY_PX["planted.html"]


# What is wider than the box that shows it (fit-column.js and bert-live.css make everything fit):
# display formulas wider than their box, the book's model controls (bert-live.js) wider than their
# panel, and the boxes of printed output that scroll sideways. Only what a reader sees counts (the
# check opens every folded part first: a solution, a hidden cell).
TOO_WIDE_JS = r"""
() => {
  const name = e => (e.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  const seen = e => e.clientWidth > 0 && e.checkVisibility();
  const formulas = Array.from(document.querySelectorAll('mjx-container[display="true"]'))
    .filter(c => seen(c) && c.querySelector('mjx-math'))
    .filter(c => c.querySelector('mjx-math').getBoundingClientRect().width > c.clientWidth + 1)
    .map(c => `${Math.round(c.querySelector('mjx-math').getBoundingClientRect().width)}px in ` +
              `${c.clientWidth}px: ${name(c.querySelector('mjx-assistive-mml') || c)}`);
  const controls = [];
  for (const panel of document.querySelectorAll('.bert-live[data-kind]')) {
    if (!seen(panel)) continue;
    const box = panel.getBoundingClientRect();
    if (panel.scrollWidth > panel.clientWidth + 1)
      controls.push(`${panel.dataset.kind}: ${panel.scrollWidth}px in a ${panel.clientWidth}px panel`);
    for (const c of panel.querySelectorAll('input, select, button, label, textarea')) {
      const r = c.getBoundingClientRect();
      if (r.width && (r.right > box.right + 1 || r.left < box.left - 1))
        controls.push(`${panel.dataset.kind}: ${c.tagName.toLowerCase()} ${name(c) || c.type} ` +
                      `reaches ${Math.round(r.right - box.left)}px of a ${Math.round(box.width)}px panel`);
    }
  }
  const scrolling = Array.from(document.querySelectorAll('.cell_output *'))
    .filter(e => e instanceof HTMLElement && !e.matches('input, select, textarea') && seen(e)
                 && getComputedStyle(e).overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.scrollWidth}px in ${e.clientWidth}px: ${name(e)}`);
  return {formulas, controls, scrolling};
}
"""
# At most this many boxes of printed output per page scroll sideways at desktop width: a table
# wider than the column even at the smallest readable size keeps its columns aligned and scrolls.
MOST_SCROLLING_AT_DESKTOP = 1


def _too_wide(page: Page) -> dict[str, list[str]]:
    """What does not fit, once the page has laid out again at its present width with its fonts
    loaded (fit-column.js measures again when they arrive)."""
    page.evaluate("() => document.fonts.ready.then(() => "
                  "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))))")
    page.wait_for_timeout(300)
    return page.evaluate(TOO_WIDE_JS)


def test_everything_fits_its_box(visit):
    """At desktop width and at a phone's: every display formula fits its box, every model control
    its panel, and at desktop width at most MOST_SCROLLING_AT_DESKTOP output box scrolls sideways."""
    page, rel = visit.page, visit.rel
    page.evaluate("() => document.querySelectorAll('details:not([open])').forEach(d => {"
                  " d.dataset.openedToMeasure = ''; d.open = true; })")
    try:
        desktop = _too_wide(page)
        page.set_viewport_size(PHONE)
        phone = _too_wide(page)
    finally:
        page.evaluate("() => document.querySelectorAll('details[data-opened-to-measure]').forEach(d => {"
                      " delete d.dataset.openedToMeasure; d.open = false; })")
        page.set_viewport_size(DESKTOP)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.wait_for_timeout(300)
    problems = []
    for width, found in (("desktop", desktop), ("phone", phone)):
        problems += [f"{width}: formula {f}" for f in found["formulas"]]
        problems += [f"{width}: control {c}" for c in found["controls"]]
    if len(desktop["scrolling"]) > MOST_SCROLLING_AT_DESKTOP:
        problems += [f"desktop: output box scrolls, {b}" for b in desktop["scrolling"]]
    assert not problems, f"{rel}: wider than its box:\n  " + "\n  ".join(problems)


def test_the_width_check_sees_planted_cases(browser):
    """The check above, on a page made to fail: a formula wider than its box, a control wider than
    its panel, two output boxes that scroll sideways."""
    page = browser.new_page(viewport=DESKTOP)
    try:
        page.set_content(
            "<div style='width: 200px'>"
            "<mjx-container display='true' style='display: block; overflow: auto'>"
            "<mjx-math style='display: inline-block; width: 400px'>x</mjx-math></mjx-container>"
            "<div class='bert-live' data-kind='planted' style='overflow: hidden'>"
            "<select><option>a choice far longer than the panel it sits in, by design</option></select></div>"
            "<div class='cell_output'>" + ("<pre style='overflow: auto'>" + "wide " * 100 + "</pre>") * 2
            + "</div></div>")
        found = _too_wide(page)
        assert len(found["formulas"]) == 1, found
        assert found["controls"] and all(c.startswith("planted") for c in found["controls"]), found
        assert len(found["scrolling"]) == 2, found
    finally:
        page.close()


# Scroll the page a screen at a time, top to bottom, and at each screen take the elements of the
# article that stay on screen (fixed or sticky) and, at points of each, whatever content lies under
# it: a heading, text, code, a figure, a table, an output. Which elements float is read once per
# width (a style walk over the whole article costs more than the rest of the scan). Hit testing
# lays the page out at its new scroll position, so no frame is awaited (no script of the site
# moves anything on scrolling).
COVERED_JS = r"""
() => {
  const article = document.querySelector('.bd-article') || document.querySelector('main');
  const floating = Array.from(article.querySelectorAll('*')).filter(e =>
    ['fixed', 'sticky'].includes(getComputedStyle(e).position));
  const content = 'p, li, pre, code, img, svg, table, figure, h1, h2, h3, h4, .cell_output, mjx-container';
  const found = [];
  const height = document.documentElement.scrollHeight;
  for (let y = 0; y < height; y += innerHeight) {
    window.scrollTo({top: y, behavior: 'instant'});
    for (const e of floating) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 || r.height === 0 || r.bottom < 0 || r.top > innerHeight) continue;
      for (const [x, yy] of [[r.left + 2, r.top + 2], [r.right - 2, r.top + 2], [r.left + 2, r.bottom - 2],
                             [r.right - 2, r.bottom - 2], [(r.left + r.right) / 2, (r.top + r.bottom) / 2]]) {
        const under = document.elementsFromPoint(x, yy).find(u => !e.contains(u) && !u.contains(e)
                                                             && u.closest(content));
        if (under) {
          found.push(`at ${y}px: ${e.className || e.tagName} over ${under.closest(content).tagName}`);
          break;
        }
      }
    }
  }
  window.scrollTo({top: 0, behavior: 'instant'});
  return found;
}
"""


def _covered_while_scrolling(page: Page) -> list[str]:
    """What covers content anywhere on the page as it scrolls (COVERED_JS)."""
    return page.evaluate(COVERED_JS)


def test_nothing_of_the_book_covers_the_content(visit):
    """No element of the article stays on screen over the text, figures or code as the reader
    scrolls, at desktop width and at a phone's."""
    page = visit.page
    try:
        covered = _covered_while_scrolling(page)
        page.set_viewport_size(PHONE)
        page.wait_for_timeout(200)
        covered += [f"phone {c}" for c in _covered_while_scrolling(page)]
    finally:
        page.set_viewport_size(DESKTOP)
        # the page lays out again at desktop width before the next check of this visit
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.wait_for_timeout(300)
    assert not covered, f"{visit.rel}: content covered while scrolling: {covered[:5]}"


def test_the_covering_check_sees_a_planted_sticky_box(browser):
    """The check above, on a page made to fail: a sticky box over a paragraph."""
    page = browser.new_page(viewport=DESKTOP)
    try:
        page.set_content("<main><article class='bd-article'>"
                         "<div style='position: sticky; top: 0; height: 3em; background: #fff'>score</div>"
                         + "<p>text of the chapter</p>" * 200 + "</article></main>")
        assert _covered_while_scrolling(page)
    finally:
        page.close()


def test_no_console_error_or_failed_request(visit):
    """Over the visit so far (loading, the checks above, every click): nothing left the machine
    (the site must work offline), no request failed, nothing was logged as an error. The model
    controls' and charts' checks of the page, which run after these, check the same at their end."""
    assert not visit.problems(), f"{visit.rel}: {visit.problems()[:5]}"


# --- Progress: answers remembered, counted, filtered, shuffled, cleared, printed ----------------

def _items() -> list[dict]:
    """The build's list of every recall widget (book/_ext/progress_items.py)."""
    text = (built_site() / "_static" / "progress-items.js").read_text(encoding="utf-8")
    return json.loads(text.split("=", 1)[1].strip().rstrip(";"))


def _stored(page: Page) -> dict:
    return page.evaluate("k => JSON.parse(localStorage.getItem(k) || '{}')", STORE_KEY)


def _visible_ids(page: Page) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('.recall'))
        .filter(w => w.offsetParent !== null)
        .map(w => w.dataset.item || w.dataset.recallKey)""")


def _choice(page: Page, item: str, correct: bool):
    widget = page.locator(f'.recall[data-item="{item}"]').first
    return widget.locator(f'details.recall-choice[data-correct="{str(correct).lower()}"]').first


def _commit(page: Page, item: str, correct: bool) -> None:
    """Open the right or a wrong choice of a widget, and wait until it is remembered."""
    _choice(page, item, correct).locator("summary").click()
    page.wait_for_function("([k, id]) => id in JSON.parse(localStorage.getItem(k) || '{}')",
                           arg=[STORE_KEY, item], timeout=5000)


@pytest.fixture
def context(browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport=DESKTOP)
    yield ctx
    ctx.close()


def _chapter_with_choices(items: list[dict]) -> tuple[str, list[dict]]:
    """A chapter page with at least one named true-or-false (or multiple-choice) widget and one
    other widget."""
    for url in dict.fromkeys(it["url"] for it in items):
        here = [it for it in items if it["url"] == url]
        if (url.startswith("notebooks/") and any(not it["choices"] for it in here)
                and any(it["choices"] and "#" not in it["id"] for it in here)):
            return url, here
    pytest.fail("no chapter has a named true-or-false widget and another widget")


def _named_choice(here: list[dict]) -> dict:
    return next(it for it in here if it["choices"] and "#" not in it["id"])


def _progress_rows(page: Page) -> dict[str, list[str]]:
    """The progress table by page: answered, total, right, committed."""
    rows = page.evaluate("""() => Array.from(document.querySelectorAll('.progress-table tbody tr'),
        tr => [tr.dataset.url, tr.cells[1].dataset.answered, tr.cells[1].dataset.total,
               tr.cells[2].dataset.right, tr.cells[2].dataset.committed])""")
    return {r[0]: r[1:] for r in rows}


def test_answers_are_remembered_and_counted(server, context):
    items = _items()
    url, here = _chapter_with_choices(items)
    choice = _named_choice(here)
    other = next(it for it in here if not it["choices"])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_page(page, urljoin(server, url))
    n = page.locator(".recall").count()
    n_choice = page.locator(".recall:has(.recall-choice)").count()
    assert n == len(here), f"{url}: {n} widgets on the page, {len(here)} in progress-items.js"

    _commit(page, choice["id"], correct=False)
    _choice(page, choice["id"], True).locator("summary").click()  # a second look changes nothing
    other_widget = page.locator(".recall").nth([it["id"] for it in here].index(other["id"]))
    other_widget.locator("summary").first.click()
    page.wait_for_function("k => Object.keys(JSON.parse(localStorage.getItem(k) || '{}')).length == 2",
                           arg=STORE_KEY, timeout=5000)
    stored = _stored(page)
    assert set(stored) == {choice["id"], other["id"]}, stored  # ids as the build names them
    assert stored[choice["id"]]["right"] is False
    assert stored[choice["id"]]["choice"] == _choice(page, choice["id"], False).get_attribute("data-choice")
    assert stored[choice["id"]]["at"]

    page.reload()
    open_page(page, urljoin(server, url))
    score = page.locator(".recall-score").inner_text()
    assert f"2 of {n} answered" in score, score
    assert f"right: 0 of 1 committed ({n_choice} on the page)" in score, score
    assert page.locator(".recall.recall-answered").count() == 2
    committed = _choice(page, choice["id"], False)
    assert "Your answer" in committed.locator("summary").inner_text()
    assert not page.evaluate("() => Array.from(document.querySelectorAll('.recall details'))"
                             ".some(d => d.open)"), "a remembered answer was opened on load"

    # the progress page counts them, in the chapter's row and nowhere else
    open_page(page, urljoin(server, PROGRESS))
    page.wait_for_selector(".progress-table")
    by_url = _progress_rows(page)
    assert by_url[url] == ["2", str(len(here)), "0", "1"], by_url[url]
    for other_url, counts in by_url.items():
        shared = {it["id"] for it in items if it["url"] == other_url} & set(stored)
        assert counts[0] == str(len(shared)), f"{other_url}: {counts}"
    assert page.locator(f'.progress-table a[href$="{url}"]').count() == 1
    assert not errors, errors


def test_gym_filters(server, context):
    """The gym's views: only the ones I missed, not yet answered, all."""
    items = _items()
    gym = [it["id"] for it in items if it["url"] == GYM]
    gym_choices = [it["id"] for it in items if it["url"] == GYM and it["choices"]]
    assert len(gym) >= 12 and len(gym_choices) >= 3
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_page(page, urljoin(server, GYM))
    assert _visible_ids(page) == gym
    wrong, right = gym_choices[:2], gym_choices[2]
    for item in wrong:
        _commit(page, item, correct=False)
    _commit(page, right, correct=True)
    page.locator(f'.recall[data-item="{gym[0]}"] summary').first.click()  # a reveal or the like

    page.get_by_role("button", name="Only the ones I missed").click()
    stored = _stored(page)
    missed = [i for i in gym if i in stored and stored[i]["right"] is False]
    assert set(wrong) <= set(missed) and right not in missed
    assert _visible_ids(page) == missed
    assert "(2)" in page.get_by_role("button", name="Only the ones I missed").inner_text()

    page.get_by_role("button", name="Not yet answered").click()
    assert _visible_ids(page) == [i for i in gym if i not in stored]

    page.get_by_role("button", name="All").click()
    assert _visible_ids(page) == gym
    assert not errors, errors


def test_gym_quiz(server, context):
    """A shuffled quiz: N items in one list; the same seed gives the same quiz."""
    gym = [it["id"] for it in _items() if it["url"] == GYM]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_page(page, urljoin(server, GYM + "?view=quiz&n=5&seed=7"))
    first = _visible_ids(page)
    assert len(first) == 5 and len(set(first)) == 5 and set(first) <= set(gym)
    assert page.locator(".progress-quiz > li .recall").count() == 5
    assert first != sorted(first, key=gym.index), "a quiz of 5 came out in the book's order"
    page.get_by_role("button", name="Shuffle again").click()
    second = _visible_ids(page)
    assert len(second) == 5 and second != first
    open_page(page, urljoin(server, GYM + "?view=quiz&n=5&seed=7"))
    assert _visible_ids(page) == first, "the same seed gave another quiz"
    page.locator(".progress-quiz-size").fill("8")
    page.locator(".progress-quiz-size").dispatch_event("change")
    assert len(_visible_ids(page)) == 8
    page.get_by_role("button", name="All").click()
    assert _visible_ids(page) == gym, "All did not put every question back in its place"
    assert page.locator(".progress-quiz li").count() == 0
    assert not errors, errors


def test_clear_my_answers(server, context):
    url, here = _chapter_with_choices(_items())
    page = context.new_page()
    open_page(page, urljoin(server, url))
    _commit(page, _named_choice(here)["id"], correct=True)
    open_page(page, urljoin(server, PROGRESS))
    page.wait_for_selector(".progress-table")
    page.get_by_role("button", name="Clear my answers").click()
    assert page.get_by_role("button", name="Yes, clear them").is_visible()
    page.get_by_role("button", name="Cancel").click()  # the confirm step can be left
    assert _stored(page), "Cancel cleared the answers"
    page.get_by_role("button", name="Clear my answers").click()
    page.get_by_role("button", name="Yes, clear them").click()
    assert _stored(page) == {}
    assert "cleared" in page.locator(".progress-cleared").inner_text()
    answered = page.evaluate("() => Array.from(document.querySelectorAll("
                             "'.progress-table td[data-answered]'), td => td.dataset.answered)")
    assert answered and set(answered) == {"0"}
    open_page(page, urljoin(server, url))
    assert page.locator(".recall.recall-answered, .recall-badge").count() == 0
    assert f"0 of {len(here)} answered" in page.locator(".recall-score").inner_text()


def test_print_opens_every_answer(server, context):
    url, _ = _chapter_with_choices(_items())
    page = context.new_page()
    open_page(page, urljoin(server, url))
    closed = "() => Array.from(document.querySelectorAll('details')).filter(d => !d.open).length"
    assert page.evaluate(closed) > 0
    page.emulate_media(media="print")
    # the print stylesheet alone shows a closed answer (Chromium supports ::details-content)
    assert page.locator(".recall .recall-answer").first.is_visible()
    page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    assert page.evaluate(closed) == 0, "printing left some <details> closed"
    page.wait_for_timeout(300)  # the toggle events of the opened <details> have fired
    page.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
    page.emulate_media(media="screen")
    assert page.evaluate("() => Array.from(document.querySelectorAll('details')).filter(d => d.open).length") == 0
    page.wait_for_timeout(300)
    assert _stored(page) == {}, "printing committed answers"
    assert " 0 of " in page.locator(".recall-score").inner_text()


def test_widgets_work_without_storage(server, context):
    """A browser that refuses localStorage (some private modes throw): the widgets still open and
    count on the page, and the progress page says answers are not kept. (The theme's own inline
    script, which reads the colour mode from localStorage, fails there too; only the book's
    scripts are checked.)"""
    context.add_init_script("""window.bookErrors = [];
        window.addEventListener('error', e => window.bookErrors.push(e.filename + ': ' + e.message));
        Object.defineProperty(window, 'localStorage', {get() {
        throw new DOMException('The operation is insecure.', 'SecurityError'); }});""")
    ours = "() => window.bookErrors.filter(e => /recall-score|progress-|widget-alt/.test(e))"
    page = context.new_page()
    url, here = _chapter_with_choices(_items())
    choice = _named_choice(here)
    open_page(page, urljoin(server, url))
    _choice(page, choice["id"], True).locator("summary").click()
    page.wait_for_function("() => document.querySelector('.recall-score').textContent"
                           ".includes('1 of ')", timeout=5000)
    assert "Your answer" in _choice(page, choice["id"], True).inner_text()
    assert page.evaluate(ours) == []
    open_page(page, urljoin(server, PROGRESS))
    page.wait_for_selector(".progress-table")
    assert page.locator(".progress-warning").is_visible()
    assert page.evaluate(ours) == []


def test_widget_sliders_get_names(server, context):
    """widget-alt.js names each ipywidgets slider after its widget's label, whenever the embed
    manager draws it (the handle can be added after its widget), and drops an empty tooltip."""
    page = context.new_page()
    open_page(page, urljoin(server, "book/intro.html"))
    page.evaluate("""() => {
        const w = document.createElement('div');
        w.className = 'jupyter-widgets widget-slider';
        w.id = 'fake-slider';
        w.innerHTML = '<label class="widget-label" title="null">mask rate</label>' +
          '<div class="slider-container"><div role="slider" tabindex="0" aria-valuenow="0.15"></div></div>';
        document.querySelector('main').appendChild(w);
    }""")
    page.wait_for_function("() => document.querySelector('#fake-slider [role=slider]')"
                           ".getAttribute('aria-label') === 'mask rate'", timeout=5000)
    assert page.locator("#fake-slider .widget-label").get_attribute("title") is None
    page.evaluate("""() => {
        const h = document.createElement('div');
        h.setAttribute('role', 'slider');
        h.id = 'late-handle';
        document.querySelector('#fake-slider .slider-container').appendChild(h);
    }""")
    page.wait_for_function("() => document.querySelector('#late-handle')"
                           ".getAttribute('aria-label') === 'mask rate'", timeout=5000)
