"""What the tests share: the torch thread count, the book's tokenizer, the built site served on
127.0.0.1, and one headless chromium for every browser test of the run.

The browser and the server are session-scoped: ``test_site.py``, ``test_site_live.py`` and
``test_jupyterlab.py`` open their pages in one chromium, started once, with one set of flags.
Each test opens its own browser context (``new_context`` or ``new_page``), so no test sees another's
cookies or answers. What the tests need of the machine (a built site, chromium, the npm packages)
fails the test with the command that provides it; nothing of the repository's own is skipped.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from playwright.sync_api import Browser, ElementHandle, Locator, sync_playwright

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

# The files with the longest tests (a results file reproduced, fresh virtual environments), put
# first: with two workers (`make test-lib`, one file per worker at a time) they run beside the
# others instead of last.
LONG_FIRST = ("test_results.py", "test_install.py")

torch.set_num_threads(TORCH_THREADS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in LONG_FIRST)  # stable: file order kept


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
