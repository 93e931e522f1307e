"""The site's own scripts and stylesheets (book/static/) stay small enough to read, and the book's
model in the browser, split over classic scripts that share ``window.BertLive``, loads each file
after the ones it needs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "book" / "static"
MAX_LINES = 400
ENTRY = "bert-live.js"  # mounts the controls; the bert-live-*.js files before it give the rest


def test_no_file_in_book_static_is_over_400_lines():
    files = [p for p in sorted(STATIC.rglob("*")) if p.is_file()]
    assert files
    long = {p.relative_to(ROOT).as_posix(): n for p in files
            if (n := p.read_text(encoding="utf-8").count("\n")) > MAX_LINES}
    assert not long, f"split these by concern (at most {MAX_LINES} lines each): {long}"


def needs(text: str) -> list[str]:
    """The files a script's ``// Needs:`` line names."""
    line = re.search(r"^// Needs: (.*)$", text, re.M)
    assert line, "a bert-live script says what it needs on a '// Needs:' line"
    return re.findall(r"bert-live[\w-]*\.js", line.group(1))


def test_the_model_scripts_load_after_what_they_need():
    loaded = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]["html_js_files"]
    parts = sorted(p.name for p in STATIC.glob("bert-live*.js"))
    ours = [name for name in loaded if name in parts]
    assert sorted(ours) == parts and len(ours) == len(set(ours)), "every bert-live script loads once"
    assert ours[-1] == ENTRY, f"{ENTRY} mounts the controls, so it loads after the files that define them"
    for name in parts:
        for needed in needs((STATIC / name).read_text(encoding="utf-8")):
            assert ours.index(needed) < ours.index(name), f"{name} needs {needed}, which _config.yml loads after it"


def test_the_order_check_reads_a_needs_line():
    assert needs("// x\n// Needs: bert-live-model.js, bert-live-ui.js. Gives BertLive.KINDS.\n") == [
        "bert-live-model.js", "bert-live-ui.js"]
