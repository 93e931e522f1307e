"""Every recall item of the book as an Anki deck: ``_static/recall-anki.txt`` in the built site.

A reader who wants the items back in a week, and again in a month, imports this file into Anki
(*File > Import*): one note per item, front and back in HTML, tagged with its chapter and kind.
It is written from the same data as the widgets (``mlm_lib/book/assets/recall/*.yml``) when the build
finishes, so it never disagrees with the site; the gym links to it.

The format is Anki's plain-text import: header lines naming the separator, that fields are HTML
and which column holds the tags, then one line per note. A field with a quote in it is quoted
CSV-style (``"`` doubled), tabs become spaces and newlines ``<br>``, so no text can shift the
columns. Math
keeps the ``\\(...\\)`` delimiters Anki's MathJax reads.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from mlm_lib.book import recall

OUTPUT = "recall-anki.txt"
HEADER = ("#separator:tab", "#html:true", "#tags column:3")
_LETTERS = "ABCDEFGHIJ"
# A number the chapter computes at run time, where its stored output does not give it.
_ELIDED = "…"


class _Mark:
    """Formats as a marker, whatever the format spec: renders an item with its placeholders
    visible, to match against the chapter's stored output."""

    def __init__(self, name: str):
        self.name = name

    def __format__(self, spec: str) -> str:
        return f"\x00{self.name}\x00"


def stored_values(item: recall.Item, outputs: list[str]) -> dict[str, str]:
    """The numbers a chapter printed for ``item``'s placeholders, read back from the widget in its
    stored outputs (``{}`` when the output is missing or older than the item's text)."""
    names = item.placeholders()
    if not names:
        return {}
    template = recall.render(item, **{n: _Mark(n) for n in names}).html
    pattern, seen = "", set()
    for k, part in enumerate(template.split("\x00")):
        if k % 2 == 0:
            pattern += re.escape(part)
        elif part in seen:
            pattern += f"(?P={part})"
        else:
            pattern += f"(?P<{part}>[^<]*?)"
            seen.add(part)
    for out in outputs:
        m = re.fullmatch(pattern, out, re.S)
        if m:
            return {k: html.unescape(v) for k, v in m.groupdict().items()}
    return {}


def _text(value: str, values: dict[str, str]) -> str:
    """A text field of an item as HTML, its placeholders filled with the printed numbers."""
    value = recall.PLACEHOLDER.sub(lambda m: values.get(m.group(1), _ELIDED), value)
    return recall.render_text(value.strip())


def _chapter_tag(item: recall.Item, coverage: dict) -> str | None:
    if re.match(r"\d\d_", item.file):
        return f"chapter-{item.file[:2]}"
    if item.file == "pages.yml":          # the prose pages (the introduction), no chapter
        return "pages"
    row = coverage.get(item.id.split(".")[0])
    if row:
        return f"chapter-{Path(row['chapter']).name[:2]}"
    return None


# The front and back of each kind's card, from the item's fields and a function that renders a
# text field.
_Card = Callable[[Mapping, Callable[[str], str]], tuple[str, str]]


def _reveal_card(f: Mapping, t: Callable[[str], str]) -> tuple[str, str]:
    return t(f["question"]), t(f["answer"])


def _true_or_false_card(f: Mapping, t: Callable[[str], str]) -> tuple[str, str]:
    return (f"{recall.TRUE_OR_FALSE.label}? " + t(f["statement"]),
            f"<b>{'True' if f['answer'] else 'False'}.</b> " + t(f["why"]))


def _spot_the_error_card(f: Mapping, t: Callable[[str], str]) -> tuple[str, str]:
    return f"{recall.SPOT_THE_ERROR.label}: " + t(f["statement"]), t(f["error"])


def _multiple_choice_card(f: Mapping, t: Callable[[str], str]) -> tuple[str, str]:
    options = f["options"]
    front = t(f["question"]) + "<br>" + "<br>".join(
        f"{_LETTERS[k]}. {t(o['text'])}" for k, o in enumerate(options))
    right = ", ".join(_LETTERS[k] for k, o in enumerate(options) if o["correct"])
    back = f"<b>{right}.</b><br>" + "<br>".join(
        f"{_LETTERS[k]} ({'right' if o['correct'] else 'wrong'}): {t(o['why'])}"
        for k, o in enumerate(options))
    return front, back


_CARDS: dict[recall.Kind, _Card] = {
    recall.REVEAL: _reveal_card,
    recall.TRUE_OR_FALSE: _true_or_false_card,
    recall.SPOT_THE_ERROR: _spot_the_error_card,
    recall.MULTIPLE_CHOICE: _multiple_choice_card,
}


def note(item: recall.Item, coverage: dict, values: dict[str, str] | None = None) -> tuple[str, str, str]:
    """(front, back, tags) of one item; ``values`` fill its placeholders. The tags are its
    chapter, its kind's name and, for the gym's wording, ``gym``."""
    kind = recall.KINDS.get(item.kind)
    if kind is None:
        raise ValueError(f"{item.file}: item {item.id}: unknown kind {item.kind!r}")
    fields = {**item.fields, "options": item.shown_options()} if "options" in item.fields else item.fields
    front, back = _CARDS[kind](fields, lambda text: _text(text, values or {}))
    tags = [t for t in (_chapter_tag(item, coverage), kind.name, "gym" if item.file == "gym.yml" else None) if t]
    return front, back, " ".join(tags)


def chapter_outputs(notebooks: list[Path]) -> list[str]:
    """The HTML of every recall widget stored in the chapters' outputs."""
    out = []
    for path in notebooks:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                text = output.get("data", {}).get("text/html", "")
                text = "".join(text) if isinstance(text, list) else text
                if 'class="recall ' in text:
                    out.append(text)
    return out


def deck(items: dict[str, recall.Item], coverage: dict, outputs: list[str] = ()) -> str:
    """The whole import file: the header lines, then one note per item in file order. ``outputs``
    are the chapters' stored widgets, which give the numbers of items with placeholders."""
    buffer = io.StringIO()
    buffer.write("\n".join(HEADER) + "\n")
    writer = csv.writer(buffer, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    for item in sorted(items.values(), key=lambda i: (i.file == "gym.yml", i.file)):
        fields = note(item, coverage, stored_values(item, list(outputs)))
        writer.writerow(field.replace("\t", " ").replace("\n", "<br>") for field in fields)
    return buffer.getvalue()


def _write(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from recall_directive import coverage

    items = recall.load_items()
    for item in items.values():
        recall.check(item)
    target = Path(app.outdir) / "_static" / OUTPUT
    target.parent.mkdir(parents=True, exist_ok=True)
    notebooks = sorted((Path(app.srcdir) / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    target.write_text(deck(items, coverage(), chapter_outputs(notebooks)), encoding="utf-8")


def setup(app):  # noqa: D103 - Sphinx entry point
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
