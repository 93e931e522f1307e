"""File helpers: atomic replacement of a file or a folder, text files refused clearly, and reads
that bypass Python's ``open`` announced to whoever watches the process's reads."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from mlm_lib.files import READ_EVENT, read_text, replaced_atomically

LIBRARY = Path(__file__).resolve().parents[2] / "mlm_lib"
# Readers that map a file without Python's open(): the audit hook never sees them.
SILENT_READERS = {"load_file", "safe_open"}


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


def unannounced_reads(source: str) -> list[str]:
    """The functions of ``source`` that call a silent reader without calling ``audit_read``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        called = {getattr(c.func, "id", getattr(c.func, "attr", "")) for c in ast.walk(node)
                  if isinstance(c, ast.Call)}
        if called & SILENT_READERS and "audit_read" not in called:
            found.append(node.name)
    return found


def test_every_silent_read_of_the_library_is_announced():
    """The book stamps each chapter with the files it read, seen through the audit hook; a
    safetensors read the hook cannot see would leave a chapter current after its weights changed."""
    missing = {path.relative_to(LIBRARY).as_posix(): names for path in sorted(LIBRARY.rglob("*.py"))
               if (names := unannounced_reads(path.read_text(encoding="utf-8")))}
    assert not missing, f"read without audit_read: {missing}"
    assert unannounced_reads("def f(p):\n    return load_file(p)\n") == ["f"]
    assert unannounced_reads("def f(p):\n    audit_read(p)\n    return load_file(p)\n") == []


def test_a_checkpoint_read_raises_the_read_event(tmp_path):
    """In a fresh process (an audit hook cannot be removed): loading a checkpoint's weights raises
    READ_EVENT with their path."""
    code = f"""
import sys, torch
from mlm_lib.checkpoint import load_checkpoint, save_checkpoint
from mlm_lib.config import BertConfig
from mlm_lib.model import BertForPreTraining
seen = []
sys.addaudithook(lambda event, args: seen.append(args[0]) if event == {READ_EVENT!r} else None)
model = BertForPreTraining(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=16))
save_checkpoint({str(tmp_path / "ckpt")!r}, model, config={{}}, step=0)
load_checkpoint({str(tmp_path / "ckpt")!r})
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "model.safetensors" in out.stdout, out.stdout + out.stderr
