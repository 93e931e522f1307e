"""Accessibility fixes to the HTML that Sphinx and docutils write (found by the site's axe test).

The bibliography: docutils writes a citation list as ``<div role="list">`` holding one
``<div class="citation" role="doc-biblioentry">`` per entry. DPUB-ARIA 1.1 deprecated
``doc-biblioentry`` (it is no longer a kind of list item), so assistive technology meets a list
with no items in it: axe reports the deprecated role, and the list's missing children as a
critical error. Each entry becomes what it is, a plain ``listitem``; the list, the entries' ids
and the back-links stay as they are.

A code cell folded with a ``hide-`` tag: myst-nb writes its toggle as ``<summary
aria-label="Toggle hidden content">`` around the visible words "Show code cell content", so a
screen reader announces a name that is not what the reader sees (WCAG 2.5.3, label in name). The
aria-label goes; the summary's name is then its visible text.

Both are fixed in each page's rendered body (``html-page-context``), which needs no copy of
docutils' or myst-nb's HTML writers and leaves pages without citations or folded cells as they are.

The sidebar's table of contents: pydata-sphinx-theme folds a chapter's sub-pages under a
``<summary>`` holding only a chevron (``role="presentation"``), a control with no name. Each gets
``aria-label="Sections of <the chapter's title>"``, added to what the theme's
``generate_toctree_html`` returns.

The theme's search button and light/dark switch: their accessible names left out text the button
shows or reads out (WCAG 2.5.3, label in name). ``book/_templates`` holds the theme's two
templates with that corrected, and is put ahead of the theme's own templates here.
"""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "_templates"

# a role attribute with a deprecated value -> the role that replaces it
_DEPRECATED_ROLES = {
    "doc-biblioentry": "listitem",
    "doc-endnote": "listitem",
}
_ROLE = re.compile(r'(<(?:div|li)\b[^>]*?\brole=")(%s)(")' % "|".join(_DEPRECATED_ROLES))


_HIDDEN_CELL_TOGGLE = '<summary aria-label="Toggle hidden content">'


def replace_deprecated_roles(body: str) -> str:
    """``body`` with each deprecated ARIA role replaced by its current equivalent."""
    return _ROLE.sub(lambda m: m.group(1) + _DEPRECATED_ROLES[m.group(2)] + m.group(3), body)


def name_by_visible_text(body: str) -> str:
    """``body`` with the hidden-cell toggles named by the words they show."""
    return body.replace(_HIDDEN_CELL_TOGGLE, "<summary>")


# a sidebar link to a page with sub-pages, then the unnamed toggle that folds them
_SECTION_TOGGLE = re.compile(r'(<a class="[^"]*\breference internal\b[^"]*" href="[^"]*">)([^<]+)'
                             r'(</a>\s*<details\b[^>]*>\s*)<summary>')


def name_section_toggles(html: str) -> str:
    """``html`` with each sidebar toggle that folds a page's sub-pages named after that page."""
    return _SECTION_TOGGLE.sub(
        lambda m: f'{m.group(1)}{m.group(2)}{m.group(3)}<summary aria-label="Sections of '
                  f'{m.group(2).strip()}">', html)


def _fix_page(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body:
        context["body"] = name_by_visible_text(replace_deprecated_roles(body))
    toctree = context.get("generate_toctree_html")
    if toctree is not None:
        context["generate_toctree_html"] = lambda *args, **kwargs: name_section_toggles(
            str(toctree(*args, **kwargs)))


def _add_templates(app, config) -> None:
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.insert(0, str(TEMPLATES))


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("config-inited", _add_templates)
    app.connect("html-page-context", _fix_page, priority=900)  # after the theme adds its functions
    return {"parallel_read_safe": True, "parallel_write_safe": True}
