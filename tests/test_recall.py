"""The recall widgets: the three kinds, escaping, math, stable output, clear errors."""

import re

import pytest

from mlm_lib import recall
from mlm_lib.recall import reveal, spot_the_error, true_or_false


def test_reveal_hides_answer_in_details():
    w = reveal("Why?", "Because.")
    assert w.kind == "reveal"
    html = w._repr_html_()
    assert re.search(r"<details[^>]*>\s*<summary[^>]*>[^<]+</summary>.*Because\.", html, re.S)
    # the question sits outside the <details>, the answer inside
    assert html.index("Why?") < html.index("<details")
    assert html.index("Because.") > html.index("<details")


def test_true_or_false_commit_then_verdict():
    html = true_or_false("BERT generates left to right.", False, "It fills blanks.").html
    choices = re.findall(r'<details class="recall-choice" data-choice="(\w+)" data-correct="(\w+)"', html)
    assert choices == [("true", "false"), ("false", "true")]
    true_part, false_part = html.split('data-choice="false"')
    assert "Not quite: it is false." in true_part and "Right: it is false." in false_part
    assert html.count("It fills blanks.") == 2  # the justification follows either choice


def test_spot_the_error():
    html = spot_the_error("Logs make numbers bigger.", "Logs turn products into sums.").html
    assert "Spot the error" in html and "Logs turn products into sums." in html


@pytest.mark.parametrize("evil", ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">'])
def test_text_is_escaped(evil):
    for w in (reveal(evil, evil), true_or_false(evil, True, evil), spot_the_error(evil, evil)):
        assert "<script" not in w.html and "<img" not in w.html
        assert "&lt;script&gt;" in w.html or "&lt;img" in w.html


def test_math_becomes_mathjax_delimiters_and_stays_escaped():
    html = reveal("Is $x_i < y$ and $$\\sum_i a_i$$?", "Yes.").html
    assert r"\(x_i &lt; y\)" in html
    assert r"\[\sum_i a_i\]" in html
    assert "$" not in html
    assert "tex2jax_process" in html  # the site's MathJax only typesets marked HTML


def test_code_spans():
    assert "<code>[MASK]</code>" in reveal("What is `[MASK]`?", "A token.").html


def test_output_is_stable_and_has_no_script():
    a = true_or_false("Same?", True, "Yes.", item="TF4").html
    b = true_or_false("Same?", True, "Yes.", item="TF4").html
    assert a == b
    assert "<script" not in a and "onclick" not in a and " id=" not in a
    assert 'data-item="TF4"' in a


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: reveal("", "a"), "question is empty"),
        (lambda: reveal("   ", "a"), "question is empty"),
        (lambda: reveal("q", ""), "answer is empty"),
        (lambda: true_or_false("s", "false", "why"), "answer must be True or False"),
        (lambda: true_or_false("s", 1, "why"), "answer must be True or False"),
        (lambda: true_or_false("s", None, "why"), "answer must be True or False"),
        (lambda: spot_the_error("s", "  "), "error is empty"),
        (lambda: reveal(3, "a"), "question must be a string"),
        (lambda: reveal("q", "a", item="has space"), "item must be a short id"),
    ],
)
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_repr_is_short():
    assert repr(reveal("q", "a")) == "Recall(kind='reveal')"
    assert recall.render_text("a < b") == "a &lt; b"


def test_emphasis_and_code_do_not_leak_into_each_other():
    out = recall.render_text("a *word*, **strong**, `a*b*c` and 2 * 3 * 4")
    assert "<em>word</em>" in out and "<strong>strong</strong>" in out
    assert "<code>a*b*c</code>" in out and "2 * 3 * 4" in out
