"""Links from a chapter's output to another chapter: the output names the notebook
(``07_inside_bert.ipynb``), which JupyterLab opens; on the site the link goes to the chapter's page.

Markdown links to notebooks are rewritten by Sphinx, but a cell's HTML output is copied as it is.
The map of the book (chapter 0, ``mlm_lib.book.game_map.game_map``) links every chapter that way.
Relative links to a chapter's ``.ipynb``, with or without an anchor, become ``.html`` in each page's
rendered body (``html-page-context``); links with a scheme or a path (the launch buttons, the
download of the source) are left alone.
"""

from __future__ import annotations

import re

_CHAPTER_LINK = re.compile(r"""(\bhref=)(["'])(\d\d_\w+)\.ipynb(#[^"']*)?\2""")


def to_pages(body: str) -> str:
    return _CHAPTER_LINK.sub(lambda m: f"{m[1]}{m[2]}{m[3]}.html{m[4] or ''}{m[2]}", body)


def _fix_page(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = to_pages(context["body"])


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("html-page-context", _fix_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
