"""File helpers shared by the data side (corpora, downloads) and the storage side (checkpoints).

It lives on its own so that neither side has to import the other just to hash a file, read a
text file safely or replace one atomically.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Files are hashed in blocks of 1 MiB: large enough to be fast, small enough that a multi-gigabyte
# download never has to fit in memory.
HASH_BLOCK_BYTES = 1 << 20
# A file is judged binary by a NUL byte in its first 8 KiB, the same heuristic git uses.
BINARY_SNIFF_BYTES = 8192
# What is being written goes to "<name>.tmp-XXXXXXXX" next to its final name, so a crash leaves
# at worst a stray file or folder that says what it is; a replaced folder waits under that name
# plus PREVIOUS_SUFFIX for the moment between the two renames.
TMP_INFIX = ".tmp-"
TMP_ID_DIGITS = 8
PREVIOUS_SUFFIX = "-previous"
# The audit event (``sys.audit``) of a read that bypasses Python's ``open``, as safetensors' does
# (it maps the file from Rust). Whoever watches a process's reads with ``sys.addaudithook`` sees
# ``open`` for the rest and this for those: the book stamps each chapter with the files it read.
READ_EVENT = "mlm_lib.read"


def sha256_file(path: str | os.PathLike) -> str:
    """The hex SHA-256 of a file (downloads and checkpoints are checked by it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(HASH_BLOCK_BYTES), b""):
            h.update(block)
    return h.hexdigest()


def audit_read(path: str | os.PathLike) -> None:
    """Announce a read that Python's ``open`` will not see (call it just before the read)."""
    sys.audit(READ_EVENT, os.fspath(path))


def read_text(path: str | os.PathLike, what: str, encoding: str = "utf-8") -> str:
    """The text of a file that should hold ``what`` (e.g. "a vocab.txt"); a binary or
    non-UTF-8 file is refused with a message that says so, instead of a decoding traceback."""
    raw = Path(path).read_bytes()
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        raise ValueError(f"{path} looks like a binary file, not {what} (it contains NUL bytes)")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text, so it cannot be {what} ({e})") from None


@contextmanager
def replaced_atomically(target: str | os.PathLike) -> Iterator[Path]:
    """A temporary path next to ``target``: write a file there, or make a folder and fill it.

    When the block ends without error, the new content is flushed to the disk and renamed to
    ``target`` (``os.replace``), so a reader sees the old content or the new, never half of it.
    When the block fails, the temporary file or folder is deleted and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}{TMP_INFIX}{uuid.uuid4().hex[:TMP_ID_DIGITS]}")
    try:
        yield tmp
        _fsync_tree(tmp)
        _move_into_place(tmp, target)
        _fsync(target.parent)
    finally:
        _remove(tmp)  # still there only if something failed


def _move_into_place(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``. A file replaces a file in one rename; no system replaces a
    non-empty folder in one, so an existing folder is first renamed aside, then deleted.

    A crash between those two renames leaves no folder under ``target`` but the previous one
    whole as ``<tmp>-previous``; an error there puts it back."""
    if not (tmp.is_dir() and target.exists()):
        os.replace(tmp, target)
        return
    previous = tmp.with_name(tmp.name + PREVIOUS_SUFFIX)
    os.replace(target, previous)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(previous, target)
        raise
    shutil.rmtree(previous)


def _fsync_tree(path: Path) -> None:
    """Force a new file, or every file of a new folder and the folder itself, onto the disk, so
    that a crash just after the rename cannot leave a name whose bytes were only in memory."""
    for p in sorted(path.iterdir()) if path.is_dir() else []:
        _fsync(p)
    _fsync(path)


def _fsync(path: Path) -> None:
    """fsync a file or a folder; a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()
