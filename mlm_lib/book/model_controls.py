"""Controls that ask the book's model, answered in the reader's browser on the book's site.

``model_control(kind, **settings)`` shows one: on the site ``book/static/bert-live.js`` builds it
and runs the book's model with onnxruntime-web (``mlm_lib.book.browser_model`` exports it with the
site), so it answers with no kernel. A notebook cannot run the site's script, so there the output
is one line of text and the chapter's kernel control in the same cell does the work; on the site
that kernel control is hidden. The kinds are the ones ``bert-live.js`` knows.
"""

from __future__ import annotations

import html
import json
from typing import Any

from IPython.display import display

# kind -> the settings it takes (all optional); bert-live.js has one renderer per kind
KINDS = {
    "blank": {"text", "chosen", "temperature"},   # chapters 1, 2, 5: click tokens into M
    "corrupt": {"text", "rate"},                  # chapter 6: 80/10/10 at a seed you move
    "attention": {"text", "layer", "head"},       # chapter 7: any layer and head
    "masks": {"text"},                            # chapter 8: both sides against the left only
    "generate": {"text", "length", "way", "rounds"},  # chapter 8: left to right, or refilling
    "wordpiece": {"text"},                        # chapter 9: WordPiece on your words
    "fill-mask": {"text", "answer"},              # chapter 10: fill-mask and a word's rank
    "nsp": {"pairs", "a", "b"},                   # chapter 11: the NSP head on a pair (chapter_models)
    "classify": {"text", "models"},               # chapter 12: the classifiers (chapter_models)
}
NOTEBOOK_TEXT = ("On the book's site this control runs its model in your browser; "
                 "in a notebook, use the controls below it.")


def control_html(kind: str, **settings: Any) -> str:
    """The markup of one control: a hidden container and its settings as inert JSON."""
    if kind not in KINDS:
        raise ValueError(f"unknown model control {kind!r}; choose one of {sorted(KINDS)}")
    unknown = set(settings) - KINDS[kind]
    if unknown:
        raise ValueError(f"model control {kind!r} takes {sorted(KINDS[kind])}, not {sorted(unknown)}")
    spec = json.dumps(settings, sort_keys=True).replace("</", "<\\/")
    return (f'<div class="bert-live" data-kind="{kind}" hidden>'
            f'<script type="application/json" class="bert-live-spec">{spec}</script>'
            f'<p>{html.escape(NOTEBOOK_TEXT)}</p></div>')


def model_control(kind: str, **settings: Any) -> None:
    """Display the control of ``kind`` (see :data:`KINDS`) with its starting ``settings``."""
    display({"text/html": control_html(kind, **settings), "text/plain": NOTEBOOK_TEXT}, raw=True)
