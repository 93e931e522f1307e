"""The markup of the browser's model controls, and the kinds the site's scripts know (book/static/
bert-live.js mounts them; the renderers are in the bert-live-*.js files loaded before it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlm_lib.book.model_controls import KINDS, control_html

STATIC = Path(__file__).resolve().parents[2] / "book" / "static"
SCRIPTS = sorted(STATIC.glob("bert-live*.js"))  # bert-live.js and the files it is split into
LOADING = STATIC / "bert-live-model.js"  # the model, its tokenizer and its files


def scripts() -> str:
    assert STATIC / "bert-live.js" in SCRIPTS and LOADING in SCRIPTS
    return "\n".join(path.read_text(encoding="utf-8") for path in SCRIPTS)


def test_the_settings_travel_as_inert_json():
    markup = control_html("fill-mask", text="a </script><b>x</b> [MASK]", answer="treaty")
    spec = re.search(r'<script type="application/json" class="bert-live-spec">(.*?)</script>', markup).group(1)
    assert json.loads(spec) == {"answer": "treaty", "text": "a </script><b>x</b> [MASK]"}
    assert " hidden>" in markup and 'data-kind="fill-mask"' in markup


@pytest.mark.parametrize("kind, settings, message", [
    ("guess", {}, "unknown model control 'guess'"),
    ("fill-mask", {"txt": "x"}, "takes"),
])
def test_a_wrong_kind_or_setting_names_the_problem(kind, settings, message):
    with pytest.raises(ValueError, match=message):
        control_html(kind, **settings)


def test_every_kind_has_a_renderer_in_the_browser():
    script = scripts()
    assert set(re.findall(r'KINDS\["([\w-]+)"\] = function', script)) == set(KINDS)


def test_every_renderer_reads_exactly_the_settings_python_accepts():
    """KINDS lists each kind's settings once in Python; the renderer of that kind in the site's
    scripts reads them as ``s.<name>``. The two lists must be the same set, so a setting added on one
    side only fails here."""
    script = scripts()
    parts = re.split(r'\n  KINDS\["([\w-]+)"\] = function \(s, ui\) \{', script)
    read = {kind: set(re.findall(r"\bs\.(\w+)", re.split(r"\n  \}", body)[0]))
            for kind, body in zip(parts[1::2], parts[2::2])}
    assert read == KINDS


def test_the_browser_takes_positions_and_special_pieces_from_the_tokenizer_files():
    """The model's length and its special pieces are what browser_model writes into
    tokenizer_config.json and tokenizer.json, not numbers and lists kept again in the scripts."""
    assert "model_max_length" in LOADING.read_text(encoding="utf-8")
    assert "added_tokens" in LOADING.read_text(encoding="utf-8")
    script = scripts()
    assert not re.search(r"MAX_POSITIONS\s*=\s*\d+", script)
    assert not re.search(r'\[\s*"\[PAD\]"\s*,\s*"\[UNK\]"', script)
