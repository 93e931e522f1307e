"""Screenshots of every page of the built site, for people to look at: light and dark at desktop
width, and the light theme at phone width, in ``_build/screenshots``.

They check nothing, so ``make test`` does not take them (a full-page screenshot of a long chapter
costs seconds); ``make screenshots`` does, with the browser tests' server and chromium
(``conftest.py``), and CI keeps the pictures. pytest collects this file only when named.
"""

from __future__ import annotations

import pytest

from browser import BUILD, DESKTOP, open_page
from test_site import PAGES, PHONE, _set_theme

SHOTS = BUILD / "screenshots"

# Each width opened once: (viewport, [(file suffix, theme), ...]).
VIEWS = [(DESKTOP, [("light", "light"), ("dark", "dark")]), (PHONE, [("phone", "light")])]


@pytest.mark.parametrize("rel", PAGES)
def test_screenshot(rel, server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    name = rel.replace("/", "__").removesuffix(".html")
    for viewport, shots in VIEWS:
        context = browser.new_context(viewport=viewport, device_scale_factor=1)
        try:
            page = context.new_page()
            open_page(page, server + rel)
            for kind, theme in shots:
                _set_theme(page, theme)
                page.screenshot(path=str(SHOTS / f"{name}-{kind}.png"), full_page=True)
        finally:
            context.close()
