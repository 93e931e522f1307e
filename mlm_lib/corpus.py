"""Text corpora for pretraining: documents made of sentences.

BERT's pretraining data is a list of documents, each a list of sentences, because next sentence
prediction needs to know which sentence really follows which, and inside which document.

- ``load_wikipedia()``: the English Wikipedia excerpt that ships inside gensim's wheel (about a
  hundred articles), cleaned of wiki markup. Works offline right after installing the
  requirements. The cleaned result is cached as JSON (parsing takes a few seconds).
- ``load_lee()``: gensim's Lee corpus, 300 short ABC news stories.
- ``load_text_files(paths)``: the reader's own ``.txt`` files or folders; a blank line separates
  documents inside a file.
- ``download(url, sha256)``: fetch a file (e.g. a data set) once into the cache and verify its
  checksum.

The cache folder is ``~/.cache/mlm_lib`` unless the environment variable ``MLM_LIB_CACHE`` says
otherwise.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import os
import random
import re
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from mlm_lib.files import read_text, replaced_atomically, sha256_file

WIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LEE_FILE = "lee_background.cor"
CLEANER_VERSION = 1  # bump when the cleaning rules change, so stale caches are rebuilt
# A paragraph is kept as prose only from this many words on: shorter lines in a wiki dump are
# captions, list fragments and leftovers of removed markup.
MIN_PROSE_WORDS = 6
# Next sentence prediction needs a sentence that follows another, so a document needs two.
MIN_SENTENCES = 2
# The cache file name carries this many hex digits of the key's SHA-256 (64 bits: no collisions
# in practice, and the name stays short).
CACHE_KEY_DIGITS = 16


@dataclass
class Document:
    """One document: a title (may be empty) and its sentences in reading order."""

    title: str
    sentences: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def cache_dir() -> Path:
    """Where downloads and cleaned corpora are kept (``$MLM_LIB_CACHE`` or ``~/.cache/mlm_lib``)."""
    root = os.environ.get("MLM_LIB_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mlm_lib")
    return Path(root)


# ----------------------------------------------------------------------------- sentence splitting
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "cf", "no", "vol",
    "ca", "c", "fig", "al", "approx", "gen", "col", "lt", "sgt", "capt", "gov", "rev", "mt", "ft",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "inc",
    "ltd", "co", "corp", "op", "ed", "eds", "pp", "p", "ch", "sec", "ibid",
}
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences at ``.``, ``!`` or ``?`` followed by a capital or a digit.

    A rule-based splitter is enough for encyclopaedic prose; it keeps abbreviations (``Dr.``,
    ``e.g.``) and initials (``J. S. Mill``) inside their sentence.
    """
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        head = text[start:m.start()].rstrip("\"')]")
        last = head.rsplit(" ", 1)[-1].rstrip(".!?").lower()
        if text[m.start() - 1] == "." and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
            continue
        out.append(text[start:m.start()].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


# ----------------------------------------------------------------------------- wiki markup
_END_SECTIONS = re.compile(
    r"^=+\s*(see also|references|external links|further reading|notes|bibliography|sources|"
    r"citations|footnotes|notes and references|works cited|primary sources|secondary sources)\s*=+\s*$",
    re.I | re.M)
_INLINE_JUNK = [
    (re.compile(r"'{2,}"), ""),                       # bold/italic quotes left by filter_wiki
    (re.compile(r"<[^>]{0,200}>"), " "),              # stray html tags
    (re.compile(r"\{\{[^{}]*\}\}|\{\|.*?\|\}", re.S), " "),  # templates, tables
    (re.compile(r"\[\[|\]\]"), ""),
    (re.compile(r"&nbsp;|&ndash;|&mdash;|&amp;"), " "),
    (re.compile(r"\(\s*[,;:]?\s*\)"), ""),            # brackets emptied by removed templates
    (re.compile(r"\(\s*[,;:]\s*"), "("),
    (re.compile(r"\s+([,.;:])"), r"\1"),             # space before punctuation left by removals
    (re.compile(r"[ \t]{2,}"), " "),
]


def clean_wiki_text(text: str) -> list[str]:
    """Turn ``filter_wiki`` output into prose paragraphs.

    Drops everything from the first trailing section (References, See also, ...), headings, list
    items, table rows, category/file lines, leftover ``''`` markup and templates, and keeps only
    lines that read like prose (at least six words, ending like a sentence).
    """
    m = _END_SECTIONS.search(text)
    if m:
        text = text[:m.start()]
    paragraphs = []
    for line in text.split("\n"):
        line = line.strip()
        if not line or line[0] in "=*#:;|!{}" or re.match(r"(?i)(category|file|image|thumb)\s*:", line):
            continue
        for pattern, repl in _INLINE_JUNK:
            line = pattern.sub(repl, line)
        line = line.strip()
        if len(line.split()) >= MIN_PROSE_WORDS and line[-1] in ".!?\"')":
            paragraphs.append(line)
    return paragraphs


def _parse_wikipedia(path: Path) -> list[Document]:
    # gensim is optional and slow to import (most of a second); only these corpus loaders need it.
    try:
        from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    except ImportError as e:
        raise ImportError("the embedded Wikipedia excerpt needs gensim (pip install gensim)") from e
    docs = []
    with bz2.open(path) as f:
        for title, raw, _pageid in extract_pages(f):
            if raw.lstrip().upper().startswith("#REDIRECT"):
                continue
            sentences = [s for p in clean_wiki_text(filter_wiki(raw)) for s in split_sentences(p)]
            if len(sentences) >= MIN_SENTENCES:
                docs.append(Document(title, sentences))
    return docs


def _gensim_data(filename: str) -> Path:
    """Path of a test data file shipped inside gensim's wheel (the embedded corpora live there)."""
    # gensim is optional and slow to import (most of a second); only these corpus loaders need it.
    try:
        from gensim.test.utils import datapath
    except ImportError as e:
        raise ImportError("the embedded corpora need gensim (pip install gensim)") from e
    return Path(datapath(filename))


def wikipedia_path() -> Path:
    """Path of the bz2 Wikipedia excerpt inside gensim's wheel: the raw pages, markup included,
    for a reader that needs what :func:`load_wikipedia`'s cleaning drops (the editors' links)."""
    return _gensim_data(WIKI_FILE)


def _cached(name: str, source: Path, build) -> list[Document]:
    """Load documents from the JSON cache keyed by source file and cleaner version, else build."""
    stat = source.stat()
    fingerprint = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{CLEANER_VERSION}"
    key = hashlib.sha256(fingerprint.encode()).hexdigest()
    target = cache_dir() / f"{name}-{key[:CACHE_KEY_DIGITS]}.json"
    if target.exists():
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
            return [Document(d["title"], d["sentences"]) for d in data]
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache is simply rebuilt
    docs = build()
    try:
        with replaced_atomically(target) as tmp:
            tmp.write_text(json.dumps([{"title": d.title, "sentences": d.sentences} for d in docs]),
                           encoding="utf-8")
    except OSError:
        pass  # a read-only home is no reason to fail; we just parse again next time
    return docs


def load_wikipedia(use_cache: bool = True) -> list[Document]:
    """The cleaned Wikipedia excerpt from gensim's wheel, one Document per article, in file order."""
    path = wikipedia_path()
    if not use_cache:
        return _parse_wikipedia(path)
    return _cached("wikipedia", path, lambda: _parse_wikipedia(path))


def load_lee() -> list[Document]:
    """gensim's Lee corpus: 300 short ABC news stories (one per line), sentence-split."""
    text = _gensim_data(LEE_FILE).read_text(encoding="utf-8", errors="replace")
    docs = []
    for i, line in enumerate(text.splitlines()):
        sentences = split_sentences(line)
        if sentences:
            docs.append(Document(f"lee-{i}", sentences))
    return docs


def load_python_docs(topics: Mapping[str, str] | None = None) -> list[Document]:
    """Python's own documentation as a corpus of another domain that comes with every Python: the
    topics of ``pydoc_data.topics`` (the reference manual's sections that ``help()`` shows, 79 in
    Python 3.11), one Document per topic, each paragraph split into sentences. ``topics``: a
    frozen copy of that dict, so that a result does not move with the Python version."""
    if topics is None:
        from pydoc_data.topics import topics
    docs = []
    for name in sorted(topics):
        sentences = [s for block in re.split(r"\n\s*\n", topics[name])
                     for s in split_sentences(" ".join(block.split()))]
        if sentences:
            docs.append(Document(name, sentences))
    return docs


# ----------------------------------------------------------------------------- the reader's files
def documents_from_text(text: str, title: str = "") -> list[Document]:
    """Split a plain text into documents at blank lines, and each document into sentences."""
    docs = []
    for k, block in enumerate(re.split(r"\n\s*\n", text)):
        sentences = split_sentences(block)
        if sentences:
            docs.append(Document(f"{title}#{k}" if title else str(k), sentences))
    return docs


def load_text_files(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Document]:
    """Documents from ``.txt`` files; folders are searched recursively for ``*.txt`` (sorted)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*.txt") if q.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise ValueError(f"no such file or folder: {p}")
    docs = []
    for f in files:
        docs.extend(documents_from_text(read_text(f, "text", "utf-8-sig"), title=f.stem))
    return docs


def load_corpus(name_or_paths: str | os.PathLike | Sequence[str | os.PathLike] = "wikipedia") -> list[Document]:
    """``"wikipedia"``, ``"lee"``, ``"python-docs"``, joined with ``+`` (``"wikipedia+lee"``), or
    the reader's files/folders."""
    if isinstance(name_or_paths, str) and not os.path.exists(name_or_paths):
        names = name_or_paths.split("+")
        loaders = {"wikipedia": load_wikipedia, "lee": load_lee, "python-docs": load_python_docs}
        unknown = [n for n in names if n not in loaders]
        if unknown:
            raise ValueError(f"unknown corpus {unknown[0]!r}: use 'wikipedia', 'lee', 'python-docs', "
                             f"or paths to text files")
        return [d for n in names for d in loaders[n]()]
    return load_text_files(name_or_paths)


def train_valid_split(documents: Sequence[Document], valid_fraction: float = 0.05,
                      seed: int = 0) -> tuple[list[Document], list[Document]]:
    """Split by whole documents (so no validation sentence has a neighbour in training).

    A seeded shuffle of the indices picks ``max(1, round(n * valid_fraction))`` validation
    documents; both halves keep the original order.
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    n = len(documents)
    if n < 2:
        raise ValueError(f"need at least 2 documents to split, got {n}")
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    n_valid = min(n - 1, max(1, round(n * valid_fraction)))
    valid = set(idx[:n_valid])
    return ([d for i, d in enumerate(documents) if i not in valid],
            [d for i, d in enumerate(documents) if i in valid])


# ----------------------------------------------------------------------------- downloader
def download(url: str, sha256: str, filename: str | None = None, timeout: float = 30.0) -> Path:
    """Fetch ``url`` into the cache folder once and check its SHA-256; returns the local path.

    A cached file is re-verified on every call. An unreachable URL raises ``ConnectionError``
    saying so (e.g. when offline), and a checksum mismatch deletes the file and raises
    ``ValueError``; nothing half-downloaded is ever left under the final name.
    """
    if not re.fullmatch(r"[0-9a-fA-F]{64}", sha256 or ""):
        raise ValueError("sha256 must be 64 hexadecimal digits")
    name = filename or os.path.basename(urllib.request.urlparse(url).path) or "download"
    target = cache_dir() / "downloads" / name
    if target.exists():
        if sha256_file(target) == sha256.lower():
            return target
        target.unlink()
    with replaced_atomically(target) as tmp:
        with open(tmp, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    shutil.copyfileobj(resp, out)
            except (urllib.error.URLError, OSError) as e:
                raise ConnectionError(f"could not download {url} ({e}); are you offline? "
                                      "The embedded corpus load_corpus('wikipedia') works without internet.") from None
        got = sha256_file(tmp)
        if got != sha256.lower():
            raise ValueError(f"checksum mismatch for {url}: expected {sha256.lower()}, got {got}")
    return target
