"""Recall widgets on prose pages and the gym, from the same data as the chapters.

Every item is written once, in ``mlm_lib/book/assets/recall/*.yml`` (see :mod:`mlm_lib.book.recall`).

``{recall}`` shows one item by its id::

    ```{recall} TF9.gym
    ```

It still takes an item written inline, for a page's one-off question (``reveal``, ``true-or-false``
with ``:answer:``, ``spot-the-error``: the names of :data:`mlm_lib.book.recall.KINDS`; two parts
separated by a ``---`` line)::

    ```{recall} reveal
    What does BERT see at a position it is asked to predict?
    ---
    The corrupted input ...
    ```

``{recall-gym}`` writes the gym: for each bank id of its content (one per line) the gym's own
wording of the item (``<id>.gym``) or, where the gym has none, the chapter's item, then a link to
the chapter section that demonstrates it, taken from ``book/coverage.yml``. The HTML comes from
:mod:`mlm_lib.book.recall`, so a widget looks and behaves the same on a page and in a notebook.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

from mlm_lib.book import recall

ROOT = Path(__file__).resolve().parents[2]
COVERAGE = ROOT / "book" / "coverage.yml"
_BOOL = {"true": True, "false": False}
# The kinds a page may write inline: two texts (and a true-or-false's :answer:).
_INLINE_KINDS = {k.name: k for k in (recall.REVEAL, recall.TRUE_OR_FALSE, recall.SPOT_THE_ERROR)}


def _depend_on(directive: Directive, *paths: Path) -> None:
    """Rebuild the page when an item or the coverage table changes."""
    env = getattr(directive.state.document.settings, "env", None)
    if env is not None:
        for path in paths:
            env.note_dependency(str(path))


def _item_file(item_id: str) -> Path:
    return recall.ITEMS_DIR / recall.load_items()[item_id].file


class RecallDirective(Directive):
    required_arguments = 1
    has_content = True
    option_spec = {"answer": directives.unchanged, "item": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        argument = self.arguments[0].strip()
        try:
            if argument.lower() in _INLINE_KINDS:
                widget = self._inline(_INLINE_KINDS[argument.lower()])
            else:
                if self.content:
                    raise ValueError(f"{argument!r} is an item id, which takes no content; "
                                     f"an inline item starts with its kind ({', '.join(_INLINE_KINDS)})")
                widget = recall.recall(argument)
                _depend_on(self, _item_file(argument))
        except ValueError as exc:
            raise self.error(f"recall: {exc}") from exc
        return [nodes.raw("", widget.html, format="html")]

    def _inline(self, kind: recall.Kind) -> recall.Recall:
        text = "\n".join(self.content)
        parts: list[object] = [p.strip() for p in text.split("\n---\n")]
        if len(parts) != 2:
            raise ValueError(f"expected two parts separated by a '---' line, got {len(parts)}")
        if kind is recall.TRUE_OR_FALSE:  # statement, answer, why
            answer = _BOOL.get(str(self.options.get("answer", "")).strip().lower())
            if answer is None:
                raise ValueError(f"{kind.name} needs ':answer: true' or ':answer: false'")
            parts.insert(1, answer)
        return kind.widget(*parts, item=self.options.get("item"))


@lru_cache(maxsize=None)
def _coverage(stamp: int) -> dict:
    import yaml

    return yaml.safe_load(COVERAGE.read_text(encoding="utf-8"))


def coverage() -> dict:
    """book/coverage.yml: each bank id's chapter, section and anchor."""
    return _coverage(COVERAGE.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def chapter_title(chapter: str) -> str:
    """The first ``# `` heading of a chapter notebook."""
    nb = json.loads((ROOT / chapter).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+)$", "".join(cell["source"]), re.M)
            if m:
                return m.group(1).strip()
    return Path(chapter).stem


def gym_item(bank_id: str) -> str:
    """The id the gym shows for ``bank_id``: its own wording where it has one."""
    items = recall.load_items()
    if f"{bank_id}.gym" in items:
        return f"{bank_id}.gym"
    if bank_id in items:
        return bank_id
    raise ValueError(f"no item {bank_id}.gym or {bank_id} for the gym")


def gym_link(bank_id: str) -> str | None:
    """The Markdown line under a gym item: where the book shows it (None while its chapter is
    pending)."""
    row = coverage().get(bank_id)
    if row is None:
        raise ValueError(f"{bank_id} is not in book/coverage.yml")
    if row.get("status") == "pending":
        return None
    chapter = row["chapter"]
    number = int(Path(chapter).name[:2])
    target = f"../{chapter}" + (f"#{row['anchor']}" if row.get("anchor") else "")
    text = f"Chapter {number}, {chapter_title(chapter)}: {row['section']}"
    return f"Shown in [{_link_text(text)}]({target})."


def _link_text(text: str) -> str:
    """``text`` safe inside a Markdown link's brackets: brackets escaped outside code spans
    (inside one a backslash would be printed, as in `\\[MASK\\]`)."""
    pieces = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else p.replace("[", "\\[").replace("]", "\\]")
                   for p in pieces)


class RecallGymDirective(Directive):
    has_content = True

    def run(self) -> list[nodes.Node]:
        out: list[nodes.Node] = []
        for line in self.content:
            bank_id = line.strip()
            if not bank_id:
                continue
            try:
                shown = gym_item(bank_id)
                widget = recall.recall(shown)
                link = gym_link(bank_id)
            except ValueError as exc:
                raise self.error(f"recall-gym: {exc}") from exc
            _depend_on(self, _item_file(shown), COVERAGE)
            out.append(nodes.raw("", widget.html, format="html"))
            if link:
                para = nodes.container()
                self.state.nested_parse(StringList([link], source=self.state.document["source"]),
                                        self.content_offset, para)
                out += para.children
        return out


def setup(app):  # noqa: D103 - Sphinx entry point
    app.add_directive("recall", RecallDirective)
    app.add_directive("recall-gym", RecallGymDirective)
    app.add_css_file("recall.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
