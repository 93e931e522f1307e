"""Recall widgets: the book's self-test device.

A recall widget asks a question that hides a trap and lets the reader commit to an answer before
the reveal. Four kinds:

- :func:`reveal`           a question, then its answer;
- :func:`true_or_false`    a statement; the reader picks True or False and only then learns whether
                           they were right, with the justification;
- :func:`spot_the_error`   a wrong statement; the reader names the error, then reveals it;
- :func:`multiple_choice`  a question and options; the reader opens the one they believe, and
                           every option says why it is right or wrong.

Every item of the book is written once, as data: ``mlm_lib/book/assets/recall/NN_<chapter>.yml`` (one
file per chapter) and ``gym.yml`` (the gym page's own wording), each a mapping from an id to an
item, and a chapter shows one with ``recall("TF9")``. Why data and not a call in the chapter: the
chapter's source would otherwise print the answer right above the widget that hides it. The format::

    TF9:
      kind: true-or-false
      statement: ...
      answer: false
      why: ...
    W3:
      kind: multiple-choice
      question: ...
      options:
        - {text: ..., correct: false, why: ...}
        - {text: ..., correct: true, why: ...}

The fields of each kind: ``reveal`` question, answer; ``true-or-false`` statement, answer (true or
false), why; ``spot-the-error`` statement, error; ``multiple-choice`` question, options (at least
two, at least one correct; several may be). A kind's name is its one identifier: the data files,
the widget's ``data-recall`` attribute, the Anki deck's tags and the site's scripts all use it
(:data:`KINDS`). The widget also says whether its kind has choices (``data-choices``), so that
the site's scripts count choices without naming any kind.

Any item may also say where its numbers come from, for the test that every number in an item is
one a chapter printed (``tests/content/test_prose_numbers.py``): ``given`` lists numbers the question
itself sets (a hypothetical probability); ``worked`` maps a number to the arithmetic that gives it
(a Python expression over ``math``, checked here to round to the number as written);
``cited`` maps a key of ``book/references.bib`` to the numbers quoted from that source; and
``printed_in`` names other chapters (``10_pretraining``) whose outputs print its numbers.

An id is unique across all the files: a question-bank id (``TF9``), ``<bank id>.gym`` for the
gym's wording, or a short id of its own (``Q5.1``). A number the chapter computes goes into the text
as ``{{name}}`` or ``{{name:.0%}}`` (a format spec) and the chapter passes it:
``recall("E9", acc_pre=acc_pre)``.

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

import difflib
import hashlib
import html
import math
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "Recall", "recall", "reveal", "true_or_false", "spot_the_error", "multiple_choice",
    "render_text", "load_items", "check", "render", "Item", "Kind", "KINDS", "REVEAL",
    "TRUE_OR_FALSE", "SPOT_THE_ERROR", "MULTIPLE_CHOICE", "PLACEHOLDER", "ITEMS_DIR",
]

# Optional fields of every kind: where an item's numbers come from (see the module docstring).
PROVENANCE_FIELDS = ("given", "worked", "cited", "printed_in")

# Where the items live: package data, so that a chapter run on Colab from a pip-installed mlm_lib
# finds them.
ITEMS_DIR = Path(__file__).resolve().parent / "assets" / "recall"
# The chapter whose kernel this is, where its executor says so (``scripts/execute_notebooks.py``):
# its items are looked up in its own file first, so that what it shows is read from that file
# alone and an edit of another chapter's items leaves it current.
CHAPTER_ENV = "MLM_BOOK_CHAPTER"

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
# A multiple-choice option is a sentence, not a word: one option per line.
_OPTION = (
    "display:block;margin:0.3em 0;"
    "border:1px solid rgba(127,127,127,0.45);border-radius:4px;padding:0.2em 0.6em"
)
_PROMPT = (
    '<div class="recall-prompt" style="opacity:0.8;font-size:0.9em">'
    "Commit first: open the one you believe.</div>"
)
# The verdict of a true-or-false choice: a green and a red dark enough for a light background and
# bright enough for a dark one.
_RIGHT_COLOUR = "#2f9e5a"
_WRONG_COLOUR = "#d2463b"
_TAG = (
    "font-size:0.75em;font-weight:600;letter-spacing:0.04em;text-transform:uppercase;"
    "opacity:0.75;margin-right:0.5em"
)



@dataclass(frozen=True)
class Kind:
    """One kind of recall item. Its ``name`` is its only identifier: the ``kind`` field of a data
    file, the widget's ``data-recall`` attribute (which the site's scripts and the progress page
    read), and the kind's tag in the Anki deck."""

    name: str
    label: str  # the tag the widget shows
    fields: tuple[str, ...]  # an item's fields, in the order the widget function takes them
    choices: bool  # the reader commits to one choice, which is right or wrong (data-choices)

    def widget(self, *args: object, item: str | None = None) -> Recall:
        """The widget of this kind from its fields' values, in the order of ``fields``."""
        return _WIDGETS[self](*args, item=item)


REVEAL = Kind("reveal", "Recall", ("question", "answer"), choices=False)
TRUE_OR_FALSE = Kind("true-or-false", "True or false", ("statement", "answer", "why"), choices=True)
SPOT_THE_ERROR = Kind("spot-the-error", "Spot the error", ("statement", "error"), choices=False)
MULTIPLE_CHOICE = Kind("multiple-choice", "Multiple choice", ("question", "options"), choices=True)
KINDS: dict[str, Kind] = {k.name: k for k in (REVEAL, TRUE_OR_FALSE, SPOT_THE_ERROR, MULTIPLE_CHOICE)}

# A number the chapter passes in: ``{{name}}`` or ``{{name:spec}}`` (a format spec).
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*(?::([^{}]*))?\}\}")

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


def _frame(kind: Kind, item: str | None, body: str) -> Recall:
    """The box around every widget: a small tag naming its kind (and item id), then ``body``."""
    item = _check_item(item)
    data_item = f' data-item="{item}"' if item else ""
    # The gym's wording of an item (``TF9.gym``) is shown under its bank id: it is the same item.
    shown = item.removesuffix(".gym") if item else None
    tag = f'<span class="recall-tag" style="{_TAG}">{kind.label}{" · " + shown if shown else ""}</span>'
    markup = (
        f'<div class="recall recall-{kind.name} tex2jax_process" data-recall="{kind.name}"'
        f' data-choices="{str(kind.choices).lower()}"{data_item} style="{_BOX}">{tag}{body}</div>'
    )
    return Recall(kind=kind.name, html=markup)


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
    return _frame(REVEAL, item, body)


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
    body = f'<div class="recall-question">{s}</div>' + _PROMPT + "".join(choices)
    return _frame(TRUE_OR_FALSE, item, body)


def spot_the_error(statement: str, error: str, *, item: str | None = None) -> Recall:
    """A statement with a mistake in it. The reader names the mistake, then reveals it."""
    s = _rendered(statement, "statement")
    e = _rendered(error, "error")
    body = (
        f'<blockquote class="recall-question" style="margin:0.4em 0;font-style:italic">'
        f"{s}</blockquote>" + _hidden_answer("Name the error, then reveal", e)
    )
    return _frame(SPOT_THE_ERROR, item, body)


def multiple_choice(question: str, options: Sequence[Mapping], *, item: str | None = None) -> Recall:
    """A question with options, each a mapping ``{text, correct, why}``. The reader commits by
    opening one option; each says whether it is right and why, so a wrong guess still teaches.
    The markup is true-or-false's (``recall-choice``, ``data-choice``, ``data-correct``), so the
    site's score treats both kinds alike; ``data-choice`` is the option's index."""
    q = _rendered(question, "question")
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence) or len(options) < 2:
        raise ValueError("options must be a list of at least two options")
    choices = []
    for k, option in enumerate(options):
        if not isinstance(option, Mapping):
            raise ValueError(f"option {k + 1} must be a mapping with text, correct and why")
        unknown = set(option) - {"text", "correct", "why"}
        if unknown:
            raise ValueError(f"option {k + 1} has unknown field(s) {sorted(unknown)}: use text, correct, why")
        text = _rendered(option.get("text"), f"option {k + 1} text")
        why = _rendered(option.get("why"), f"option {k + 1} why")
        right = option.get("correct")
        if not isinstance(right, bool):
            raise ValueError(f"option {k + 1} correct must be true or false (a bool), got {right!r}")
        verdict = (
            f'<strong class="recall-verdict recall-right" style="color:{_RIGHT_COLOUR}">Right.</strong>'
            if right
            else f'<strong class="recall-verdict recall-wrong" style="color:{_WRONG_COLOUR}">'
            "Not quite.</strong>"
        )
        choices.append(
            f'<details class="recall-choice" data-choice="{k}" data-correct="{str(right).lower()}"'
            f' style="{_OPTION}"><summary style="{_SUMMARY}">{text}</summary>'
            f'<div class="recall-answer">{verdict} {why}</div></details>'
        )
    if not any(o.get("correct") is True for o in options):
        raise ValueError("no option is correct: mark at least one with correct: true")
    body = f'<div class="recall-question">{q}</div>' + _PROMPT + "".join(choices)
    return _frame(MULTIPLE_CHOICE, item, body)


# --- items as data ------------------------------------------------------------------------------

_WIDGETS = {REVEAL: reveal, TRUE_OR_FALSE: true_or_false, SPOT_THE_ERROR: spot_the_error,
            MULTIPLE_CHOICE: multiple_choice}


@dataclass(frozen=True)
class Item:
    """One recall item as written in its data file."""

    id: str
    file: str
    fields: Mapping

    @property
    def kind(self) -> str:
        return self.fields.get("kind", "")

    def placeholders(self) -> set[str]:
        """The names of the numbers the chapter passes in (``{{name}}`` in the texts)."""
        return {m.group(1) for text in _texts(self.fields) for m in PLACEHOLDER.finditer(text)}

    def shown_options(self) -> list:
        """The options in the order every place shows them (the widget, the gym, the Anki deck):
        shuffled by a seed taken from the item's id. Authors tend to write the right answer in the
        same place; a fixed, id-seeded order removes that hint and stays the same on every run."""
        options = list(self.fields.get("options") or [])
        seed = int.from_bytes(hashlib.sha256(self.id.encode()).digest()[:8], "big")
        random.Random(seed).shuffle(options)
        return options


def _texts(fields: Mapping) -> list[str]:
    out = [v for k, v in fields.items() if k != "kind" and isinstance(v, str)]
    for option in fields.get("options") or []:
        if isinstance(option, Mapping):
            out += [v for v in option.values() if isinstance(v, str)]
    return out


def _stamp(directory: Path) -> tuple:
    """The files and their modification times: the cache below reloads when an item is edited,
    without restarting the kernel."""
    return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in directory.glob("*.yml")))


@lru_cache(maxsize=64)
def _load_file(path: str, mtime_ns: int) -> dict[str, Item]:
    """The items of one data file (cached until it changes)."""
    import yaml  # here, so that importing the widget functions needs no YAML parser

    name = Path(path).name
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{name}: expected a mapping from ids to items")
    items: dict[str, Item] = {}
    for key, fields in data.items():
        item_id = str(key)
        _check_item(item_id)
        if not isinstance(fields, dict):
            raise ValueError(f"{name}: item {item_id} must be a mapping of fields, got {fields!r}")
        items[item_id] = Item(item_id, name, fields)
    return items


def _load(directory: str, stamp: tuple) -> dict[str, Item]:
    items: dict[str, Item] = {}
    for name, mtime_ns in stamp:
        for item_id, item in _load_file(str(Path(directory) / name), mtime_ns).items():
            if item_id in items:
                raise ValueError(f"item {item_id} is defined twice: in {items[item_id].file} and in {name}")
            items[item_id] = item
    return items


def load_items(directory: Path | str | None = None) -> dict[str, Item]:
    """Every item of the data files, by id (cached until a file changes)."""
    directory = Path(directory) if directory is not None else ITEMS_DIR
    return _load(str(directory), _stamp(directory))


def check(item: Item) -> None:
    """Raise a ValueError naming the file, the item and the field when ``item`` is malformed."""
    where = f"{item.file}: item {item.id}"
    kind = item.fields.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}: field 'kind' is {kind!r}; use one of {', '.join(KINDS)}")
    expected = KINDS[kind].fields
    for field in expected:
        if field not in item.fields:
            raise ValueError(f"{where}: field '{field}' is missing (a {kind} item needs {', '.join(expected)})")
    unknown = set(item.fields) - set(expected) - {"kind"} - set(PROVENANCE_FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} for a {kind} item "
                         f"(it takes {', '.join(expected)}, and optionally {', '.join(PROVENANCE_FIELDS)})")
    _check_provenance(item.fields, where)
    values = {name: 0 for name in item.placeholders()}
    try:
        _widget(item, values)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def worked_value(expression: str) -> float:
    """The value of a ``worked`` expression: arithmetic over ``math``, nothing else."""
    return float(eval(expression, {"__builtins__": {}, "math": math}))  # noqa: S307 - the book's own data


def rounds_to(value: float, written: str) -> bool:
    """Whether ``value`` rounds to ``written`` ("0.693", "85%", "4,828.3") at its precision."""
    digits = written.replace(",", "").strip()
    percent = digits.endswith("%")
    digits = digits.rstrip("%").strip()
    places = len(digits.split(".")[1]) if "." in digits else 0
    shown = value * 100 if percent else value
    return abs(shown - float(digits)) <= 0.5 * 10 ** -places + 1e-12


def _check_provenance(fields: Mapping, where: str) -> None:
    given, worked = fields.get("given", []), fields.get("worked", {})
    cited, printed_in = fields.get("cited", {}), fields.get("printed_in", [])
    if not isinstance(given, list) or not isinstance(printed_in, list):
        raise ValueError(f"{where}: 'given' and 'printed_in' are lists")
    if not isinstance(worked, Mapping) or not isinstance(cited, Mapping):
        raise ValueError(f"{where}: 'worked' maps a number to an expression, 'cited' a source to numbers")
    for written, expression in worked.items():
        try:
            value = worked_value(str(expression))
        except Exception as exc:  # a typo in the data: say which item and which number
            raise ValueError(f"{where}: worked number {written!r}: {expression!r} does not "
                             f"evaluate ({exc})") from None
        if not rounds_to(value, str(written)):
            raise ValueError(f"{where}: worked number {written!r} is {value:.6g} by {expression!r}")


def _fill(text: object, values: Mapping) -> object:
    if not isinstance(text, str):
        return text
    return PLACEHOLDER.sub(lambda m: format(values[m.group(1)], m.group(2) or ""), text)


def _widget(item: Item, values: Mapping) -> Recall:
    fields = {k: _fill(v, values) for k, v in item.fields.items() if k != "kind"}
    if "options" in fields and isinstance(fields["options"], list):
        fields["options"] = [{k: _fill(v, values) for k, v in o.items()} if isinstance(o, Mapping) else o
                             for o in item.shown_options()]
    kind = KINDS[item.kind]
    return kind.widget(*(fields[f] for f in kind.fields), item=item.id)


def recall(item_id: str, /, **values: object) -> Recall:
    """The widget of item ``item_id`` from the data files. ``values`` are the numbers the chapter
    computes for the item's ``{{name}}`` placeholders; every placeholder needs one."""
    own = ITEMS_DIR / f"{os.environ.get(CHAPTER_ENV, '')}.yml"
    if own.name != ".yml" and own.is_file():
        items = _load_file(str(own), own.stat().st_mtime_ns)
        if item_id in items:
            return render(items[item_id], **values)
    items = load_items()
    if item_id not in items:
        near = difflib.get_close_matches(str(item_id), list(items), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ValueError(f"no recall item {item_id!r} in {ITEMS_DIR.parent.name}/{ITEMS_DIR.name}/*.yml{hint}")
    return render(items[item_id], **values)


def render(item: Item, /, **values: object) -> Recall:
    """The widget of ``item``, checked, its placeholders filled with ``values``."""
    check(item)
    wanted = item.placeholders()
    missing, extra = wanted - set(values), set(values) - wanted
    if missing or extra:
        raise ValueError(f"{item.file}: item {item.id} needs the values {sorted(wanted)}; "
                         f"missing {sorted(missing)}, not used {sorted(extra)}")
    return _widget(item, values)
