"""Recall widgets in JupyterLab, in every chapter reopened without running it.

This is the hardest of the three places a widget must work: JupyterLab sanitizes the stored HTML
of an untrusted notebook (no scripts, no event handlers). One real JupyterLab server runs on
127.0.0.1 with a copy of every chapter, and Debian's chromium opens each chapter through
Playwright, without running any cell: every stored recall widget must be drawn, math in them
typeset, their cells' code folded away (it is data, ``recall("TF9")``, but the fold is what the
chapter asks for), and a few of them, the first, a middle one and the last, must open on a click
without showing an answer before it.

One JupyterLab page serves every chapter: the front end loads once, and each test closes what the
page shows and opens its chapter through JupyterLab's own ``docmanager:open`` command (the server
runs with ``expose_app_in_browser`` for that), as a reader opens a notebook from the file browser.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from recall_anki import chapter_outputs

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TOKEN = "fill-in-the-blank-test"
# Every cell attached at once. JupyterLab's default ("contentVisibility") draws a cell's outputs as
# it scrolls into view, and scrolling through every chapter took most of this test's time; the
# sanitizer and the renderers an untrusted output goes through are the same in every mode.
NOTEBOOK_SETTINGS = {"windowingMode": "none"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(url: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{url}{path}?token={TOKEN}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, root / notebook.name)
    settings = root / ".config" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps(NOTEBOOK_SETTINGS))
    port = _free_port()
    # fresh config and data dirs: no notary database, so every notebook is untrusted, as when reopened
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".config"), JUPYTER_DATA_DIR=str(root / ".data"),
               JUPYTER_RUNTIME_DIR=str(root / ".rt"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ip=127.0.0.1", f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.expose_app_in_browser=True"],
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
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # a server busy shutting its kernels down on a loaded machine
        proc.kill()
        proc.wait()


# Close every document the page shows (without a save dialog: nothing was edited), then open one
# chapter as the file browser would, and wait until JupyterLab has read it; fail after 60 s rather
# than wait on a dialog forever.
OPEN_ALONE = """async path => {
  const app = window.jupyterapp;
  for (const widget of [...app.shell.widgets('main')]) widget.dispose();
  const open = async () => {
    const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    await panel.context.ready;
    await panel.revealed;
    return true;
  };
  const late = new Promise((_, fail) => setTimeout(() => fail(new Error(path + ' did not open in 60 s')), 60000));
  return Promise.race([open(), late]);
}"""


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    """One JupyterLab front end for every chapter of the module; ?reset: a fresh workspace."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{lab}/lab?reset&token={TOKEN}")
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=90000)
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    yield page
    page.close()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_recall_widgets_work_in_a_reopened_chapter(lab, lab_page, notebook):
    stored_html = chapter_outputs([notebook])  # the recall widgets of its stored outputs
    stored = len(stored_html)
    assert stored > 0, f"{notebook.name} has no recall widget in its outputs"
    page = lab_page
    try:
        page.evaluate(OPEN_ALONE, notebook.name)
        widgets = page.locator(".jp-OutputArea-output .recall")
        try:
            page.wait_for_function("n => document.querySelectorAll('.jp-OutputArea-output .recall')"
                                   ".length >= n", arg=stored, timeout=60000)
        except PlaywrightTimeout:
            pass  # the count below says how many were drawn
        assert widgets.count() == stored, f"{notebook.name}: {widgets.count()} of {stored} widgets drawn"
        if any("\\(" in html for html in stored_html):
            # math typeset (the first may sit in a closed answer: attached, not visible)
            page.wait_for_selector(".recall mjx-container", state="attached", timeout=30000)
        n = widgets.count()
        for k in sorted({0, n // 2, n - 1}):
            w = widgets.nth(k)
            w.scroll_into_view_if_needed()
            # the cell's code is folded: JupyterLab shows a placeholder, not the editor
            cell = w.locator("xpath=ancestor::div[contains(concat(' ', @class, ' '), ' jp-CodeCell ')]")
            assert cell.count() == 1
            assert cell.locator(".jp-InputPlaceholder").count() == 1, f"widget {k}: its code is not folded"
            details = w.locator("details")
            assert details.count() >= 1
            d = details.last
            answer = d.locator(".recall-answer")
            assert not answer.is_visible()
            d.locator("summary").click()
            assert answer.is_visible(), f"widget {k} of {notebook.name} does not open in JupyterLab"
    finally:
        for session in _api(lab, "/api/sessions"):  # one kernel at a time on a small machine
            _api(lab, f"/api/sessions/{session['id']}", "DELETE")
