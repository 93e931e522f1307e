"""Labels that Wikipedia's editors wrote: the links of the book's Wikipedia excerpt.

An editor who writes ``[[Stagira (ancient city)|Stagira]]`` marks the words "Stagira" as a link
to the page "Stagira (ancient city)". The cleaned corpus (:func:`mlm_lib.corpus.load_wikipedia`)
drops the markup and keeps the words; here the markup is kept, as character spans of the same
cleaned paragraphs, and becomes two tasks in their fields' standard formats:

- **tagging**, CoNLL's columns (a word and its tag per line, a blank line between sentences):
  ``B-LINK`` / ``I-LINK`` on the words an editor linked, ``O`` elsewhere. What the tag means is
  "linked by an editor", not "a named entity": Wikipedia's style asks for a link at a page's
  first mention only, so later mentions of the same thing are ``O`` (:func:`link_agreement`
  measures how often), and editors also link common nouns ("philosopher"). The propagated files
  (:func:`propagate_links`) tag every mention in the article of a phrase linked in it.
- **span extraction**, SQuAD's JSON (``data`` / ``paragraphs`` / ``context`` / ``qas`` with
  ``answers`` of ``text`` and ``answer_start``): the question is the title of the linked page, the
  context the paragraph, the answer the words the editor linked to it. Links whose words are the
  page title itself (lowercased) are left out, so an answer is never the question copied. Both
  the page and the words are the editor's; the question is a page title, not a sentence a
  person asked.

Training examples come from articles the book's model read, test examples from the five it held
out (:func:`mlm_lib.book.task_shapes.read_and_unread`). :func:`write_task_files` rebuilds the
files under ``assets/tasks`` byte for byte from gensim's excerpt.
"""

from __future__ import annotations

import bz2
import functools
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlm_lib.corpus import MIN_SENTENCES, clean_wiki_text, split_sentences, wikipedia_path
from mlm_lib.tokenizer import word_spans

ASSETS = Path(__file__).parent / "assets" / "tasks"
TAGGING_FILES = {"train": ASSETS / "wiki_links.train.conll", "test": ASSETS / "wiki_links.test.conll"}
# the same sentences, every mention of a phrase linked in the article tagged (propagate_links)
PROPAGATED_FILES = {split: ASSETS / f"wiki_links_propagated.{split}.conll" for split in TAGGING_FILES}
SQUAD_FILES = {"train": ASSETS / "wiki_link_questions.train.json",
               "test": ASSETS / "wiki_link_questions.test.json"}
# sentences (tagging) or questions (span) of each split; the test questions are every one the
# five unread articles give
SIZES = {"train": 480, "test": 180}
QUESTIONS = {"train": 480, "test": None}
MAX_CONTEXT_WORDS = 160  # a longer paragraph is left out, to keep the files small
TAGS = ["O", "B-LINK", "I-LINK"]
# Markers put in place of a link before gensim's filter_wiki, which would drop the link's
# markup and keep its words: OPEN target SPLIT anchor CLOSE.
OPEN, SPLIT, CLOSE = "\u27e6", "\u27ea", "\u27e7"
_LINK = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]]*))?\]\]")
_MARKED = re.compile(f"{OPEN}([^{OPEN}{SPLIT}{CLOSE}]*){SPLIT}([^{OPEN}{SPLIT}{CLOSE}]*){CLOSE}")
_NAMESPACE = re.compile(r"^\s*:?\s*[A-Za-z-]+\s*:")  # File:, Category:, wikt:, de:, ...


@dataclass(frozen=True)
class Link:
    """An editor's link in a cleaned paragraph: characters ``[first, end)``, and the page."""

    first: int
    end: int
    page: str


@dataclass(frozen=True)
class LinkedParagraph:
    """One cleaned paragraph of an article and the links in it."""

    title: str
    text: str
    links: tuple[Link, ...]


def _mark(match: re.Match) -> str:
    target, anchor = match.group(1), match.group(2)
    if _NAMESPACE.match(target):
        return match.group(0)  # a file, a category or another wiki: filter_wiki's business
    target = target.split("#")[0].strip()
    anchor = target if anchor is None else anchor
    if not target or not anchor.strip():
        return anchor
    return f"{OPEN}{target}{SPLIT}{anchor}{CLOSE}"


def _unmark(paragraph: str) -> tuple[str, tuple[Link, ...]] | None:
    """The paragraph's text and links, or None when a marker was cut (its link half removed)."""
    text, links, at = [], [], 0
    for m in _MARKED.finditer(paragraph):
        text.append(paragraph[at:m.start()])
        first = sum(map(len, text))
        anchor = m.group(2)
        stripped = anchor.strip()
        lead = len(anchor) - len(anchor.lstrip())
        text.append(anchor)
        if stripped:
            links.append(Link(first + lead, first + lead + len(stripped), m.group(1).strip()))
        at = m.end()
    text.append(paragraph[at:])
    plain = "".join(text)
    if any(c in plain for c in (OPEN, SPLIT, CLOSE)):
        return None
    # one space between words, as split_sentences has it; the links' characters follow
    where, out = [], []
    for ch in plain:
        where.append(len(out))
        if not ch.isspace():
            out.append(ch)
        elif out and out[-1] != " ":
            out.append(" ")
    where.append(len(out))
    collapsed = "".join(out).rstrip()
    return collapsed, tuple(Link(where[l.first], where[l.end - 1] + 1, l.page) for l in links)


def linked_paragraphs(title: str, raw: str) -> list[LinkedParagraph]:
    """An article's paragraphs, cleaned as the corpus cleans them, with their links."""
    from gensim.corpora.wikicorpus import filter_wiki  # slow to import; only this needs it
    previous = None
    while previous != raw:  # innermost links first: a caption's link inside a file link
        previous, raw = raw, _LINK.sub(_mark, raw)
    out = []
    for paragraph in clean_wiki_text(filter_wiki(raw)):
        parsed = _unmark(paragraph.strip())
        if parsed is not None:
            out.append(LinkedParagraph(title, *parsed))
    return out


@functools.lru_cache(maxsize=1)
def excerpt_paragraphs() -> dict[str, tuple[LinkedParagraph, ...]]:
    """Every article of the excerpt that the corpus keeps: title -> its linked paragraphs."""
    from gensim.corpora.wikicorpus import extract_pages
    out = {}
    with bz2.open(wikipedia_path()) as f:
        for title, raw, _ in extract_pages(f):
            if raw.lstrip().upper().startswith("#REDIRECT"):
                continue
            paragraphs = linked_paragraphs(title, raw)
            if sum(len(split_sentences(p.text)) for p in paragraphs) >= MIN_SENTENCES:
                out[title] = tuple(paragraphs)
    return out


# ---------------------------------------------------------------- tagging

def _sentences_with_links(p: LinkedParagraph) -> list[tuple[list[str], list[str]]]:
    """The paragraph's sentences as (words, BIO tags); a word that overlaps a link is in it."""
    out, at = [], 0
    for sentence in split_sentences(p.text):
        first = p.text.index(sentence, at)
        at = first + len(sentence)
        words, tags = [], []
        previous = None
        for a, b in word_spans(sentence):
            link = next((k for k, l in enumerate(p.links)
                         if l.first < first + b and l.end > first + a), None)
            words.append(sentence[a:b])
            tags.append("O" if link is None else ("I-LINK" if link == previous else "B-LINK"))
            previous = link
        out.append((words, tags))
    return out


def tagged_sentences(titles: Sequence[str], n: int, seed: int = 0, propagated: bool = False
                     ) -> list[tuple[list[str], list[str]]]:
    """``n`` sentences of the articles, drawn with ``seed``, in their words and BIO tags;
    ``propagated``: the same sentences, tagged after :func:`propagate_links`."""
    pages = excerpt_paragraphs()
    pool = [s for t in titles
            for p in (propagate_links(pages[t]) if propagated else pages[t])
            for s in _sentences_with_links(p) if len(s[0]) >= 6]
    if len(pool) < n:
        raise ValueError(f"asked for {n} sentences, the articles have {len(pool)}")
    return random.Random(seed).sample(pool, n)


def conll_text(sentences: Sequence[tuple[list[str], list[str]]]) -> str:
    """CoNLL's columns: ``word<TAB>tag`` per line, a blank line after each sentence."""
    return "".join("".join(f"{w}\t{t}\n" for w, t in zip(words, tags)) + "\n"
                   for words, tags in sentences)


def read_conll(path: str | Path) -> list[tuple[list[str], list[str]]]:
    """The sentences of a two-column CoNLL file."""
    out, words, tags = [], [], []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            if words:
                out.append((words, tags))
            words, tags = [], []
            continue
        word, tag = line.rsplit("\t", 1)
        words.append(word)
        tags.append(tag)
    return out


# ---------------------------------------------------------------- span extraction

def paragraph_questions(p: LinkedParagraph) -> list[Link]:
    """The links of a paragraph that make questions: the first link to each page, when its words
    are not the page's title (lowercased), so an answer is never the question copied."""
    seen, out = set(), []
    for link in p.links:
        if link.page in seen:
            continue
        seen.add(link.page)
        if p.text[link.first:link.end].lower() != link.page.lower():
            out.append(link)
    return out


def link_questions(titles: Sequence[str], n: int | None, seed: int = 0) -> dict:
    """Questions in SQuAD's JSON: the linked page's title, the paragraph, the linked words.

    Paragraphs of at most ``MAX_CONTEXT_WORDS`` words are drawn in a seeded order and all their
    questions taken (as SQuAD asks several questions of one paragraph), until there are at least
    ``n``; ``n=None``: every paragraph."""
    pages = excerpt_paragraphs()
    pool = [(t, k) for t in titles for k, p in enumerate(pages[t])
            if len(p.text.split()) <= MAX_CONTEXT_WORDS and paragraph_questions(p)]
    random.Random(seed).shuffle(pool)
    chosen, count = [], 0
    for t, k in pool:
        if n is not None and count >= n:
            break
        chosen.append((t, k))
        count += len(paragraph_questions(pages[t][k]))
    if n is not None and count < n:
        raise ValueError(f"asked for {n} questions, the articles have {count}")
    data: dict[str, list] = {}
    for t, k in sorted(chosen, key=lambda tk: (titles.index(tk[0]), tk[1])):
        p = pages[t][k]
        data.setdefault(t, []).append({"context": p.text, "qas": [
            {"id": f"{t}/{k}/{link.first}", "question": link.page,
             "answers": [{"text": p.text[link.first:link.end], "answer_start": link.first}]}
            for link in paragraph_questions(p)]})
    return {"version": "wiki-links-1",
            "data": [{"title": t, "paragraphs": ps} for t, ps in data.items()]}


# ---------------------------------------------------------------- how noisy the tags are

MIN_PHRASE_CHARS = 3  # shorter linked words ("a", "US"?) are too often something else
MAX_PHRASE_WORDS = 8  # the longest linked phrase matched as a mention


def _words(text: str) -> tuple[str, ...]:
    return tuple(text[a:b].lower() for a, b in word_spans(text))


def linked_phrases(paragraphs: Sequence[LinkedParagraph]) -> dict[tuple[str, ...], str]:
    """Every phrase an editor linked in these paragraphs, as lowercased words, and the page of its
    first link."""
    out: dict[tuple[str, ...], str] = {}
    for p in paragraphs:
        for link in p.links:
            words = _words(p.text[link.first:link.end])
            if len(" ".join(words)) >= MIN_PHRASE_CHARS and len(words) <= MAX_PHRASE_WORDS:
                out.setdefault(words, link.page)
    return out


def mentions(text: str, phrases: Mapping[tuple[str, ...], str]) -> list[tuple[int, int, str]]:
    """(first, end, page) of each mention of ``phrases`` in ``text``: whole words, any case, the
    longest phrase that starts at a word, left to right, no two overlapping."""
    spans = word_spans(text)
    words = [text[a:b].lower() for a, b in spans]
    found, i = [], 0
    while i < len(words):
        for n in range(min(MAX_PHRASE_WORDS, len(words) - i), 0, -1):
            page = phrases.get(tuple(words[i:i + n]))
            if page is not None:
                found.append((spans[i][0], spans[i + n - 1][1], page))
                i += n
                break
        else:
            i += 1
    return found


def _inside(first: int, end: int, links: Sequence[Link]) -> bool:
    return any(l.first <= first and end <= l.end for l in links)


def propagate_links(paragraphs: Sequence[LinkedParagraph]) -> tuple[LinkedParagraph, ...]:
    """An article's paragraphs with every other mention of a phrase an editor linked in the
    article linked too, one of the ways WikiNER "infers additional links" (Nothman et al. 2013,
    abstract; their heuristics go further, across articles and to the article's own title). A
    mention that overlaps an editor's link is left to that link."""
    phrases = linked_phrases(paragraphs)
    out = []
    for p in paragraphs:
        added = [Link(a, b, page) for a, b, page in mentions(p.text, phrases)
                 if not any(l.first < b and a < l.end for l in p.links)]
        out.append(LinkedParagraph(p.title, p.text,
                                   tuple(sorted(p.links + tuple(added), key=lambda l: l.first))))
    return tuple(out)


def link_agreement(titles: Sequence[str], propagated: bool = False,
                   phrases_from: Sequence[str] | None = None) -> dict[str, int]:
    """How often a linked phrase is linked where it stands again: every mention (whole words, any
    case) in each article of a phrase linked in that article, counted as inside a link or not.
    ``phrases_from``: take the phrases from these articles instead (all of them: is a phrase linked
    in one article labelled in another?); ``propagated``: count the labels after
    :func:`propagate_links`."""
    pages = excerpt_paragraphs()
    labels = {t: propagate_links(pages[t]) if propagated else pages[t] for t in titles}
    shared = None if phrases_from is None else linked_phrases(
        [p for t in phrases_from for p in pages[t]])
    linked = unlinked = 0
    for t in titles:
        phrases = shared if shared is not None else linked_phrases(pages[t])
        for p in labels[t]:
            for a, b, _ in mentions(p.text, phrases):
                inside = _inside(a, b, p.links)
                linked, unlinked = linked + inside, unlinked + (not inside)
    return {"linked": linked, "unlinked": unlinked}


# ---------------------------------------------------------------- the files

def task_files(read: Sequence[str], unread: Sequence[str]) -> dict[Path, str]:
    """Each task file's path and text: training data from ``read``, test data from ``unread``."""
    out = {}
    for split, titles in (("train", read), ("test", unread)):
        out[TAGGING_FILES[split]] = conll_text(tagged_sentences(titles, SIZES[split]))
        out[PROPAGATED_FILES[split]] = conll_text(tagged_sentences(titles, SIZES[split],
                                                                   propagated=True))
        questions = link_questions(list(titles), QUESTIONS[split])
        out[SQUAD_FILES[split]] = json.dumps(questions, separators=(",", ":"),
                                             ensure_ascii=False) + "\n"
    return out


def write_task_files(read: Sequence[str], unread: Sequence[str]) -> list[Path]:
    """Rebuild the task files from gensim's excerpt (deterministic: a test compares them)."""
    ASSETS.mkdir(parents=True, exist_ok=True)
    files = task_files(read, unread)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)


# ---------------------------------------------------------------- reading them back

def load_link_tagging(files: Mapping[str, str | Path] = TAGGING_FILES) -> Any:
    """CoNLL files (``word<TAB>tag`` lines, a blank line after each sentence) as a
    ``datasets.DatasetDict``, a split per file, with columns ``tokens`` and ``tags``: the layout of
    the Hub's ``conll2003``. ``datasets`` has no CoNLL reader for local files, so the columns are
    read here. ``tags`` is a ``ClassLabel`` of ``O`` and then every other tag of the files in
    sorted order: for the book's files, :data:`TAGS`; ``files`` may name a reader's own."""
    import datasets  # slow to import; only the readers need it
    sentences = {split: read_conll(path) for split, path in files.items()}
    names = ["O", *sorted({t for split in sentences.values() for _, ts in split for t in ts} - {"O"})]
    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "tags": datasets.Sequence(datasets.ClassLabel(names=names))})
    return datasets.DatasetDict({
        split: datasets.Dataset.from_dict({"tokens": [w for w, _ in rows],
                                           "tags": [[names.index(t) for t in ts] for _, ts in rows]},
                                          features=features)
        for split, rows in sentences.items()})


def _flatten_squad(batch: dict[str, list]) -> dict[str, list]:
    out: dict[str, list] = {"id": [], "title": [], "context": [], "question": [], "answers": []}
    for title, paragraphs in zip(batch["title"], batch["paragraphs"]):
        for p in paragraphs:
            for qa in p["qas"]:
                out["id"].append(qa["id"])
                out["title"].append(title)
                out["context"].append(p["context"])
                out["question"].append(qa["question"])
                out["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                       "answer_start": [a["answer_start"] for a in qa["answers"]]})
    return out


def load_link_questions(files: Mapping[str, str | Path] = SQUAD_FILES) -> Any:
    """SQuAD files through ``datasets.load_dataset("json", field="data")``, a split per file,
    flattened to the columns of the Hub's ``squad`` (``id``, ``title``, ``context``, ``question``,
    ``answers`` with ``text`` and ``answer_start`` lists); ``files`` may name a reader's own."""
    import datasets
    datasets.disable_progress_bars()  # a bar per split and per map: noise in a chapter's output
    raw = datasets.load_dataset("json", data_files={k: str(v) for k, v in files.items()},
                                field="data")
    return raw.map(_flatten_squad, batched=True, remove_columns=next(iter(raw.values())).column_names)
