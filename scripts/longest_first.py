"""Print the chapters longest first, by the cell times `make execute` recorded in each notebook.

`make test-notebooks` hands chapters to two nbval workers in this order: with the longest ones
started first, the short ones fill the end and neither worker waits long for the other. The
times come from the committed notebooks (nbclient's execution timestamps), so the order follows
the chapters as they are, with no list to keep up to date. Standard library only: the Makefile
runs it before the virtual environment exists.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _seconds(cell: dict) -> float:
    """How long a code cell took when the chapter was last executed (0 where not recorded)."""
    times = cell.get("metadata", {}).get("execution", {})
    start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def recorded_seconds(path: Path) -> float:
    """The sum of a chapter's recorded cell times."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return sum(_seconds(c) for c in cells if c["cell_type"] == "code")


if __name__ == "__main__":
    timed = sorted(CHAPTERS, key=lambda p: (-recorded_seconds(p), p.name))
    sys.stdout.write(" ".join(p.relative_to(ROOT).as_posix() for p in timed) + "\n")
