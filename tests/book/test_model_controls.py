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
