"""The list of every recall widget on the site, for the progress page.

The progress page (``book/progress.md``) counts, chapter by chapter, how many of the book's recall
widgets the reader has answered. The answers live in the reader's browser (``recall-score.js``);
the list of widgets is made here, once the site is built: every page is read back in the order of
the table of contents, and each recall widget found in it (``<div class="recall" data-recall=...
data-choices=... data-item=...>``, the markup :mod:`mlm_lib.book.recall` writes) becomes one
entry, its kind and whether it has choices as the widget says::

    {"id": "TF9", "chapter": "8. Both directions", "url": "notebooks/08_both_directions.html",
     "kind": "true-or-false", "choices": true}

Reading the built pages rather than the sources means the list is right whatever produced the
widgets (a notebook output, the ``{recall}`` directive, a generated page). A widget without an
item id is named by its page and its place among the page's unnamed widgets
(``notebooks/10_pretraining.html#2``), the same name ``recall-score.js`` gives it.

The list is written as ``_static/progress-items.js``: one JSON array assigned to
``window.recallItems``. A script rather than a ``.json`` file, because browsers refuse ``fetch``
on a page opened from disk, and the site is meant to work offline.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

OUTPUT = "progress-items.js"


class _RecallFinder(HTMLParser):
    """Collects ``(kind, choices, item)`` for every element whose classes include ``recall``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, bool, str | None]] = []

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if "recall" in (a.get("class") or "").split() and a.get("data-recall"):
            self.found.append((a["data-recall"], a.get("data-choices") == "true", a.get("data-item")))


def _toc_order(env, root: str) -> list[str]:
    """Every document reachable from ``root`` through the table of contents, in reading order."""
    seen: list[str] = []

    def walk(doc: str) -> None:
        if doc in seen:
            return
        seen.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return seen


def page_items(html: str, url: str, chapter: str) -> list[dict]:
    """The recall widgets of one built page, as entries of the list."""
    finder = _RecallFinder()
    finder.feed(html)
    items, unnamed = [], 0
    for kind, choices, item in finder.found:
        if not item:
            unnamed += 1
            item = f"{url}#{unnamed}"
        items.append({"id": item, "chapter": chapter, "url": url, "kind": kind, "choices": choices})
    return items


def _write_items(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    env = app.env
    items: list[dict] = []
    for doc in _toc_order(env, app.config.root_doc):
        page = Path(app.builder.get_outfilename(doc))
        if not page.is_file():
            continue
        title = env.titles[doc].astext() if doc in env.titles else doc
        url = app.builder.get_target_uri(doc)
        items.extend(page_items(page.read_text(encoding="utf-8"), url, title))
    static = Path(app.outdir) / "_static"
    static.mkdir(exist_ok=True)
    body = json.dumps(items, ensure_ascii=False, indent=0)
    (static / OUTPUT).write_text(f"window.recallItems = {body};\n", encoding="utf-8")


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("build-finished", _write_items)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
