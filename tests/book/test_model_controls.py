"""The markup of the browser's model controls, and the kinds bert-live.js knows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlm_lib.book.model_controls import KINDS, control_html

SCRIPT = Path(__file__).resolve().parents[2] / "book" / "static" / "bert-live.js"


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
    script = SCRIPT.read_text(encoding="utf-8")
    assert set(re.findall(r'KINDS\["([\w-]+)"\] = function', script)) == set(KINDS)


def test_every_renderer_reads_exactly_the_settings_python_accepts():
    """KINDS lists each kind's settings once in Python; the renderer of that kind in bert-live.js
    reads them as ``s.<name>``. The two lists must be the same set, so a setting added on one side
    only fails here."""
    script = SCRIPT.read_text(encoding="utf-8")
    parts = re.split(r'\n  KINDS\["([\w-]+)"\] = function \(s, ui\) \{', script)
    read = {kind: set(re.findall(r"\bs\.(\w+)", re.split(r"\n  \}", body)[0]))
            for kind, body in zip(parts[1::2], parts[2::2])}
    assert read == KINDS


def test_the_browser_takes_positions_and_special_pieces_from_the_tokenizer_files():
    """The model's length and its special pieces are what browser_model writes into
    tokenizer_config.json and tokenizer.json, not numbers and lists kept again in the script."""
    script = SCRIPT.read_text(encoding="utf-8")
    assert "model_max_length" in script and "added_tokens" in script
    assert not re.search(r"MAX_POSITIONS\s*=\s*\d+", script)
    assert not re.search(r'\[\s*"\[PAD\]"\s*,\s*"\[UNK\]"', script)
