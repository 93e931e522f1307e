"""The embedded corpus, the reader's own files, the downloader and the train/validation split."""

from __future__ import annotations

import hashlib
import http.server
import re
import socket
import threading
from functools import partial
from pathlib import Path

import pytest

from mlm_lib import corpus
from mlm_lib.corpus import (Document, clean_wiki_text, documents_from_text, download,
                            load_corpus, load_lee, load_text_files, load_wikipedia, split_sentences,
                            train_valid_split)
from mlm_lib.files import HASH_BLOCK_BYTES, sha256_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def wiki() -> list[Document]:
    return load_wikipedia()


def test_wikipedia_is_real_clean_prose(wiki):
    n_sentences = sum(len(d.sentences) for d in wiki)
    assert len(wiki) >= 90
    assert n_sentences > 15_000
    assert sum(len(d.text) for d in wiki) > 2_000_000
    titles = {d.title for d in wiki}
    assert {"Anarchism", "Autism", "Aristotle", "Abraham Lincoln"} <= titles
    leftovers = re.compile(r"''|==|\{\{|\}\}|\[\[|\]\]|<ref|</|\|\s*thumb|^\*|^#|Category:")
    bad = [s for d in wiki for s in d.sentences if leftovers.search(s)]
    assert len(bad) < 0.001 * n_sentences, bad[:5]
    for d in wiki:
        assert d.sentences and all(s == s.strip() and s for s in d.sentences)
    # references and "See also" sections are cut off
    assert not any(s.startswith("ISBN") for d in wiki for s in d.sentences)


def test_wikipedia_cache_is_deterministic(tmp_path, monkeypatch, wiki):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path))
    first = load_wikipedia()
    assert list(tmp_path.glob("wikipedia-*.json")), "the cleaned corpus is cached under MLM_LIB_CACHE"
    again = load_wikipedia()
    assert first == again == wiki


def test_damaged_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "source.txt"
    source.write_text("anything")
    calls = []

    def build():
        calls.append(1)
        return [Document("t", ["One sentence.", "Two sentences."])]

    first = corpus._cached("demo", source, build)
    assert corpus._cached("demo", source, build) == first and len(calls) == 1
    (cached,) = (tmp_path / "cache").glob("demo-*.json")
    cached.write_text("{not json")
    assert corpus._cached("demo", source, build) == first and len(calls) == 2


def test_split_sentences():
    text = ("Dr. Smith met J. S. Mill in the U.S. in 1850. They talked, e.g. about logic! "
            "Was it fun? \"Yes,\" he said. 3 cats slept.")
    assert split_sentences(text) == [
        "Dr. Smith met J. S. Mill in the U.S. in 1850.", "They talked, e.g. about logic!",
        "Was it fun?", "\"Yes,\" he said.", "3 cats slept."]
    assert split_sentences("  \n ") == []
    assert split_sentences("no final stop") == ["no final stop"]


def test_clean_wiki_text():
    raw = ("'''Bold''' title is a thing that people like a lot.\n==History==\n"
           "* a list item that is long enough to count as prose.\n"
           "{| class=wikitable\n| cell one two three four five six.\n|}\n"
           "Some prose ( ) with an empty bracket and {{cite web}} template here.\n"
           "Category:Things\nshort line.\n==References==\nSmith, J. A book about things and more. 1999.")
    assert clean_wiki_text(raw) == [
        "Bold title is a thing that people like a lot.",
        "Some prose with an empty bracket and template here."]


def test_lee_and_named_corpora():
    lee = load_lee()
    assert len(lee) == 300
    both = load_corpus("wikipedia+lee")
    assert len(both) == len(load_wikipedia()) + 300
    with pytest.raises(ValueError, match="unknown corpus"):
        load_corpus("wikitext-103")


def test_text_files_and_folders(tmp_path):
    (tmp_path / "a.txt").write_text("First story. It has two sentences.\n\nSecond story here.", encoding="utf-8")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "b.txt").write_text("\ufeffAnother file. With text!", encoding="utf-8")
    (sub / "ignored.md").write_text("Not a txt file.")
    docs = load_text_files(tmp_path)
    assert [d.sentences for d in docs] == [["First story.", "It has two sentences."],
                                           ["Second story here."], ["Another file.", "With text!"]]
    assert load_corpus([tmp_path / "a.txt"])[0].title == "a#0"
    assert load_corpus(str(tmp_path / "a.txt")) == load_text_files(tmp_path / "a.txt")


def test_text_file_errors(tmp_path):
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ValueError, match="binary"):
        load_text_files(binary)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait.".encode("latin-1"))
    with pytest.raises(ValueError, match="UTF-8"):
        load_text_files(latin)
    with pytest.raises(ValueError, match="no such file"):
        load_text_files(tmp_path / "missing.txt")


def test_train_valid_split(wiki):
    train, valid = train_valid_split(wiki, valid_fraction=0.05, seed=0)
    assert len(valid) == round(len(wiki) * 0.05) and len(train) + len(valid) == len(wiki)
    assert {d.title for d in train}.isdisjoint({d.title for d in valid})
    assert train_valid_split(wiki, 0.05, seed=0) == (train, valid)
    assert train_valid_split(wiki, 0.05, seed=1)[1] != valid
    # both halves keep corpus order
    order = {d.title: i for i, d in enumerate(wiki)}
    assert [order[d.title] for d in train] == sorted(order[d.title] for d in train)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="valid_fraction"):
            train_valid_split(wiki, bad)
    with pytest.raises(ValueError, match="at least 2"):
        train_valid_split(wiki[:1])


# ----------------------------------------------------------------------------- downloader
SAMPLE = FIXTURES / "tiny_corpus.txt"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sha256_file_matches_hashlib_across_blocks(tmp_path):
    f = tmp_path / "big.bin"
    f.write_bytes(bytes(range(256)) * (HASH_BLOCK_BYTES // 256 * 2 + 3))  # two blocks and a bit
    assert sha256_file(f) == _sha(f)


def test_download_from_file_url_is_cached_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "tiny_corpus.txt"
    src.write_bytes(SAMPLE.read_bytes())
    path = download(src.as_uri(), _sha(src))
    assert path.parent == tmp_path / "cache" / "downloads" and path.read_bytes() == src.read_bytes()
    src.unlink()  # now "offline": the cached copy is used
    assert download(src.as_uri(), _sha(path)) == path
    docs = documents_from_text(path.read_text(encoding="utf-8"), title=path.stem)
    assert len(docs) >= 2 and all(d.sentences for d in docs)


def test_download_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="checksum mismatch"):
        download(SAMPLE.as_uri(), "0" * 64)
    assert list((tmp_path / "cache" / "downloads").iterdir()) == []
    with pytest.raises(ValueError, match="64 hexadecimal"):
        download(SAMPLE.as_uri(), "abc")


def test_download_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path))
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match="offline"):
        download(f"http://127.0.0.1:{port}/corpus.txt", _sha(SAMPLE), timeout=5)
    assert not any(tmp_path.rglob("*.tmp-*"))


def test_download_over_http(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path / "cache"))
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(FIXTURES))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/tiny_corpus.txt"
        path = download(url, _sha(SAMPLE))
        assert path.read_bytes() == SAMPLE.read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MLM_LIB_CACHE", str(tmp_path))
    assert corpus.cache_dir() == tmp_path
    monkeypatch.delenv("MLM_LIB_CACHE")
    assert corpus.cache_dir() == Path.home() / ".cache" / "mlm_lib"
