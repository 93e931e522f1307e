"""File helpers shared by the data side (downloads) and the storage side (checkpoints).

It lives on its own so that neither side has to import the other just to hash a file.
"""

from __future__ import annotations

import hashlib
import os

# Files are hashed in blocks of 1 MiB: large enough to be fast, small enough that a multi-gigabyte
# download never has to fit in memory.
HASH_BLOCK_BYTES = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """The hex SHA-256 of a file (downloads and checkpoints are checked by it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(HASH_BLOCK_BYTES), b""):
            h.update(block)
    return h.hexdigest()
