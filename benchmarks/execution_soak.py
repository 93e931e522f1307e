"""Execute chapters over and over and flag any cell that takes far longer than usual: a stall.

The site build once sat 300 s on a finished cell (chapter 3's `widgets.interact`): the kernel had
replied, but the executor's asyncio poll on the shell socket never woke up, and only the cell
timeout's final non-blocking poll found the reply. That is the signature of a lost wake-up:
ZeroMQ signals a socket's file descriptor edge-triggered, and an edge consumed elsewhere (a send or
an events query on the same socket) leaves an asyncio reader asleep with a message queued (pyzmq
issue 1558; ipykernel issue 1554 is the same race on the kernel's side). nbclient, which Jupyter
Book and `make execute` use, waits that way; nbval's blocking client calls zmq_poll, which reads
the socket's state and cannot sleep through a queued message. So `make test` executes chapters only through nbval and
the site renders committed outputs; this script checks both executors for stalls:

    python benchmarks/execution_soak.py --executor nbval   --executions 26
    python benchmarks/execution_soak.py --executor nbclient --executions 24 notebooks/0[0-5]*.ipynb

A cell stalls when it takes more than 3 times its fastest time over the rounds plus one second
(small cells jitter by more than 3x). The fastest time, not the median: with two rounds the median
is the mean of the two, and no time can exceed 3 times that, so a median rule could never fire.
The last line is `stalled_cells: N`; the exit status is 1 if N > 0.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACTOR = 3.0
SLACK_S = 1.0
CELL_TIMEOUT_S = 120


def nbval_round(paths: list[Path]) -> dict[tuple[str, str], float]:
    """One pytest --nbval-lax run over `paths`; seconds per (notebook, cell)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
               "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
               f"--nbval-cell-timeout={CELL_TIMEOUT_S}", "-p", "no:cacheprovider", "-q",
               f"--junitxml={report}", *map(str, paths)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode not in (0, 1):
            raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
        times = {}
        for case in ET.parse(report).iter("testcase"):
            times[(case.get("classname", ""), case.get("name", ""))] = float(case.get("time", 0))
        return times


def nbclient_round(paths: list[Path]) -> dict[tuple[str, str], float]:
    """Execute each notebook with nbclient (as `make execute` does); seconds per cell."""
    import nbformat
    from nbclient import NotebookClient

    times = {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        for i, cell in enumerate(nb.cells):
            ex = cell.get("metadata", {}).get("execution", {})
            if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
                start, end = (datetime.fromisoformat(ex[k].replace("Z", "+00:00"))
                              for k in ("iopub.execute_input", "shell.execute_reply"))
                times[(path.name, f"cell {i}")] = (end - start).total_seconds()
    return times


def find_stalls(history: dict[tuple[str, str], list[float]]
                ) -> list[tuple[tuple[str, str], float, float]]:
    """(cell, seconds, fastest seconds) for every execution over FACTOR x its fastest + SLACK_S."""
    stalls = []
    for key, seconds in history.items():
        usual = min(seconds)
        stalls += [(key, s, usual) for s in seconds if s > FACTOR * usual + SLACK_S]
    return stalls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--executor", choices=["nbval", "nbclient"], default="nbval")
    parser.add_argument("--executions", type=int, default=20, help="notebook executions in all")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    rounds = max(2, math.ceil(args.executions / len(paths)))
    run = nbval_round if args.executor == "nbval" else nbclient_round
    history: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        start = time.perf_counter()
        for key, seconds in run(paths).items():
            history.setdefault(key, []).append(seconds)
        slowest = max(history, key=lambda k: history[k][-1])
        print(f"round {r + 1}/{rounds}: {len(paths)} notebooks in {time.perf_counter() - start:.0f} s; "
              f"slowest cell {history[slowest][-1]:.1f} s ({slowest[0]} {slowest[1]})", flush=True)
    stalls = find_stalls(history)
    for (nb, cell), s, usual in stalls:
        print(f"STALL {nb} {cell}: {s:.1f} s against a fastest of {usual:.1f} s")
    timed = [s for s in history.values() if min(s) >= 0.5]  # ratios of tiny cells are noise
    worst = max((max(s) / min(s) for s in timed), default=1.0)
    print(f"executor: {args.executor}; notebook executions: {rounds * len(paths)}; "
          f"cells timed: {sum(map(len, history.values()))}; worst slowest/fastest ratio of a cell (cells of 0.5 s or more): {worst:.2f}")
    print(f"stalled_cells: {len(stalls)}")
    return 1 if stalls else 0


if __name__ == "__main__":
    sys.exit(main())
