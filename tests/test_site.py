"""The built site in a real browser: Debian's chromium driven by Playwright, offline.

Run after ``make book`` (``make test-site`` does both). Every page of ``_build/html`` is opened
from a server on 127.0.0.1 and checked: formulas typeset (no raw TeX left), every recall widget
opens and shows its answer, every exercise solution stays folded until clicked, ipywidgets drawn,
no console error, no failed or off-machine request, no broken internal link, no sideways overflow
on a phone. Screenshots of every page (light, dark
and phone width) go to ``_build/screenshots``.

Every page also passes axe-core's WCAG 2.1 A and AA rules in both themes (axe comes from npm,
``node_modules/axe-core``, for this test only). Then the reader's progress: answers committed on a
page are remembered across pages and reloads, counted on the progress page, filtered and shuffled
in the gym, cleared on request, and printing opens every answer. Each test opens its own browser
context, so no test sees another's answers.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
# BOOK_BUILD_DIR: a build made with `jupyter-book build . --path-output DIR` (its _build/ inside).
BUILD = Path(os.environ.get("BOOK_BUILD_DIR") or ROOT / "_build")
SITE = BUILD / "html"
SHOTS = BUILD / "screenshots"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or "/usr/bin/chromium")
SKIP_PAGES = {"genindex.html", "search.html"}
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
STORE_KEY = "fill-in-the-blank.recall.v1"  # the one localStorage key of recall-score.js
GYM = "book/gym.html"
PROGRESS = "book/progress.html"

sync_api = pytest.importorskip("playwright.sync_api")


def _pages() -> list[str]:
    if not (SITE / "index.html").exists():
        pytest.fail("no built site: run `make book` first (`make test-site` builds it)")
    pages = []
    for path in sorted(SITE.rglob("*.html")):
        rel = path.relative_to(SITE).as_posix()
        if rel.startswith(("_static/", "_sources/", "_images/")) or rel in SKIP_PAGES:
            continue
        if 'http-equiv="Refresh"' in path.read_text(encoding="utf-8", errors="replace")[:300]:
            continue  # a redirect (index.html -> the first page), tested as its target
        pages.append(rel)
    return pages


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(_Quiet, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: `make browser` installs it")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield b
        b.close()


def _aborted_by_navigation(url: str, failure: str | None) -> bool:
    """A lazy font load cut short when the test reloads or closes the page is not a failure, as
    long as the file is really there."""
    local = SITE / unquote(urlparse(url).path).lstrip("/")
    return bool(failure and "ERR_ABORTED" in failure and local.is_file())


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


def _open(page, url: str) -> None:
    page.set_default_timeout(90_000)  # generous: the CI machine has two cores
    page.goto(url, wait_until="load")
    # MathJax 3 exposes a promise that settles once the page is typeset.
    page.wait_for_function(
        "() => document.readyState === 'complete' && (!document.querySelector('script[src*=mathjax]')"
        " || (window.MathJax && MathJax.startup && MathJax.startup.promise))")
    page.evaluate("() => (window.MathJax && MathJax.startup) ? MathJax.startup.promise.then(() => true) : true")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    page.wait_for_timeout(300)


@pytest.mark.parametrize("rel", _pages() if (SITE / "index.html").exists() else ["index.html"])
def test_page(rel, server, browser):
    errors: list[str] = []
    failed: list[str] = []
    offsite: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})")
            if not _aborted_by_navigation(r.url, r.failure) else None)
    page.on("response", lambda r: failed.append(f"{r.url} (HTTP {r.status})") if r.status >= 400 else None)

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            r.continue_()
        else:  # the site must work offline: nothing may be fetched from elsewhere
            offsite.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    url = urljoin(server, rel)
    _open(page, url)

    # 1. Formulas: MathJax ran, and no raw TeX is left in the text.
    has_math = page.evaluate("() => document.querySelectorAll('.math, .tex2jax_process').length")
    if has_math:
        assert page.evaluate("() => document.querySelectorAll('mjx-container').length") > 0, \
            f"{rel}: formulas present but none typeset"
    raw = page.evaluate(RAW_TEX_JS)
    assert not raw, f"{rel}: raw TeX left on the page: {raw[:5]}"

    # 2. ipywidgets: every embedded widget view is drawn by the local embed manager.
    views = page.evaluate(
        "() => document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length")
    if views:
        page.wait_for_selector(".jupyter-widgets", timeout=15000)
        drawn = page.evaluate("() => document.querySelectorAll('.jupyter-widgets.widget-interact, "
                              ".jupyter-widgets .widget-slider, .jupyter-widgets.widget-slider, "
                              ".jupyter-widgets .widget-toggle-button, .jupyter-widgets .widget-dropdown, "
                              ".jupyter-widgets.widget-dropdown, .jupyter-widgets.widget-hprogress')"
                              ".length")
        assert drawn >= 1, f"{rel}: {views} widget views embedded but none drawn"

    # 3. Recall widgets: each one opens from the keyboard-focusable summary and shows its answer.
    widgets = page.locator(".recall")
    for k in range(widgets.count()):
        w = widgets.nth(k)
        details = w.locator("details")
        assert details.count() >= 1, f"{rel}: recall widget {k} has nothing to open"
        for d in range(details.count()):
            answer = details.nth(d).locator(".recall-answer")
            assert not answer.is_visible(), f"{rel}: recall widget {k} shows its answer before a click"
            details.nth(d).locator("summary").click()
            assert answer.is_visible(), f"{rel}: recall widget {k} did not open on click"
            assert answer.inner_text().strip(), f"{rel}: recall widget {k} has an empty answer"
    if widgets.count():
        # the score counter (site only) saw every widget answered; a details' toggle event fires
        # after the click returns, so wait for the last one (or time out and report the score)
        n = widgets.count()
        try:
            page.wait_for_function("n => (document.querySelector('.recall-score') || {}).textContent"
                                   "?.includes(n + ' of ' + n + ' answered')", arg=n, timeout=5000)
        except sync_api.TimeoutError:
            pass
        score = page.locator(".recall-score").inner_text()
        assert f"{widgets.count()} of {widgets.count()} answered" in score, f"{rel}: score says {score!r}"
        # keyboard: Tab to a summary and Enter opens it
        page.reload()
        _open(page, url)
        first = page.locator(".recall summary").first
        first.focus()
        page.keyboard.press("Enter")
        assert page.locator(".recall details").first.evaluate("d => d.open"), \
            f"{rel}: a recall widget does not open from the keyboard"

    # 3b. Exercises: each chapter's worked solutions stay folded until the reader opens them.
    solutions = page.locator("details:has(> summary:text-is('Solution'))")
    if rel.startswith("notebooks/"):
        assert solutions.count() >= 2, f"{rel}: {solutions.count()} exercise solutions, expected 2 or more"
    for k in range(solutions.count()):
        sol = solutions.nth(k)
        assert not sol.evaluate("d => d.open"), f"{rel}: solution {k} is open before a click"
        sol.locator("summary").click()
        assert sol.evaluate("d => d.open && d.innerText.trim().length > 'Solution'.length + 40"), \
            f"{rel}: solution {k} did not open on click, or is empty"

    # 4. Internal links resolve to existing files and anchors.
    hrefs = page.evaluate("() => Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    broken = []
    for href in hrefs:
        target, anchor = urldefrag(href)
        if urlparse(target).hostname != "127.0.0.1":
            continue
        path = SITE / unquote(urlparse(target).path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.exists():
            broken.append(href)
        elif anchor and path.suffix == ".html":
            text = path.read_text(encoding="utf-8", errors="replace")
            if not re.search(r'id="%s"' % re.escape(unquote(anchor)), text):
                broken.append(href)
    assert not broken, f"{rel}: broken internal links: {broken[:10]}"

    # 5. Every figure in the content says what it shows (alt text), logos and icons included.
    no_alt = page.evaluate("""() => Array.from(document.querySelectorAll('main img, article img'))
        .filter(i => !(i.getAttribute('alt') || '').trim()).map(i => i.src.slice(0, 80))""")
    assert not no_alt, f"{rel}: images without alt text: {no_alt[:5]}"

    # 6. Screenshots in both themes, for people to look at.
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = rel.replace("/", "__").removesuffix(".html")
    page.screenshot(path=str(SHOTS / f"{name}-light.png"), full_page=True)
    page.evaluate("() => { document.documentElement.dataset.mode = 'dark'; "
                  "document.documentElement.dataset.theme = 'dark'; }")
    page.wait_for_timeout(200)
    page.screenshot(path=str(SHOTS / f"{name}-dark.png"), full_page=True)
    context.close()
    # and at phone width: nothing may overflow the screen sideways
    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = phone.new_page()
    _open(page, url)
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    page.screenshot(path=str(SHOTS / f"{name}-phone.png"), full_page=True)
    phone.close()
    assert overflow <= 1, f"{rel}: the page is {overflow}px wider than a phone screen"

    assert not offsite, f"{rel}: requests that leave the machine (the site must work offline): {offsite[:5]}"
    assert not failed, f"{rel}: failed requests: {failed[:5]}"
    assert not errors, f"{rel}: console errors: {errors[:5]}"


# --- Accessibility: axe-core on every page, light and dark ---------------------------------------

AXE_JS = """tags => axe.run(document, {runOnly: {type: 'tag', values: tags}}).then(r =>
  r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ': ' +
                       (n.failureSummary || '').replace(/\\s+/g, ' ').trim())})))"""


def _set_theme(page, theme: str) -> None:
    page.evaluate("t => { document.documentElement.dataset.mode = t; "
                  "document.documentElement.dataset.theme = t; }", theme)
    page.wait_for_timeout(200)


def _readable(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  {v['id']} ({v['impact']}): {v['help']}")
        lines.extend(f"      {node[:300]}" for node in v["nodes"][:8])
        if len(v["nodes"]) > 8:
            lines.append(f"      ... and {len(v['nodes']) - 8} more")
    return "\n".join(lines)


@pytest.mark.parametrize("rel", _pages() if (SITE / "index.html").exists() else ["index.html"])
def test_accessibility(rel, server, browser):
    """axe-core finds no WCAG 2.1 A or AA violation on the page, in the light or the dark theme."""
    if not AXE.is_file():
        pytest.fail("axe-core is missing: `npm ci` installs it (package.json)")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    _open(page, urljoin(server, rel))
    if page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count():
        page.wait_for_selector(".jupyter-widgets", timeout=15000)
        page.wait_for_timeout(500)
    page.add_script_tag(path=str(AXE))
    found = {}
    for theme in ("light", "dark"):
        _set_theme(page, theme)
        violations = page.evaluate(AXE_JS, AXE_TAGS)
        if violations:
            found[theme] = violations
    context.close()
    assert not found, f"{rel}: accessibility violations (axe-core, {', '.join(AXE_TAGS)}):\n" + \
        "\n".join(f" {theme} theme:\n{_readable(v)}" for theme, v in found.items())


# --- Progress: answers remembered, counted, filtered, shuffled, cleared, printed ----------------

def _items() -> list[dict]:
    """The build's list of every recall widget (book/_ext/progress_items.py)."""
    text = (SITE / "_static" / "progress-items.js").read_text(encoding="utf-8")
    return json.loads(text.split("=", 1)[1].strip().rstrip(";"))


def _stored(page) -> dict:
    return page.evaluate("k => JSON.parse(localStorage.getItem(k) || '{}')", STORE_KEY)


def _visible_ids(page) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('.recall'))
        .filter(w => w.offsetParent !== null)
        .map(w => w.dataset.item || w.dataset.recallKey)""")


def _choice(page, item: str, correct: bool):
    widget = page.locator(f'.recall[data-item="{item}"]').first
    return widget.locator(f'details.recall-choice[data-correct="{str(correct).lower()}"]').first


def _commit(page, item: str, correct: bool) -> None:
    """Open the right or a wrong choice of a widget, and wait until it is remembered."""
    _choice(page, item, correct).locator("summary").click()
    page.wait_for_function("([k, id]) => id in JSON.parse(localStorage.getItem(k) || '{}')",
                           arg=[STORE_KEY, item], timeout=5000)


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    yield ctx
    ctx.close()


def _chapter_with_choices(items: list[dict]) -> tuple[str, list[dict]]:
    """A chapter page with at least one named true-or-false (or multiple-choice) widget and one
    other widget."""
    for url in dict.fromkeys(it["url"] for it in items):
        here = [it for it in items if it["url"] == url]
        if (url.startswith("notebooks/") and any(it["kind"] not in ("tf", "mc") for it in here)
                and any(it["kind"] in ("tf", "mc") and "#" not in it["id"] for it in here)):
            return url, here
    pytest.fail("no chapter has a named true-or-false widget and another widget")


def test_answers_are_remembered_and_counted(server, context):
    items = _items()
    url, here = _chapter_with_choices(items)
    choice = next(it for it in here if it["kind"] in ("tf", "mc") and "#" not in it["id"])
    other = next(it for it in here if it["kind"] not in ("tf", "mc"))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    _open(page, urljoin(server, url))
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
    _open(page, urljoin(server, url))
    score = page.locator(".recall-score").inner_text()
    assert f"2 of {n} answered" in score, score
    assert f"right: 0 of 1 committed ({n_choice} on the page)" in score, score
    assert page.locator(".recall.recall-answered").count() == 2
    committed = _choice(page, choice["id"], False)
    assert "Your answer" in committed.locator("summary").inner_text()
    assert not page.evaluate("() => Array.from(document.querySelectorAll('.recall details'))"
                             ".some(d => d.open)"), "a remembered answer was opened on load"

    # the progress page counts them, in the chapter's row and nowhere else
    _open(page, urljoin(server, PROGRESS))
    page.wait_for_selector(".progress-table")
    rows = page.evaluate("""() => Array.from(document.querySelectorAll('.progress-table tbody tr'),
        tr => [tr.dataset.url, tr.cells[1].dataset.answered, tr.cells[1].dataset.total,
               tr.cells[2].dataset.right, tr.cells[2].dataset.committed])""")
    by_url = {r[0]: r[1:] for r in rows}
    assert by_url[url] == ["2", str(len(here)), "0", "1"], by_url[url]
    for other_url, counts in by_url.items():
        shared = {it["id"] for it in items if it["url"] == other_url} & set(stored)
        assert counts[0] == str(len(shared)), f"{other_url}: {counts}"
    assert page.locator(f'.progress-table a[href$="{url}"]').count() == 1
    assert not errors, errors


def test_gym_views(server, context):
    items = _items()
    gym = [it["id"] for it in items if it["url"] == GYM]
    gym_choices = [it["id"] for it in items if it["url"] == GYM and it["kind"] in ("tf", "mc")]
    assert len(gym) >= 12 and len(gym_choices) >= 3
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    _open(page, urljoin(server, GYM))
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

    # a shuffled quiz: N items in one list; the same seed gives the same quiz
    _open(page, urljoin(server, GYM + "?view=quiz&n=5&seed=7"))
    first = _visible_ids(page)
    assert len(first) == 5 and len(set(first)) == 5 and set(first) <= set(gym)
    assert page.locator(".progress-quiz > li .recall").count() == 5
    assert first != sorted(first, key=gym.index), "a quiz of 5 came out in the book's order"
    page.get_by_role("button", name="Shuffle again").click()
    second = _visible_ids(page)
    assert len(second) == 5 and second != first
    _open(page, urljoin(server, GYM + "?view=quiz&n=5&seed=7"))
    assert _visible_ids(page) == first, "the same seed gave another quiz"
    page.locator(".progress-quiz-size").fill("8")
    page.locator(".progress-quiz-size").dispatch_event("change")
    assert len(_visible_ids(page)) == 8
    page.get_by_role("button", name="All").click()
    assert _visible_ids(page) == gym, "All did not put every question back in its place"
    assert page.locator(".progress-quiz li").count() == 0
    assert not errors, errors


def test_clear_my_answers(server, context):
    items = _items()
    url, here = _chapter_with_choices(items)
    choice = next(it for it in here if it["kind"] in ("tf", "mc") and "#" not in it["id"])
    page = context.new_page()
    _open(page, urljoin(server, url))
    _commit(page, choice["id"], correct=True)
    _open(page, urljoin(server, PROGRESS))
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
    _open(page, urljoin(server, url))
    assert page.locator(".recall.recall-answered, .recall-badge").count() == 0
    assert f"0 of {len(here)} answered" in page.locator(".recall-score").inner_text()


def test_print_opens_every_answer(server, context):
    items = _items()
    url, _ = _chapter_with_choices(items)
    page = context.new_page()
    _open(page, urljoin(server, url))
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
    items = _items()
    url, here = _chapter_with_choices(items)
    choice = next(it for it in here if it["kind"] in ("tf", "mc") and "#" not in it["id"])
    _open(page, urljoin(server, url))
    _choice(page, choice["id"], True).locator("summary").click()
    page.wait_for_function("() => document.querySelector('.recall-score').textContent"
                           ".includes('1 of ')", timeout=5000)
    assert "Your answer" in _choice(page, choice["id"], True).inner_text()
    assert page.evaluate(ours) == []
    _open(page, urljoin(server, PROGRESS))
    page.wait_for_selector(".progress-table")
    assert page.locator(".progress-warning").is_visible()
    assert page.evaluate(ours) == []


def test_widget_sliders_get_names(server, context):
    """widget-alt.js names each ipywidgets slider after its widget's label, whenever the embed
    manager draws it (the handle can be added after its widget), and drops an empty tooltip."""
    page = context.new_page()
    _open(page, urljoin(server, "book/intro.html"))
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
