"""The site's own Sphinx extensions in book/_ext, on small pieces of HTML (no build, no browser):
the list of recall widgets for the progress page, the accessibility fixes, the scripts each page
loads."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import aria_fixes
import offline_site
import progress_items
import yaml

from mlm_lib.book import recall

ROOT = Path(__file__).resolve().parents[2]


def test_page_items_lists_every_widget_in_order():
    html = "".join([
        recall.true_or_false("BERT reads left to right.", False, "Both sides.", item="TF1").html,
        recall.reveal("What is $M$?", "The masked positions.").html,
        recall.spot_the_error("The loss sums over every position.", "Only the masked ones.",
                              item="SE1").html,
        recall.reveal("And $V$?", "The vocabulary.").html,
    ])
    items = progress_items.page_items(html, "notebooks/01_words.html", "Words and symbols")
    assert [(it["id"], it["kind"], it["choices"]) for it in items] == [
        ("TF1", "true-or-false", True),
        ("notebooks/01_words.html#1", "reveal", False),  # unnamed: page and place, as recall-score.js
        ("SE1", "spot-the-error", False),
        ("notebooks/01_words.html#2", "reveal", False),
    ]
    assert {it["chapter"] for it in items} == {"Words and symbols"}
    assert {it["url"] for it in items} == {"notebooks/01_words.html"}


def test_page_items_ignores_other_recall_classes():
    # the choices inside a widget and the score box carry recall-* classes, not "recall"
    html = ('<div class="recall-score">x</div><details class="recall-choice" data-choice="true">'
            '</details><p class="recall">no data-recall</p>')
    assert progress_items.page_items(html, "p.html", "P") == []


BIBLIOGRAPHY = (
    '<div role="list" class="citation-list">\n'
    '<div class="citation" id="id13" role="doc-biblioentry">\n'
    '<span class="label">[CLLM20]</span>\n<p>Clark et al. URL: <a class="reference external" '
    'href="https://arxiv.org/abs/2003.10555">https://arxiv.org/abs/2003.10555</a>.</p>\n</div>\n'
    '</div>'
)


def test_bibliography_entries_become_list_items():
    fixed = aria_fixes.replace_deprecated_roles(BIBLIOGRAPHY)
    assert 'role="doc-biblioentry"' not in fixed
    assert '<div class="citation" id="id13" role="listitem">' in fixed
    assert fixed == BIBLIOGRAPHY.replace("doc-biblioentry", "listitem")  # the rest is untouched


def test_hidden_cell_toggle_is_named_by_its_text():
    body = ('<details class="hide above-input"><summary aria-label="Toggle hidden content">\n'
            '<p class="collapsed admonition-title">Show code cell content</p></summary></details>')
    fixed = aria_fixes.name_by_visible_text(body)
    assert "aria-label" not in fixed and "<summary>\n<p" in fixed


def test_a_sidebar_toggle_is_named_after_its_page():
    toc = ('<li class="toctree-l1 has-children"><a class="reference internal" href="07_inside_bert.html">'
           'Inside BERT</a><details><summary><span class="toctree-toggle" role="presentation"><i></i>'
           '</span></summary><ul><li class="toctree-l2"><a class="reference internal" '
           'href="07_the_layer.html">The layer</a></li></ul></details></li>'
           '<li class="toctree-l1"><a class="reference internal" href="08.html">Both</a></li>')
    fixed = aria_fixes.name_section_toggles(toc)
    assert fixed.count("<summary") == 1 and '<summary aria-label="Sections of Inside BERT">' in fixed
    assert fixed.replace(' aria-label="Sections of Inside BERT"', "") == toc
    current = toc.replace('class="reference internal" href="07_inside_bert.html"',
                          'class="current reference internal" href="#"').replace("<details>", '<details open="open">')
    assert 'aria-label="Sections of Inside BERT"' in aria_fixes.name_section_toggles(current)


def test_template_overrides_exist():
    for name in ("search-button-field.html", "theme-switcher.html"):
        text = (aria_fixes.TEMPLATES / name).read_text(encoding="utf-8")
        assert "<button" in text, name
    assert 'aria-label="{{ _(\'Search\') }}"' not in (aria_fixes.TEMPLATES / "search-button-field.html").read_text()


def test_a_widget_says_its_kind_and_whether_it_has_choices():
    # progress_items.py and the site's scripts read these two attributes, never a kind's name
    for kind in recall.KINDS.values():
        entry, = progress_items.page_items(_widget_of(kind), "p.html", "P")
        assert (entry["kind"], entry["choices"]) == (kind.name, kind.choices)


def _widget_of(kind: recall.Kind) -> str:
    args = {"question": "q", "answer": "a", "statement": "s", "why": "w", "error": "e",
            "options": [{"text": "t", "correct": True, "why": "w"}, {"text": "u", "correct": False, "why": "w"}]}
    if kind is recall.TRUE_OR_FALSE:
        args["answer"] = False
    return kind.widget(*(args[f] for f in kind.fields), item="X1").html


def test_thebe_and_repeated_scripts_are_dropped():
    script = lambda filename, body="": SimpleNamespace(filename=filename, attributes={"body": body})  # noqa: E731
    scripts = [script("_static/sphinx-thebe.js"), script("", "const THEBE_JS_URL = 'x'"),
               script("require.js"), script("", "x = 1"), script("", "x = 1"), script("require.js")]
    context = {"script_files": scripts}
    offline_site._drop_thebe_and_duplicates(None, "p", "page.html", context, None)
    assert context["script_files"] == [scripts[2], scripts[3]]


def test_extensions_use_public_sphinx_api_only():
    for path in sorted((ROOT / "book" / "_ext").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("sphinx", "docutils"):
                private = [p for p in node.module.split(".") + [a.name for a in node.names] if p.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def test_every_site_script_is_loaded_and_the_embed_setup_comes_before_the_manager():
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"]
    widgets = list(config["nb_ipywidgets_js"])
    assert widgets == ["require.js", "widget-embed.js", "embed-amd.js"]
    loaded = set(config["html_js_files"]) | set(widgets)
    assert {p.name for p in (ROOT / "book" / "static").glob("*.js")} <= loaded


def test_an_output_link_to_a_chapter_notebook_goes_to_its_page():
    import chapter_links

    body = ("<a href='07_inside_bert.ipynb'>7</a> <a href=\"12_fine_tuning.ipynb#five-seeds\">12</a> "
            "<a href='../_sources/notebooks/00_how_to_read.ipynb'>src</a> "
            "<a href='https://colab.research.google.com/x/notebooks/01_words_and_symbols.ipynb'>c</a>")
    assert chapter_links.to_pages(body) == (
        "<a href='07_inside_bert.html'>7</a> <a href=\"12_fine_tuning.html#five-seeds\">12</a> "
        "<a href='../_sources/notebooks/00_how_to_read.ipynb'>src</a> "
        "<a href='https://colab.research.google.com/x/notebooks/01_words_and_symbols.ipynb'>c</a>")
