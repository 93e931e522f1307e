"""Keep the site self-contained and its console clean.

Jupyter Book 1 always loads sphinx-thebe, even with Thebe off, and includes its inline settings
script twice (``const THEBE_JS_URL`` declared twice is a console error, and the URL points to a
CDN). The book uses launch buttons (Binder, Colab) instead of Thebe, so both Thebe scripts are
dropped from every page, and any other script included twice is kept once.

The ipywidgets embed manager (served from ``_static``) finds its icon fonts relative to the URL
require.js gives its module; on a page in a sub-folder that URL is wrong, so a one-line require.js
setting points the module at ``_static`` of the site's root. It also calls MathJax 2's API, which a
small shim maps onto the site's MathJax 3.
"""

from __future__ import annotations

from sphinx.builders.html._assets import _JavaScript

_WIDGET_PATHS = (
    "require.config({paths: {'@jupyter-widgets/html-manager/dist': new URL('_static', "
    "new URL(document.documentElement.dataset.content_root || './', document.baseURI)).href}});"
    # The embed manager typesets widget labels with MathJax 2's Hub.Queue; the site runs MathJax 3.
    "document.addEventListener('DOMContentLoaded', function () {"
    " if (window.MathJax && !window.MathJax.Hub) { window.MathJax.Hub = {Queue: function (job) {"
    " var el = Array.isArray(job) ? job[2] : undefined;"
    " if (window.MathJax.typesetPromise) { window.MathJax.typesetPromise(el ? [el] : undefined); }"
    " }}; } });"
)


def _drop_thebe_and_duplicates(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    kept, seen = [], set()
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body", "")
        name = str(getattr(script, "filename", script) or "")
        if "THEBE_JS_URL" in body or "sphinx-thebe" in name:
            continue
        key = (name, body)
        if key in seen:
            continue
        seen.add(key)
        if name.split("?")[0].endswith("embed-amd.js"):
            kept.append(_JavaScript("", body=_WIDGET_PATHS))
        kept.append(script)
    context["script_files"] = kept


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("html-page-context", _drop_thebe_and_duplicates, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
