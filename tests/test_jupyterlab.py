"""Recall widgets in JupyterLab, in a notebook reopened without running it.

This is the hardest of the three places a widget must work: JupyterLab sanitizes the stored HTML
of an untrusted notebook (no scripts, no event handlers). A real JupyterLab server runs on
127.0.0.1 and Debian's chromium opens the first chapter through Playwright, without running any
cell; every recall widget must be drawn, typeset, and open on a click.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "00_how_to_read.ipynb"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or "/usr/bin/chromium")
TOKEN = "fill-in-the-blank-test"

sync_api = pytest.importorskip("playwright.sync_api")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port = _free_port()
    # fresh config and data dirs: no notary database, so the notebook is untrusted, as when reopened
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".config"), JUPYTER_DATA_DIR=str(root / ".data"),
               JUPYTER_RUNTIME_DIR=str(root / ".rt"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ip=127.0.0.1", f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 90 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def test_recall_widgets_work_in_a_reopened_notebook(lab):
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: `make browser` installs it")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{lab}/lab/tree/{NOTEBOOK.name}?token={TOKEN}")
        page.wait_for_selector(".jp-OutputArea-output .recall", timeout=60000)
        widgets = page.locator(".jp-OutputArea-output .recall")
        stored = NOTEBOOK.read_text().count('class=\\"recall recall-')
        assert stored > 0
        # JupyterLab renders long notebooks lazily: scroll until every stored widget is drawn
        deadline = time.time() + 60
        while widgets.count() < stored and time.time() < deadline:
            widgets.last.scroll_into_view_if_needed()
            page.mouse.wheel(0, 3000)
            page.wait_for_timeout(300)
        assert widgets.count() == stored
        # math inside the widgets is typeset by JupyterLab's MathJax
        page.wait_for_selector(".recall mjx-container", timeout=30000)
        for k in range(widgets.count()):
            w = widgets.nth(k)
            w.scroll_into_view_if_needed()
            details = w.locator("details")
            assert details.count() >= 1
            d = details.last
            answer = d.locator(".recall-answer")
            assert not answer.is_visible()
            d.locator("summary").click()
            assert answer.is_visible(), f"widget {k} does not open in JupyterLab"
        browser.close()
