"""A source is quoted with the version that says it.

Code changes under a link that names a branch: ``blob/master/modeling.py`` said erf GELU in
November 2018 and the tanh approximation from February 2019. So a link into a repository's files
names the commit (``blob/eedf571.../create_pretraining_data.py``), and a bibliography entry for
code, an issue or a web page (no arXiv id, no DOI, no journal) says when it was read or written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXTS = sorted([*(ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"), *(ROOT / "book").glob("*.md"),
                *(ROOT / "mlm_lib" / "book" / "assets" / "recall").glob("*.yml"), ROOT / "README.md",
                ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "README.md"])
BIBLIOGRAPHY = ROOT / "book" / "references.bib"

# github.com/<owner>/<repo>/(blob|tree|raw)/<ref>/...: the ref must be a commit (7-40 hex digits).
CODE_LINK = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:blob|tree|raw)/([^/\s)\"'>]+)")
COMMIT = re.compile(r"[0-9a-f]{7,40}")
ENTRY = re.compile(r"@(\w+)\s*\{\s*([^,\s]+)\s*,(.*?)\n\}", re.S)
FIELD = re.compile(r"(\w+)\s*=\s*\{(.*?)\}\s*,?\s*$", re.M)
PUBLISHED = ("journal", "booktitle", "doi", "eprint")


def unpinned_code_links(text: str) -> list[str]:
    return [f"{repo}@{ref}" for repo, ref in CODE_LINK.findall(text) if not COMMIT.fullmatch(ref)]


def undated_entries(bib: str) -> list[str]:
    """Keys of entries that are not papers (no journal, proceedings, DOI or arXiv id in the url)
    and carry no year, date or version."""
    missing = []
    for _kind, key, body in ENTRY.findall(bib):
        fields = {name.lower(): value for name, value in FIELD.findall(body)}
        paper = any(f in fields for f in PUBLISHED) or "arxiv.org/abs/" in fields.get("url", "")
        if not paper and not any(f in fields for f in ("year", "date", "version", "urldate")):
            missing.append(key)
    return missing


def _text(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
    return path.read_text(encoding="utf-8")


def test_a_branch_link_is_caught():
    text = ("[create_pretraining_data.py](https://github.com/google-research/bert/blob/master/"
            "create_pretraining_data.py) and [modeling.py](https://github.com/google-research/bert/"
            "blob/eedf5716ce1268e56f0a50264a88cafad334ac61/modeling.py#L264)")
    assert unpinned_code_links(text) == ["google-research/bert@master"]


def test_an_undated_web_source_is_caught():
    bib = ("@misc{a,\n  title = {An issue},\n  url = {https://github.com/x/y/issues/1}\n}\n"
           "@misc{b,\n  title = {Dated},\n  year = {2022},\n  url = {https://example.org}\n}\n"
           "@article{c,\n  title = {Paper},\n  url = {https://arxiv.org/abs/1810.04805}\n}\n")
    assert undated_entries(bib) == ["a"]


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_code_links_name_a_commit(path):
    found = unpinned_code_links(_text(path))
    assert not found, f"{path.name} links code by branch, not by commit: {found}"


def test_web_sources_are_dated():
    assert not undated_entries(BIBLIOGRAPHY.read_text(encoding="utf-8"))
