"""Print the chapters longest first, by the seconds `make execute` recorded in each notebook.

`make test-notebooks` hands chapters to two nbval workers in this order: with the longest ones
started first, the short ones fill the end and neither worker waits long for the other. The
seconds come from each committed notebook's execution stamp (``scripts/execute_notebooks.py``), so
the order follows the chapters as they are, with no list to keep up to date. Standard library
only: the Makefile runs it before the virtual environment exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
STAMP_KEY = "fill_in_the_blank"


def recorded_seconds(path: Path) -> float:
    """How long the chapter took when it was last executed (0 where its stamp does not say)."""
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    return float(metadata.get(STAMP_KEY, {}).get("executed", {}).get("seconds", 0.0))


if __name__ == "__main__":
    timed = sorted(CHAPTERS, key=lambda p: (-recorded_seconds(p), p.name))
    sys.stdout.write(" ".join(p.relative_to(ROOT).as_posix() for p in timed) + "\n")
