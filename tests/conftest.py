"""What the tests share: the torch thread count, the book's tokenizer, the built site served on
127.0.0.1, one headless chromium for every browser test of the run, and one visit per page.

The browser and the server are session-scoped: the browser modules open their pages in one chromium,
started once, with one set of flags. A site page is opened once (``site_pages``) for every check of
it in ``test_site.py``, ``test_site_model.py`` and ``test_site_live.py``: the collection hook below
runs a page's tests together, the reader's checks first (``test_site.py``: what a page shows at
rest), then the model controls and the charts, which move it. Tests that need a page of their own (a
reader's stored answers, a browser without WebAssembly) open their own context, so no test sees
another's cookies or answers. What the tests need of the machine (a built site, chromium, the npm packages)
fails the test with the command that provides it; nothing of the repository's own is skipped.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
import torch
from playwright.sync_api import Browser, BrowserContext, ElementHandle, Locator, Page, sync_playwright

from mlm_lib.book.book_model import book_tokenizer
from mlm_lib.tokenizer import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[1]
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
# One thread per core of the 2-core reference machine, whatever this machine has: the timed
# checks (a model that loads in seconds, say) are calibrated there. Under pytest-xdist (`make
# test-lib`, two workers) one thread per worker: two threads each would spin against each other.
TORCH_THREADS = 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2

# The files whose tests take longest (fresh virtual environments, a results file reproduced, the
# tokenizer over the whole corpus, every chapter opened in JupyterLab, Vega under Node.js, two
# processes), longest first: with two workers they run beside the others instead of last, where
# one worker would finish them alone.
LONG_FIRST = ("test_install.py", "test_results.py", "test_tokenizer.py", "test_jupyterlab.py",
              "test_live.py", "test_ddp.py")
# Browser modules whose tests share a module-scoped server: one worker runs all of them.
ONE_WORKER = ("test_jupyterlab.py",)
# The modules that share a visit per page, in the order their checks of a page run.
# The model checks come before the walk over every control: each leaves its control answered, while
# the walk may leave a text box too long for the model (a move that shows a message counts there).
SHARED_VISIT = ("test_site.py", "test_site_model.py", "test_site_live.py")
DESKTOP = {"width": 1280, "height": 900}
TIMEOUT_MS = 90_000  # generous: the CI machine has two cores
WIDGET_VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
# Asked for by chromium itself where a page names no icon: not a request of the site's.
FAVICON = "/favicon.ico"

torch.set_num_threads(TORCH_THREADS)


def page_of(item: pytest.Item) -> str | None:
    """The site page a browser check runs on: its ``on_page`` marker, else its ``visit`` parameter
    (a page) or its ``chapter`` parameter (a chapter's page); None for a test with pages of its own."""
    if item.path.name not in SHARED_VISIT:
        return None
    marker = item.get_closest_marker("on_page")
    if marker:
        return marker.args[0]
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if "visit" in params:
        return params["visit"]
    return f"notebooks/{params['chapter']}.html" if "chapter" in params else None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups marked here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests first (beside the rest under xdist); a page's browser checks together, in the
    order of SHARED_VISIT, so that the page is opened once for all of them. Under ``--dist
    loadgroup`` (`make test-browser`) a page's checks, and the JupyterLab tests that share one
    server, form one group that a single worker runs."""
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        page = page_of(item)
        if page is not None:
            first_seen.setdefault(page, i)
            item.add_marker(pytest.mark.xdist_group(f"page:{page}"))
        elif item.path.name in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))

    def key(indexed: tuple[int, pytest.Item]) -> tuple:
        i, item = indexed
        page = page_of(item)
        rest = len(LONG_FIRST)
        if page is None:
            name = item.path.name
            return (LONG_FIRST.index(name) if name in LONG_FIRST else rest, 1, i)
        return (rest, 0, first_seen[page], SHARED_VISIT.index(item.path.name), i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


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


@pytest.fixture(scope="session")
def tok() -> WordPieceTokenizer:
    """The book's WordPiece tokenizer (8,000 pieces), loaded once."""
    return book_tokenizer()


@pytest.fixture(scope="session")
def site() -> Path:
    return built_site()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="session")
def server(site) -> Iterator[str]:
    """The built site on 127.0.0.1, the one host the browser tests let a page reach."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's chromium driven by Playwright (which never downloads a browser here)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: `make browser` installs it")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Visit:
    """A page opened once, and what went wrong while it was open."""
    rel: str
    url: str
    page: Page
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)

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
        return self.current

    def close(self) -> None:
        if self.context is not None:
            self.closed.add(self.current.rel)
            self.context.close()
        self.current = self.context = None


@pytest.fixture(scope="session")
def site_pages(server, browser) -> Iterator[SitePages]:
    pages = SitePages(server, browser)
    yield pages
    pages.close()


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
