"""The chapter index (book/chapters.md) stays true to the chapters.

Its table has a row per page of the book that holds chapters: chapter | read first | what runs in it.

- **One row per chapter.** Every notebook and page of _toc.yml that the table is about (the
  notebooks, and the pages the table links) has exactly one row, its link text the chapter's number
  and its title as the page's heading writes it ("7 Inside BERT"; a page without a number: the title
  alone).
- **Read first.** "nothing", or chapter numbers, each naming a chapter that comes before the page
  in _toc.yml or that the page links to.
- **What runs in it.** What the row names as running must run in the page's code cells:
  - each `code span` that names a Python object or module (`Trainer`, `tokenizers`) is a word of
    the code (imported, called or used; comments do not count), and a special token (`[CLS]`) is in
    the code or its outputs;
  - "Hugging Face" or "transformers" needs an import of transformers, tokenizers or datasets;
    "the book's model" a call of ``book_model()``; "live" a training call; "N seeds" a results file
    the page loads over N seeds (or a ``seeds`` setting of N); "nothing" no code cell at all.
  And the other way round, so that a row cannot fall behind its page: a page that imports
  transformers, tokenizers or datasets names Hugging Face or transformers in its row, and one that
  builds transformers' ``Trainer`` or ``pipeline`` names it as a code span.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlm_lib.book.results import load_results
from toc import toc_order

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "book" / "chapters.md"

ROW = re.compile(r"^\|\s*\[(?P<text>[^\]]+)\]\((?P<target>[^)]+)\)\s*\|(?P<read>[^|]*)\|(?P<runs>.*)\|\s*$")
CODE_SPAN = re.compile(r"`([^`]+)`")
IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")
HUGGING_FACE = re.compile(r"Hugging Face|\btransformers\b|🤗")
HF_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:transformers|tokenizers|datasets)\b", re.M)
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
SEEDS = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r"|\d+) seeds\b", re.I)
LOADED_RESULTS = re.compile(r"load_results\(\s*[\"']([\w-]+)[\"']")
TRAINING_CALL = re.compile(r"\b(?:train\w*|\w*_train|fit)\(|\.train\(")
# transformers' objects a row must name when its page builds them, as a call in the page's code
BUILT = {"Trainer": re.compile(r"(?<![\w.])Trainer\("),
         "pipeline": re.compile(r"(?<![\w.])pipeline\(\s*[\"']")}  # transformers' takes a task name


@dataclass
class Row:
    text: str    # the link text: "7 Inside BERT"
    target: str  # the page, from the root: "notebooks/07_inside_bert"
    read: str
    runs: str


@dataclass
class Page:
    stem: str
    heading: str
    code: str       # the code cells, comments left out
    outputs: str
    links: set[str]  # the chapters' numbers it links to


def rows(markdown: str) -> list[Row]:
    found = []
    for line in markdown.splitlines():
        if m := ROW.match(line.strip()):
            target = (INDEX.parent / m["target"].split("#")[0]).resolve().relative_to(ROOT)
            found.append(Row(m["text"].strip(), str(target.with_suffix("")), m["read"].strip(), m["runs"].strip()))
    return found


def _without_comments(source: str) -> str:
    try:
        return tokenize.untokenize(t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                                   if t.type != tokenize.COMMENT)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source


def page(target: str) -> Page:
    path = ROOT / f"{target}.ipynb"
    if path.exists():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = "\n".join(_without_comments("".join(c["source"])) for c in cells if c["cell_type"] == "code")
        outputs = "\n".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                            for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))
        markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        markdown = (ROOT / f"{target}.md").read_text(encoding="utf-8")
        blocks = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", markdown, re.S | re.M)
        code, outputs = "\n".join(blocks), ""
    heading = next(line[2:].strip() for line in markdown.splitlines() if line.startswith("# "))
    links = {int(n) for n in re.findall(r"\]\((?:\.\./notebooks/)?(\d\d)_\w+\.ipynb", markdown)}
    return Page(Path(target).name, heading, code, outputs, links)


def _number(stem: str) -> int | None:
    return int(stem[:2]) if stem[:2].isdigit() else None


def row_errors(row: Row, pg: Page, order: list[str]) -> list[str]:
    """What a row says that its page does not bear out."""
    errors = []
    number = _number(pg.stem)
    title = f"{number} {pg.heading}" if number is not None else pg.heading
    if row.text != title:
        errors.append(f"link text {row.text!r}, but the page is {title!r}")
    # read first
    files = [str(Path(f).with_suffix("")) for f in order]
    before = {_number(Path(f).name) for f in files[:files.index(row.target)]} if row.target in files else set()
    if row.read != "nothing":
        for n in (int(x) for x in re.findall(r"\d+", row.read)):
            if n not in before and n not in pg.links:
                errors.append(f"reads chapter {n} first, which neither comes before it nor is linked from it")
    # what runs: forwards
    runs = row.runs
    words = set(re.findall(r"[\w.]+", pg.code))
    for span in CODE_SPAN.findall(runs):
        if IDENTIFIER.fullmatch(span):
            if span not in words and span.split(".")[0] not in words:
                errors.append(f"names `{span}`, which its code never uses")
        elif span not in pg.code and span not in pg.outputs:
            errors.append(f"names `{span}`, which neither its code nor its outputs hold")
    plain = CODE_SPAN.sub(" ", runs)
    if HUGGING_FACE.search(runs) and not HF_IMPORT.search(pg.code):
        errors.append("names Hugging Face or transformers, but imports none of its libraries")
    if "the book's model" in plain and "book_model(" not in pg.code:
        errors.append("names the book's model, which its code never loads")
    if re.search(r"\blive\b", plain) and not TRAINING_CALL.search(pg.code):
        errors.append("says something trains live, but its code calls no training")
    loaded = set()
    for name in LOADED_RESULTS.findall(pg.code) if SEEDS.search(plain) else []:
        try:
            loaded.add(len(load_results(name).seeds))
        except FileNotFoundError:
            errors.append(f"loads the results file {name!r}, which does not exist")
    for m in SEEDS.finditer(plain):
        n = NUMBER_WORDS.get(m[1].lower()) or int(m[1])
        if n not in loaded and not re.search(rf"\bseeds\s*=\s*\(?range\({n}\)|\bSEEDS\s*=.*\b{n}\b", pg.code):
            errors.append(f"says {m[0]}, but no results file it loads has {n} seeds")
    if re.fullmatch(r"nothing\b.*", runs) and pg.code.strip():
        errors.append("says nothing runs, but the page has code cells")
    # what runs: backwards
    if HF_IMPORT.search(pg.code) and not HUGGING_FACE.search(runs):
        errors.append("its code imports Hugging Face's libraries, but the row does not say so")
    for name, built in BUILT.items():
        if built.search(pg.code) and f"`{name}`" not in runs:
            errors.append(f"its code builds transformers' {name}, but the row does not name `{name}`")
    return errors


def index_errors(markdown: str, order: list[str]) -> list[str]:
    table = rows(markdown)
    notebooks = [str(Path(f)) for f in order if f.startswith("notebooks/")]
    errors = []
    for nb in notebooks:
        count = sum(r.target == nb for r in table)
        if count != 1:
            errors.append(f"{nb}: {count} rows link to it (one expected)")
    for row in table:
        if row.target not in order:
            errors.append(f"row {row.text!r} links to {row.target}, which _toc.yml does not list")
            continue
        errors += [f"row {row.text!r}: {e}" for e in row_errors(row, page(row.target), order)]
    return errors


def test_the_chapter_index_is_true_to_the_chapters():
    errors = index_errors(INDEX.read_text(encoding="utf-8"), toc_order())
    assert not errors, "book/chapters.md:\n" + "\n".join(f"  {e}" for e in errors)


@pytest.mark.parametrize("change, expected", [
    # a row names an object its chapter never runs
    (("the same steps with `Trainer` |", "the same steps with `Trainer` and `TrainerState` |"),
     "names `TrainerState`, which its code never uses"),
    # a row that drifts from its page's title
    (("[9 WordPiece]", "[9 Word pieces]"), "link text '9 Word pieces'"),
    # a chapter read first that comes after the page and is not linked from it
    (("03_the_log.ipynb) | 2 |", "03_the_log.ipynb) | 2, 12 |"),
     "reads chapter 12 first"),
    # seeds the results file does not hold
    (("over five seeds, against", "over seven seeds, against"), "says seven seeds"),
    # the book's model where none is loaded
    (("products that underflow", "the book's model; products that underflow"), "names the book's model"),
    # a row dropped, or doubled
    (("| [4 The minus sign](../notebooks/04_the_minus_sign.ipynb) | 3 |", "| (dropped) | 3 |"),
     "04_the_minus_sign: 0 rows"),
    (("| [14 One", "| [3 The log](../notebooks/03_the_log.ipynb) | 2 | logs |\n| [14 One"),
     "03_the_log: 2 rows"),
])
def test_a_stale_row_is_caught(change, expected):
    markdown = INDEX.read_text(encoding="utf-8")
    old, new = change
    assert old in markdown, old
    errors = index_errors(markdown.replace(old, new), toc_order())
    assert any(expected in e for e in errors), errors


def test_a_chapter_that_stops_running_what_its_row_says_is_caught():
    """Chapter 12 stops running transformers' Trainer and the live classifier; its row still says both."""
    pg = page("notebooks/12_fine_tuning")
    row = next(r for r in rows(INDEX.read_text(encoding="utf-8")) if r.target == pg.stem.join(["notebooks/", ""]))
    assert not row_errors(row, pg, toc_order())
    pg.code = re.sub(r"\bTrainer\b", "Runner", pg.code)
    assert any("names `Trainer`" in e for e in row_errors(row, pg, toc_order()))
    pg.code = re.sub(r"^\s*(import|from) (transformers|datasets)\b.*$", "", pg.code, flags=re.M)
    assert any("imports none of its libraries" in e for e in row_errors(row, pg, toc_order()))


def test_a_row_that_hides_what_its_chapter_runs_is_caught():
    """A chapter starts running Hugging Face's Trainer; its row does not say so."""
    pg = Page("10_pretraining", "Pretraining a small BERT",
              "from transformers import Trainer\ntrainer = Trainer(model=m)\n", "", set())
    row = Row("10 Pretraining a small BERT", "notebooks/10_pretraining", "5, 6", "a live pretraining run")
    errors = row_errors(row, pg, toc_order())
    assert any("does not say so" in e for e in errors)
    assert any("does not name `Trainer`" in e for e in errors)
    assert any("trains live" in e for e in errors)
