"""The browser tests' fixtures: the built site served on 127.0.0.1, one headless chromium for every
browser test of the run, one visit per page, and the order that lets a page's checks share it.

The browser and the server are session-scoped: the browser modules open their pages in one chromium,
started once, with one set of flags. A site page is opened once (``site_pages``) for every check of
it in ``test_site.py``, ``test_site_model.py`` and ``test_site_live.py``: the collection hook below
runs a page's tests together, the reader's checks first (``test_site.py``: what a page shows at
rest), then the model controls and the charts, which move it. Tests that need a page of their own (a
reader's stored answers, a browser without WebAssembly) open their own context, so no test sees
another's cookies or answers. What the tests need of the machine (a built site, chromium, the npm
packages) fails the test with the command that provides it; nothing of the repository's own is
skipped. The helpers are in ``browser.py``.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, SitePages, built_site
from playwright.sync_api import Browser, sync_playwright

# Browser modules whose tests share a module-scoped server: one worker runs all of them.
ONE_WORKER = ("test_jupyterlab.py",)
# The modules that share a visit per page, in the order their checks of a page run.
# The model checks come before the walk over every control: each leaves its control answered, while
# the walk may leave a text box too long for the model (a move that shows a message counts there).
SHARED_VISIT = ("test_site.py", "test_site_model.py", "test_site_live.py")


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
    """A page's browser checks together, in the order of SHARED_VISIT, so that the page is opened
    once for all of them; every other test keeps its place. Under ``--dist loadgroup`` (`make
    test-browser`) a page's checks, and the JupyterLab tests that share one server, form one
    group that a single worker runs."""
    first_seen: dict[str, int] = {}
    places: list[int] = []
    for i, item in enumerate(items):
        page = page_of(item)
        if page is not None:
            first_seen.setdefault(page, i)
            places.append(i)
            item.add_marker(pytest.mark.xdist_group(f"page:{page}"))
        elif item.path.name in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    pages = sorted(places, key=lambda i: (first_seen[page_of(items[i])],
                                          SHARED_VISIT.index(items[i].path.name), i))
    ordered = [items[i] for i in pages]
    for place, item in zip(places, ordered):
        items[place] = item


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


@pytest.fixture(scope="session")
def site_pages(server, browser) -> Iterator[SitePages]:
    pages = SitePages(server, browser)
    yield pages
    pages.close()
