"""A ``{recall}`` directive, so prose pages can carry the same recall widgets as notebooks.

Usage in MyST markdown::

    ```{recall} true-or-false
    :answer: false
    :item: TF1
    BERT generates text left to right, like GPT.
    ---
    It fills blanks using both sides of the context ...
    ```

Kinds: ``reveal`` (question --- answer), ``true-or-false`` (statement --- why, with ``:answer:``),
``spot-the-error`` (statement --- error). The HTML comes from :mod:`mlm_lib.recall`, so a widget
looks and behaves the same on a page and in a notebook.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive, directives

from mlm_lib import recall

_BOOL = {"true": True, "false": False}


class RecallDirective(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"answer": directives.unchanged, "item": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        kind = self.arguments[0].strip().lower()
        text = "\n".join(self.content)
        parts = [p.strip() for p in text.split("\n---\n")]
        if len(parts) != 2:
            raise self.error(f"recall: expected two parts separated by a '---' line, got {len(parts)}")
        first, second = parts
        item = self.options.get("item")
        try:
            if kind == "reveal":
                widget = recall.reveal(first, second, item=item)
            elif kind == "true-or-false":
                answer = _BOOL.get(str(self.options.get("answer", "")).strip().lower())
                if answer is None:
                    raise ValueError("true-or-false needs ':answer: true' or ':answer: false'")
                widget = recall.true_or_false(first, answer, second, item=item)
            elif kind == "spot-the-error":
                widget = recall.spot_the_error(first, second, item=item)
            else:
                raise ValueError(f"unknown recall kind {kind!r}: use reveal, true-or-false or spot-the-error")
        except ValueError as exc:
            raise self.error(f"recall: {exc}") from exc
        return [nodes.raw("", widget.html, format="html")]


def setup(app):  # noqa: D103 - Sphinx entry point
    app.add_directive("recall", RecallDirective)
    app.add_css_file("recall.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
