"""Keep the site's console clean and its pages free of CDN scripts.

Jupyter Book 1 always loads sphinx-thebe, even with Thebe off, and includes its inline settings
script twice (``const THEBE_JS_URL`` declared twice is a console error, and the URL points to a
CDN). The book uses launch buttons (Binder, Colab) instead of Thebe, so both Thebe scripts are
dropped from every page, and any other script included twice is kept once.

(What the ipywidgets embed manager needs on the site is ``book/static/widget-embed.js``, loaded
through ``nb_ipywidgets_js`` in ``_config.yml``.)
"""

from __future__ import annotations


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
        if (name, body) not in seen:
            seen.add((name, body))
            kept.append(script)
    context["script_files"] = kept


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("html-page-context", _drop_thebe_and_duplicates, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
