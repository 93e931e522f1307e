"""Recall widgets: the book's self-test device.

A recall widget asks a question that hides a trap and lets the reader commit to an answer before
the reveal. Three kinds:

- :func:`reveal`          a question, then its answer;
- :func:`true_or_false`   a statement; the reader picks True or False and only then learns whether
                          they were right, with the justification;
- :func:`spot_the_error`  a wrong statement; the reader names the error, then reveals it.

Why plain HTML ``<details>``/``<summary>`` and no JavaScript: a widget must work in three places --
the published static site, a running JupyterLab, and a notebook reopened without running it.
JupyterLab's sanitizer strips scripts and event handlers from outputs it did not just compute, so
anything that needs JavaScript goes blank there. ``<details>`` needs none, is keyboard-operable
(Tab to a summary, Enter or Space to open it) and is announced by screen readers.

The output is a pure function of the arguments (no random ids), so nbval can compare it from run
to run. All text is HTML-escaped; ``$...$`` math becomes ``\\(...\\)``, which both MathJax on the
site and JupyterLab's renderer typeset; ```code```, ``*emphasis*`` and ``**bold**`` are the only
markup.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

__all__ = ["Recall", "reveal", "true_or_false", "spot_the_error", "render_text"]

# Colours are translucent greys and currentColor, so the same markup reads well on light and dark
# backgrounds; the site's stylesheet (book/static/recall.css) refines them per theme.
_BOX = (
    "border:1px solid rgba(127,127,127,0.45);border-left:4px solid rgba(80,120,220,0.85);"
    "border-radius:6px;padding:0.6em 0.9em;margin:0.8em 0;background:rgba(127,127,127,0.07)"
)
_SUMMARY = "cursor:pointer;font-weight:600;padding:0.15em 0"
_CHOICE = (
    "display:inline-block;vertical-align:top;min-width:9em;margin:0.3em 0.6em 0.3em 0;"
    "border:1px solid rgba(127,127,127,0.45);border-radius:4px;padding:0.2em 0.6em"
)
# The verdict of a true-or-false choice: a green and a red dark enough for a light background and
# bright enough for a dark one.
_RIGHT_COLOUR = "#2f9e5a"
_WRONG_COLOUR = "#d2463b"
_TAG = (
    "font-size:0.75em;font-weight:600;letter-spacing:0.04em;text-transform:uppercase;"
    "opacity:0.75;margin-right:0.5em"
)

_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")


def render_text(text: str) -> str:
    """Escape ``text`` for HTML, then turn ``$..$``/``$$..$$`` into MathJax delimiters, ```code```
    into ``<code>`` and ``*x*``/``**x**`` into emphasis. Math is escaped too (``x < y`` stays text)
    but keeps its TeX."""
    out: list[str] = []
    pos = 0
    for m in _MATH.finditer(text):
        out.append(_render_plain(text[pos : m.start()]))
        if m.group(1) is not None:
            out.append(r"\[" + html.escape(m.group(1), quote=False) + r"\]")
        else:
            out.append(r"\(" + html.escape(m.group(2), quote=False) + r"\)")
        pos = m.end()
    out.append(_render_plain(text[pos:]))
    return "".join(out)


def _render_plain(text: str) -> str:
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out.append(_emphasis(html.escape(text[pos : m.start()], quote=False)))
        out.append("<code>" + html.escape(m.group(1), quote=False) + "</code>")
        pos = m.end()
    out.append(_emphasis(html.escape(text[pos:], quote=False)))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    escaped = _BOLD.sub(r"<strong>\1</strong>", escaped)
    return _ITALIC.sub(r"<em>\1</em>", escaped)


def _check_text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{field} is empty: a recall widget needs a non-empty {field}")
    return value.strip()


def _rendered(value: object, field: str) -> str:
    """A widget's text argument, checked (a non-empty string) and rendered as HTML."""
    return render_text(_check_text(value, field))


def _check_item(item: str | None) -> str | None:
    if item is None:
        return None
    if not isinstance(item, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", item):
        raise ValueError(f"item must be a short id such as 'TF4', got {item!r}")
    return item


@dataclass(frozen=True)
class Recall:
    """A rendered recall widget. Displays itself in notebooks (``_repr_html_``); ``str()`` gives the
    same HTML, for prose pages."""

    kind: str
    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def __repr__(self) -> str:  # short, so a notebook's text/plain output stays readable
        return f"Recall(kind={self.kind!r})"


def _frame(kind: str, label: str, item: str | None, body: str) -> Recall:
    """The box around every widget: a small tag naming its kind (and item id), then ``body``."""
    item = _check_item(item)
    data_item = f' data-item="{item}"' if item else ""
    tag = f'<span class="recall-tag" style="{_TAG}">{label}{" · " + item if item else ""}</span>'
    markup = (
        f'<div class="recall recall-{kind} tex2jax_process" data-recall="{kind}"{data_item}'
        f' style="{_BOX}">{tag}{body}</div>'
    )
    return Recall(kind=kind, html=markup)


def _hidden_answer(summary: str, answer: str) -> str:
    """``answer`` (HTML) in a closed ``<details>``: it stays hidden until the reader opens
    ``summary``."""
    return (
        f'<details class="recall-details"><summary style="{_SUMMARY}">{summary}</summary>'
        f'<div class="recall-answer">{answer}</div></details>'
    )


def reveal(question: str, answer: str, *, item: str | None = None) -> Recall:
    """A question the reader answers in their head, then opens to check."""
    q = _rendered(question, "question")
    a = _rendered(answer, "answer")
    body = f'<div class="recall-question">{q}</div>' + _hidden_answer("Show the answer", a)
    return _frame("reveal", "Recall", item, body)


def true_or_false(statement: str, answer: bool, why: str, *, item: str | None = None) -> Recall:
    """A statement to judge. The reader commits by opening *True* or *False*; each choice tells
    them whether they were right, then gives the justification."""
    if not isinstance(answer, bool):
        raise ValueError(
            f"answer must be True or False (a bool), got {answer!r} of type {type(answer).__name__}"
        )
    s = _rendered(statement, "statement")
    w = _rendered(why, "why")
    truth = "true" if answer else "false"
    choices = []
    for choice in (True, False):
        right = choice == answer
        verdict = (
            f'<strong class="recall-verdict recall-right" style="color:{_RIGHT_COLOUR}">'
            f"Right: it is {truth}.</strong>"
            if right
            else f'<strong class="recall-verdict recall-wrong" style="color:{_WRONG_COLOUR}">'
            f"Not quite: it is {truth}.</strong>"
        )
        choices.append(
            f'<details class="recall-choice" data-choice="{str(choice).lower()}"'
            f' data-correct="{str(right).lower()}" style="{_CHOICE}">'
            f'<summary style="{_SUMMARY}">{choice}</summary>'
            f'<div class="recall-answer">{verdict} {w}</div></details>'
        )
    body = (
        f'<div class="recall-question">{s}</div>'
        '<div class="recall-prompt" style="opacity:0.8;font-size:0.9em">'
        "Commit first: open the one you believe.</div>" + "".join(choices)
    )
    return _frame("tf", "True or false", item, body)


def spot_the_error(statement: str, error: str, *, item: str | None = None) -> Recall:
    """A statement with a mistake in it. The reader names the mistake, then reveals it."""
    s = _rendered(statement, "statement")
    e = _rendered(error, "error")
    body = (
        f'<blockquote class="recall-question" style="margin:0.4em 0;font-style:italic">'
        f"{s}</blockquote>" + _hidden_answer("Name the error, then reveal", e)
    )
    return _frame("spot", "Spot the error", item, body)
