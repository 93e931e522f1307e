"""The browser tests' helpers: where the built site is, opening a page as a reader sees it, what
went wrong during a visit, one visit per page, and moving a control as a reader would.

Test modules import these by name (``from browser import ...``); the fixtures that use them are in
``conftest.py`` beside this file.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
from playwright.sync_api import Browser, BrowserContext, ElementHandle, Locator, Page

ROOT = Path(__file__).resolve().parents[2]
# BOOK_BUILD_DIR: a build made with `jupyter-book build . --path-output DIR` (its _build/ inside).
BUILD = Path(os.environ.get("BOOK_BUILD_DIR") or ROOT / "_build")
SITE = BUILD / "html"
NODE_MODULES = ROOT / "node_modules"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or "/usr/bin/chromium")
# Offline and quiet: no GPU, no QUIC, none of chromium's own background requests (updates, sync),
# which would count as requests that leave the machine. --no-sandbox: CI runs as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DESKTOP = {"width": 1280, "height": 900}
TIMEOUT_MS = 90_000  # generous: the CI machine has two cores
WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
# Asked for by chromium itself where a page names no icon: not a request of the site's.
FAVICON = "/favicon.ico"


def built_site() -> Path:
    """The built site's folder; fails the test (never skips it) when there is none."""
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site in {SITE}: run `make book` first (`make test-site` builds it)")
    return SITE


def node_package(name: str) -> Path:
    """An npm package of package.json, installed by `make setup` (npm ci)."""
    path = NODE_MODULES / name
    if not path.is_dir():
        pytest.fail(f"{path} is missing: `make setup` installs the npm packages (npm ci)")
    return path


@dataclass
class Visit:
    """A page opened once, and what went wrong while it was open."""
    rel: str
    url: str
    page: Page
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)
    height: int = 0  # px, at desktop width as the page opened (checks open widgets and answers)
    words: int = 0  # what the page shows as it opened: the words of its main text, code and output

    def problems(self) -> list[str]:
        """Requests that left the machine, failed requests and console errors, so far."""
        return ([f"left the machine: {u}" for u in self.offsite] + [f"failed: {u}" for u in self.failed]
                + [f"console: {e}" for e in self.errors])


def _aborted_by_navigation(url: str, failure: str | None) -> bool:
    """A lazy font load cut short when the test reloads or closes the page is not a failure, as
    long as the file is really there."""
    local = SITE / unquote(urlparse(url).path).lstrip("/")
    return bool(failure and "ERR_ABORTED" in failure and local.is_file())


def watch(visit: Visit) -> None:
    """Record console errors, failed requests and requests that leave the machine (chromium
    cannot resolve any other host: CHROMIUM_ARGS)."""
    page = visit.page
    page.on("console", lambda m: visit.errors.append(f"{m.text} ({m.location.get('url')})")
            if m.type == "error" and urlparse(m.location.get("url", "")).path != FAVICON else None)
    page.on("pageerror", lambda e: visit.errors.append(str(e)))
    page.on("requestfailed", lambda r: visit.failed.append(f"{r.url} ({r.failure})")
            if not _aborted_by_navigation(r.url, r.failure) else None)
    page.on("response", lambda r: visit.failed.append(f"{r.url} (HTTP {r.status})")
            if r.status >= 400 and urlparse(r.url).path != FAVICON else None)
    page.on("request", lambda r: visit.offsite.append(r.url)
            if not r.url.startswith(("data:", "blob:")) and urlparse(r.url).hostname != "127.0.0.1"
            else None)


def open_page(page: Page, url: str) -> None:
    """Load a page and wait until a reader sees it whole: typeset, fonts in, widgets drawn."""
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url, wait_until="load")
    # MathJax 3 exposes a promise that settles once the page is typeset.
    page.wait_for_function(
        "() => document.readyState === 'complete' && (!document.querySelector('script[src*=mathjax]')"
        " || (window.MathJax && MathJax.startup && MathJax.startup.promise))")
    page.evaluate("() => (window.MathJax && MathJax.startup) ? MathJax.startup.promise.then(() => true) : true")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    if page.locator(WIDGET_VIEW).count():
        # attached, not visible: on the site a kernel control stands hidden behind its model control
        page.wait_for_selector(".jupyter-widgets", state="attached", timeout=15000)
        page.wait_for_timeout(200)
    page.wait_for_timeout(300)


# The words a reader is shown at open: the main column's rendered text (prose, code and printed
# output; folded code, answers and solutions are not rendered, so not counted).
SHOWN_WORDS = ("() => (document.querySelector('main') || document.body).innerText"
               ".split(/\\s+/).filter(Boolean).length")


class SitePages:
    """One open page at a time, at desktop width in a context of its own, kept open while the
    checks of that page run (the collection hook puts them together) and closed for the next."""

    def __init__(self, server: str, browser: Browser):
        self.server, self.browser = server, browser
        self.current: Visit | None = None
        self.context: BrowserContext | None = None
        self.closed: set[str] = set()

    def visit(self, rel: str) -> Visit:
        if self.current is None or self.current.rel != rel:
            if rel in self.closed:
                pytest.fail(f"{rel} is opened a second time: its checks no longer run together "
                            "(the collection hook's order, or --dist loadgroup's groups)")
            self.close()
            self.context = self.browser.new_context(viewport=DESKTOP)
            self.current = Visit(rel, urljoin(self.server, rel), self.context.new_page())
            watch(self.current)
            open_page(self.current.page, self.current.url)
            page_height = "() => document.documentElement.scrollHeight"
            self.current.height = self.current.page.evaluate(page_height)
            self.current.words = self.current.page.evaluate(SHOWN_WORDS)
        return self.current

    def close(self) -> None:
        if self.context is not None:
            self.closed.add(self.current.rel)
            self.context.close()
        self.current = self.context = None


def move_control(control: Locator | ElementHandle) -> None:
    """Set a page's control to another value, as a reader would: a menu to its last option (its
    first if already there), a slider one step (up where it can: an extreme can make other controls
    moot), a click on a box or a button, a text box with one word changed."""
    tag, kind = control.evaluate("e => [e.tagName, e.type || '']")
    if tag == "SELECT":
        options = control.evaluate("s => [...s.options].map(o => o.value)")
        control.select_option(options[-1] if control.input_value() != options[-1] else options[0])
    elif kind == "range":
        control.evaluate("e => { e.value < Number(e.max) ? e.stepUp() : e.stepDown();"
                         " e.dispatchEvent(new Event('input', {bubbles: true}));"
                         " e.dispatchEvent(new Event('change', {bubbles: true})); }")
    elif kind == "checkbox" or tag == "BUTTON":
        control.click()
    else:
        value = control.input_value()
        control.fill(value.replace("the", "a", 1) if "the" in value else value + " river")
