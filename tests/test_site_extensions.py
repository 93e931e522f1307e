"""The site's own Sphinx extensions in book/_ext, on small pieces of HTML (no build, no browser):
the list of recall widgets for the progress page, and the accessibility fixes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import aria_fixes  # noqa: E402
import progress_items  # noqa: E402

from mlm_lib.book import recall  # noqa: E402


def test_page_items_lists_every_widget_in_order():
    html = "".join([
        recall.true_or_false("BERT reads left to right.", False, "Both sides.", item="TF1").html,
        recall.reveal("What is $M$?", "The masked positions.").html,
        recall.spot_the_error("The loss sums over every position.", "Only the masked ones.",
                              item="SE1").html,
        recall.reveal("And $V$?", "The vocabulary.").html,
    ])
    items = progress_items.page_items(html, "notebooks/01_words.html", "Words and symbols")
    assert [(it["id"], it["kind"]) for it in items] == [
        ("TF1", "tf"),
        ("notebooks/01_words.html#1", "reveal"),  # unnamed: page and place, as recall-score.js
        ("SE1", "spot"),
        ("notebooks/01_words.html#2", "reveal"),
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


def test_template_overrides_exist():
    for name in ("search-button-field.html", "theme-switcher.html"):
        text = (aria_fixes.TEMPLATES / name).read_text(encoding="utf-8")
        assert "<button" in text, name
    assert 'aria-label="{{ _(\'Search\') }}"' not in (aria_fixes.TEMPLATES / "search-button-field.html").read_text()
