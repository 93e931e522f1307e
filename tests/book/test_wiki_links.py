"""The editors'-links task files: rebuilt byte for byte from gensim's excerpt, in their fields'
formats, read back through `datasets`, and their links where the markup put them."""

from __future__ import annotations

import json

import pytest

from mlm_lib.book.task_shapes import read_and_unread
from mlm_lib.book.wiki_links import (PROPAGATED_FILES, SQUAD_FILES, TAGGING_FILES, TAGS, Link,
                                     LinkedParagraph, _unmark, link_agreement, linked_paragraphs,
                                     load_link_questions, load_link_tagging, mentions,
                                     propagate_links, read_conll, task_files)
from mlm_lib.metrics import bio_entities


def test_the_files_rebuild_byte_for_byte():
    read, unread = read_and_unread()
    rebuilt = task_files([d.title for d in read], [d.title for d in unread])
    assert set(rebuilt) == {*TAGGING_FILES.values(), *PROPAGATED_FILES.values(), *SQUAD_FILES.values()}
    for path, text in rebuilt.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} differs from its rebuild"
        assert path.stat().st_size < 300_000


def test_links_become_spans_of_the_cleaned_text():
    raw = ("'''Aristotle''' was a [[Greeks|Greek]] [[philosopher]] born in "
           "[[Stagira (ancient city)|Stagira]], taught by [[Plato#Life| Plato ]] and "
           "pictured in [[File:Bust.jpg|thumb|A [[bust]]]] long ago here.")
    (p,) = linked_paragraphs("Aristotle", raw)
    found = [(p.text[l.first:l.end], l.page) for l in p.links]
    assert found == [("Greek", "Greeks"), ("philosopher", "philosopher"),
                     ("Stagira", "Stagira (ancient city)"), ("Plato", "Plato"),
                     ("bust", "bust")]  # gensim keeps a file's caption, and so its links
    assert "  " not in p.text and "[[" not in p.text
    assert _unmark("a \u27e6page\u27ea words") is None  # a cut link is refused


def test_the_files_are_conll_and_squad_and_load_through_datasets():
    tagged = load_link_tagging()
    assert tagged["test"].features["tags"].feature.names == TAGS
    sentences = read_conll(TAGGING_FILES["test"])
    assert [list(s) for s in tagged["test"]["tokens"]] == [w for w, _ in sentences]
    assert sum(len(bio_entities(t)) for _, t in sentences) > 100
    questions = load_link_questions()
    assert set(questions["test"].column_names) == {"id", "title", "context", "question", "answers"}
    raw = json.loads(SQUAD_FILES["test"].read_text(encoding="utf-8"))
    n = sum(len(p["qas"]) for a in raw["data"] for p in a["paragraphs"])
    assert questions["test"].num_rows == n
    for row in questions["train"]:
        (text,), (start,) = row["answers"]["text"], row["answers"]["answer_start"]
        assert row["context"][start:start + len(text)] == text
        assert text.lower() != row["question"].lower()


def test_link_agreement_counts_unlinked_mentions():
    counts = link_agreement(["Aristotle"])
    assert counts["linked"] > 0 and counts["unlinked"] > 0


def test_a_readers_own_files_load_with_their_own_tags(tmp_path):
    """Other tags than the book's: "O" first, then the rest sorted, the same for every split."""
    (tmp_path / "a.conll").write_text("Anna\tB-PERSON\nlives\tO\nin\tO\nRiga\tB-CITY\n\n")
    (tmp_path / "b.conll").write_text("Riga\tB-CITY\nis\tO\nold\tO\n\n")
    data = load_link_tagging({"train": tmp_path / "a.conll", "test": tmp_path / "b.conll"})
    names = data["train"].features["tags"].feature.names
    assert names == ["O", "B-CITY", "B-PERSON"] == data["test"].features["tags"].feature.names
    assert data["train"][0] == {"tokens": ["Anna", "lives", "in", "Riga"], "tags": [2, 0, 0, 1]}
    squad = {"data": [{"title": "Riga", "paragraphs": [{"context": "Riga is old.", "qas": [
        {"id": "q1", "question": "what is old?", "answers": [{"text": "Riga", "answer_start": 0}]}]}]}]}
    (tmp_path / "q.json").write_text(json.dumps(squad))
    questions = load_link_questions({"validation": tmp_path / "q.json"})
    assert questions["validation"][0]["answers"] == {"text": ["Riga"], "answer_start": [0]}


def test_propagation_links_every_other_mention_in_the_article_and_nothing_else():
    text = "The Greek philosopher met a greek poet . Philosophers and the philosopher king ."
    first = text.index("philosopher")
    (p,) = propagate_links([LinkedParagraph("A", text, (Link(4, 9, "Greeks"),
                                                        Link(first, first + 11, "philosopher")))])
    found = [(text[l.first:l.end], l.page) for l in p.links]
    # any case, whole words only ("Philosophers" is another word), each mention once
    assert found == [("Greek", "Greeks"), ("philosopher", "philosopher"), ("greek", "Greeks"),
                     ("philosopher", "philosopher")]
    assert mentions("a the an", {("the",): "x"}) == [(2, 5, "x")]
    # the longest phrase wins where two start at the same word
    assert mentions("New York City", {("new",): "a", ("new", "york"): "b"}) == [(0, 8, "b")]


def test_propagated_files_tag_the_same_sentences_more_often():
    plain, more = (read_conll(files["test"]) for files in (TAGGING_FILES, PROPAGATED_FILES))
    assert [w for w, _ in plain] == [w for w, _ in more]
    tagged = lambda sentences: sum(t != "O" for _, ts in sentences for t in ts)
    assert tagged(more) > tagged(plain)
    # an editor's tag is never taken away
    assert all(m != "O" for (_, ts), (_, ms) in zip(plain, more) for t, m in zip(ts, ms) if t != "O")
    counts = link_agreement(["Aristotle"], propagated=True)
    assert counts["unlinked"] <= 0.01 * counts["linked"]
