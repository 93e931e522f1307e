"""Results files: experiments too long for a chapter, run once by a documented command, kept.

A chapter must execute in about two minutes on two CPU cores; a comparison worth a conclusion
needs several seeds. So the multi-seed experiments of :mod:`mlm_lib.book.experiments` run from the
command line (``python -m mlm_lib.book.experiments corruption --seeds 5``) and write one JSON file
each into :data:`RESULTS_DIR`. The file says how it was made (the command, the library version,
the git commit, the date, the threads and the wall time) and holds one row per run: the arm (the
setting that differs), the seed and the metrics. Chapters load it with :func:`load_results` and
summarise it with :mod:`mlm_lib.stats`; a test re-runs one configuration of every file, so a
file cannot silently stop describing what the library does.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from mlm_lib import __version__
from mlm_lib.files import replaced_atomically
from mlm_lib.stats import Interval, seed_interval

RESULTS_DIR = Path(__file__).resolve().parent / "assets" / "results"
FORMAT = "mlm_lib-results/1"


@dataclass
class Run:
    """One training run of an experiment: which arm, which seed, what it measured."""

    arm: str
    seed: int
    metrics: dict[str, float]
    wall_s: float


@dataclass
class Results:
    """An experiment's runs and how they were produced."""

    experiment: str
    question: str
    arms: list[str]
    seeds: list[int]
    settings: dict[str, Any]
    runs: list[Run]
    provenance: dict[str, Any] = field(default_factory=dict)

    def values(self, arm: str, metric: str) -> list[float]:
        """``metric`` of every run of ``arm``, in seed order."""
        if arm not in self.arms:
            raise KeyError(f"{self.experiment} has no arm {arm!r}; its arms are {self.arms}")
        runs = sorted((r for r in self.runs if r.arm == arm), key=lambda r: r.seed)
        if runs and metric not in runs[0].metrics:
            raise KeyError(f"{self.experiment} has no metric {metric!r}; it has "
                           f"{sorted(runs[0].metrics)}")
        return [r.metrics[metric] for r in runs]

    def interval(self, arm: str, metric: str) -> Interval:
        """Mean of ``metric`` over the seeds of ``arm`` with its 95% t interval."""
        return seed_interval(self.values(arm, metric))

    def difference(self, arm: str, other: str, metric: str) -> Interval:
        """``arm`` minus ``other``, paired by seed (both arms of one seed share the data order
        and, where they start from the same model, the start), with its 95% t interval."""
        a, b = self.values(arm, metric), self.values(other, metric)
        if len(a) != len(b):
            raise ValueError(f"arms {arm!r} and {other!r} have {len(a)} and {len(b)} runs")
        return seed_interval([x - y for x, y in zip(a, b)])


def git_commit() -> str:
    """The commit of the checkout the library runs from, "+uncommitted" when the library's own
    files differ from it, "unknown" outside a git checkout. Call it before a run starts."""
    here = Path(__file__).resolve().parents[1]  # the whole package, mlm_lib, not only mlm_lib.book
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here,
                             capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."],
                               cwd=here, capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip()
        return out.stdout.strip() + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(command: str, wall_s: float, commit: str | None = None) -> dict[str, Any]:
    """How a results file was made: enough to run it again and to know what ran (``commit``:
    :func:`git_commit` taken when the run started)."""
    return {"command": command, "mlm_lib_version": __version__,
            "git_commit": commit or git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "threads": torch.get_num_threads(), "wall_s": round(wall_s, 1),
            "torch_version": torch.__version__, "machine": platform.machine(),
            "python": platform.python_version()}


def results_path(experiment: str, directory: str | os.PathLike[str] | None = None) -> Path:
    return Path(directory or RESULTS_DIR) / f"{experiment}.json"


def save_results(results: Results, directory: str | os.PathLike[str] | None = None) -> Path:
    """Write ``results`` as JSON, atomically (a crash leaves the old file, never half a file)."""
    for run in results.runs:
        bad = [k for k, v in run.metrics.items() if not math.isfinite(v)]
        if bad:
            raise ValueError(f"run {run.arm!r} seed {run.seed}: metrics {bad} are not finite")
    path = results_path(results.experiment, directory)
    payload = {"format": FORMAT, **asdict(results)}
    with replaced_atomically(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def load_results(experiment: str, directory: str | os.PathLike[str] | None = None) -> Results:
    """Read the results file of ``experiment`` (see :data:`RESULTS_DIR`)."""
    path = results_path(experiment, directory)
    if not path.is_file():
        raise FileNotFoundError(f"no results file for {experiment!r} at {path}; make it with "
                                f"`python -m mlm_lib.book.experiments {experiment}`")
    payload = json.loads(path.read_text())
    if payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a results file of format {FORMAT} "
                         f"(found {payload.get('format')!r})")
    runs = [Run(**r) for r in payload["runs"]]
    return Results(payload["experiment"], payload["question"], payload["arms"], payload["seeds"],
                   payload["settings"], runs, payload["provenance"])


def summary_table(results: Results, metrics: Sequence[str], arms: Sequence[str] | None = None
                  ) -> str:
    """One line per arm: each metric's mean over seeds with its 95% interval."""
    arms = list(arms or results.arms)
    width = max(len(a) for a in arms)
    lines = [f"{len(results.seeds)} seeds per arm; mean [95% interval]"]
    for arm in arms:
        cells = "   ".join(f"{m} {results.interval(arm, m)}" for m in metrics)
        lines.append(f"{arm:>{width}}: {cells}")
    return "\n".join(lines)
