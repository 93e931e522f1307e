"""The built site in a real browser: Debian's chromium driven by Playwright, offline.

Run after ``make book`` (``make test-site`` does both). Every page of ``_build/html`` is opened
from a server on 127.0.0.1 and checked: formulas typeset (no raw TeX left), every recall widget
opens and shows its answer, every exercise solution stays folded until clicked, ipywidgets drawn,
no console error, no failed or off-machine request, no broken internal link, no sideways overflow
on a phone. Screenshots of every page (light, dark
and phone width) go to ``_build/screenshots``.
"""

from __future__ import annotations

import functools
import http.server
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
                              ".jupyter-widgets .widget-toggle-button').length")
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
