"""Count a chapter's prose: the words a reader reads before the closing "You can now".

Math, code (fenced blocks and inline spans), HTML tags, folded ``<details>`` blocks, MyST
directives and link targets are not prose, so they are not counted. The book's word budget
(tests/content/test_word_budget.py) is written in this count.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

CLOSING_HEADING = "## You can now"

_FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
_DETAILS = re.compile(r"<details\b.*?</details>", re.S | re.I)
_DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
_INLINE_MATH = re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$")
_CODE_SPAN = re.compile(r"(`+)[^`].*?\1", re.S)
_HTML_TAG = re.compile(r"<[^>\n]+>")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_ROLE = re.compile(r"\{[a-z-]+\}`[^`]*`")
_LABEL = re.compile(r"^\([\w-]+\)=\s*$", re.M)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")


def prose_words(markdown: str) -> int:
    """The number of prose words in one Markdown cell."""
    text = _FENCED.sub(" ", markdown)
    text = _DETAILS.sub(" ", text)
    text = _DISPLAY_MATH.sub(" ", text)
    text = _ROLE.sub(" ", text)
    text = _CODE_SPAN.sub(" ", text)
    text = _INLINE_MATH.sub(" ", text)
    text = _HTML_TAG.sub(" ", text)
    text = _LINK_TARGET.sub("]", text)
    text = _LABEL.sub(" ", text)
    return len(_WORD.findall(text))


def chapter_words(notebook: Path) -> int:
    """Prose words of the Markdown cells before the chapter's closing summary."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    total = 0
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            continue
        if source.lstrip().startswith(CLOSING_HEADING):
            return total
        total += prose_words(source)
    raise ValueError(f"{notebook.name} has no closing {CLOSING_HEADING!r} cell")


def main(paths: list[str]) -> None:
    notebooks = [Path(p) for p in paths] or sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    total = 0
    for nb in notebooks:
        words = chapter_words(nb)
        total += words
        print(f"{words:6d}  {nb.stem}")
    print(f"{total:6d}  total")


if __name__ == "__main__":
    main(sys.argv[1:])
