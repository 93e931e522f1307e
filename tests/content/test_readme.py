"""The repository's own documentation: README.md (short), CONTRIBUTING.md and benchmarks/README.md.

The contributor's guide's library table says which functions the chapters print (their source,
with ``inspect.getsource``): it must name exactly those, chapter by chapter. The README stays
short, and every relative link of the three files resolves, to a file and to a heading in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDE = ROOT / "CONTRIBUTING.md"  # the library table lives here
DOCS = [README, GUIDE, ROOT / "benchmarks" / "README.md"]
README_MAX_LINES = 200
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def printed_by_chapters() -> set[tuple[str, int]]:
    """(the printed object's last dotted names, chapter) for every ``getsource(...)`` in a chapter's
    code: ``BertLayer.forward`` for ``getsource(BertLayer.forward)``, ``next_sentence_pair`` for
    ``getsource(pretraining.next_sentence_pair)``."""
    found = set()
    for path in NOTEBOOKS:
        chapter = int(path.name[:2])
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
                        == "getsource" and node.args):
                    parts = ast.unparse(node.args[0]).split(".")
                    name = ".".join(parts[-2:]) if parts[-2:-1] and parts[-2][:1].isupper() else parts[-1]
                    found.add((name, chapter))
    return found


def _chapters(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def readme_says_printed(readme: str) -> set[tuple[str, int]]:
    """(name, chapter) from the third column of the guide's ``| module | what | chapters print |``
    table: ``\\`a\\`, \\`b\\` (7), \\`c\\` (5)`` names a and b in chapter 7, c in chapter 5."""
    table = readme.split("| module | what | chapters print |", 1)[1].split("\n\n", 1)[0]
    said = set()
    for row in table.splitlines()[2:]:
        cell = row.rstrip().rstrip("|").rsplit("|", 1)[-1]
        for names, chapters in re.findall(r"((?:`[\w.]+`(?:,\s*)?)+)\s*\(([\d,\s-]+)\)", cell):
            for name in re.findall(r"`([\w.]+)`", names):
                said |= {(name, c) for c in _chapters(chapters)}
    return said


def test_the_guide_names_what_each_chapter_prints():
    said = readme_says_printed(GUIDE.read_text(encoding="utf-8"))
    printed = printed_by_chapters()
    core = {(n, c) for n, c in printed if f"`{n.split('.')[0]}`" not in BOOK_ONLY}
    assert said - printed == set(), f"CONTRIBUTING.md says chapters print these, and they do not: {sorted(said - printed)}"
    assert core - said == set(), f"chapters print these, and CONTRIBUTING.md's table does not say so: {sorted(core - said)}"


def modules_in_table(guide: str) -> set[str]:
    """The module names of the first column of the guide's library table (``| `a`, `b` | ...``)."""
    table = guide.split("| module | what | chapters print |", 1)[1].split("\n\n", 1)[0]
    return {name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])}


def test_the_guide_names_every_library_module():
    """The table is the library's one list of modules (``mlm_lib/__init__.py`` points to it)."""
    modules = {p.stem for p in (ROOT / "mlm_lib").glob("*.py")} - {"__init__", "__main__"}
    named = modules_in_table(GUIDE.read_text(encoding="utf-8"))
    assert named == modules, (f"CONTRIBUTING.md's library table lacks {sorted(modules - named)} "
                              f"and names {sorted(named - modules)}, which the library does not have")


def test_the_module_column_is_read_as_written():
    guide = "| module | what | chapters print |\n|---|---|---|\n| `a`, `b` | `c` | `d` (1) |\n\nafter `e`\n"
    assert modules_in_table(guide) == {"a", "b"}


# Printed by chapters, but defined in mlm_lib.book (the guide's table is of the library's modules).
BOOK_ONLY = {"`train_micro`", "`frozen_classifier`", "`layer_forward`", "`tokenize_and_align`",
             "`entity_f1_on`", "`trainer_tagger`", "`with_answers`", "`read_answers`",
             "`picks_same_article`", "`choice_metrics`"}


def test_the_check_sees_a_planted_difference():
    readme = "| module | what | chapters print |\n|---|---|---|\n| `x` | y | `a.b`, `c` (1-2), `d` (5) |\n\n"
    assert readme_says_printed(readme) == {("a.b", 1), ("a.b", 2), ("c", 1), ("c", 2), ("d", 5)}


def test_every_library_name_the_docs_give_exists():
    """A name like ``mlm_lib.finetune.finetune`` in the docs is one a reader can import."""
    import importlib

    readme = "\n".join(path.read_text(encoding="utf-8") for path in DOCS)
    missing = []
    for dotted in sorted(set(re.findall(r"`(mlm_lib(?:\.\w+)+)", readme))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert not missing, f"the docs name what the library does not have: {missing}"


# --- the README's length, and the links of the three files ------------------------------------

def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail into CONTRIBUTING.md")


FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def prose(text: str) -> str:
    """The Markdown without its code blocks and code spans (a `# comment` is not a heading)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (code spans as their text) lowercased, spaces to '-',
    punctuation removed (letters, digits, '-' and '_' stay)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown file's headings; a repeated heading's gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(text: str, where: Path) -> list[str]:
    """The relative links of ``text`` (a Markdown file in folder ``where``) that lead nowhere: to a
    path that does not exist, or to an ``#anchor`` that no heading of the target file has."""
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z][\w+.-]*:", target, re.I):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (where / path).resolve() if path else None
        if file is not None and not file.exists():
            broken.append(target)
        elif anchor:
            body = text if file is None else file.read_text(encoding="utf-8") if file.suffix == ".md" else None
            if body is None or anchor not in anchors(body):
                broken.append(target)
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc):
    assert doc.exists(), f"{doc} is missing"
    broken = broken_links(doc.read_text(encoding="utf-8"), doc.parent)
    assert not broken, f"{doc.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_link_check_finds_planted_breaks(tmp_path):
    (tmp_path / "GUIDE.md").write_text("# A guide\n\n## The book's model\n\n## Set-up, then `make test`\n"
                                       "```bash\n# not a heading\n```\n", encoding="utf-8")
    (tmp_path / "data.txt").write_text("x", encoding="utf-8")
    good = ("See [the guide](GUIDE.md), [its model](GUIDE.md#the-books-model), "
            "[set-up](GUIDE.md#set-up-then-make-test), [data](data.txt), [here](#top), "
            "[the web](https://example.org/x#y) and `[code](nowhere.md)`.\n\n# Top\n")
    assert broken_links(good, tmp_path) == []
    bad = ("[gone](MISSING.md), [no heading](GUIDE.md#the-book-model), [a comment](GUIDE.md#not-a-heading), "
           "[not markdown](data.txt#x), [no such section](#nowhere)\n")
    assert broken_links(bad, tmp_path) == ["MISSING.md", "GUIDE.md#the-book-model", "GUIDE.md#not-a-heading",
                                           "data.txt#x", "#nowhere"]


def test_slugs_follow_githubs_rules():
    assert slug("The book's model in the browser") == "the-books-model-in-the-browser"
    assert slug("What `make test` runs") == "what-make-test-runs"
    assert slug("Install, for readers") == "install-for-readers"
    assert anchors("# A\n## A\n## A\n") == {"a", "a-1", "a-2"}
