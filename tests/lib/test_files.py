"""File helpers: atomic replacement of a file or a folder, and text files refused clearly."""

from __future__ import annotations

import pytest

from mlm_lib.files import read_text, replaced_atomically


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path):
    target = tmp_path / "sub" / "out.json"
    with replaced_atomically(target) as tmp:
        tmp.write_text("one")
    assert target.read_text() == "one"
    with pytest.raises(RuntimeError, match="half-way"):
        with replaced_atomically(target) as tmp:
            tmp.write_text("tw")
            raise RuntimeError("half-way")
    assert target.read_text() == "one"
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_a_folder_replaces_a_folder(tmp_path):
    target = tmp_path / "folder"
    for content in ("old", "new"):
        with replaced_atomically(target) as tmp:
            tmp.mkdir()
            (tmp / content).write_text(content)
    assert [p.name for p in target.iterdir()] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]


def test_binary_and_non_utf8_files_are_refused(tmp_path):
    binary, latin = tmp_path / "a.bin", tmp_path / "b.txt"
    binary.write_bytes(b"PK\x03\x04\x00\x00")
    latin.write_bytes("caf\u00e9".encode("latin-1"))
    with pytest.raises(ValueError, match="binary file, not a vocab.txt"):
        read_text(binary, "a vocab.txt")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_text(latin, "a vocab.txt")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    assert read_text(tmp_path / "bom.txt", "text", "utf-8-sig") == "hello"
