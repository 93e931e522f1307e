"""Results files: they round-trip, say how they were made, and still describe the library.

The reproduction test re-runs the cheapest configuration (one arm, the first seed) of every
committed results file and checks that it lands within the experiment's stated tolerance of the
stored metrics, so a change to the library that changes an experiment's outcome cannot leave the
chapters plotting stale numbers.
"""

from __future__ import annotations

import json

import pytest
import torch

from mlm_lib.book.experiments import EXPERIMENTS, main
from mlm_lib.book.results import (FORMAT, RESULTS_DIR, Results, Run, load_results, provenance,
                             save_results, summary_table)

PROVENANCE_KEYS = {"command", "mlm_lib_version", "git_commit", "date", "threads", "wall_s"}


def _toy() -> Results:
    runs = [Run(arm, seed, {"acc": base + 0.01 * seed}, 1.0)
            for arm, base in (("a", 0.20), ("b", 0.25)) for seed in range(3)]
    return Results("toy", "does b beat a?", ["a", "b"], [0, 1, 2], {"steps": 10}, runs,
                   provenance("python -m mlm_lib.book.experiments toy --seeds 3", 3.0))


def test_round_trip_and_summaries(tmp_path):
    path = save_results(_toy(), tmp_path)
    assert path.name == "toy.json" and not list(tmp_path.glob("*.tmp"))
    loaded, original = load_results("toy", tmp_path), _toy()
    assert (loaded.runs, loaded.arms, loaded.seeds, loaded.settings) == (
        original.runs, original.arms, original.seeds, original.settings)
    assert loaded.values("b", "acc") == pytest.approx([0.25, 0.26, 0.27])
    assert loaded.interval("a", "acc").mean == pytest.approx(0.21)
    diff = loaded.difference("b", "a", "acc")  # paired by seed: exactly 0.05 every time
    assert diff.mean == pytest.approx(0.05) and diff.low == pytest.approx(0.05)
    assert "3 seeds per arm" in summary_table(loaded, ["acc"])
    assert PROVENANCE_KEYS <= set(loaded.provenance)


def test_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m mlm_lib.book.experiments nothing"):
        load_results("nothing", tmp_path)
    (tmp_path / "old.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match=FORMAT):
        load_results("old", tmp_path)
    results = _toy()
    with pytest.raises(KeyError, match="no arm 'c'"):
        results.values("c", "acc")
    with pytest.raises(KeyError, match="no metric 'loss'"):
        results.values("a", "loss")
    results.runs[0].metrics["acc"] = float("nan")
    with pytest.raises(ValueError, match="not finite"):
        save_results(results, tmp_path)
    with pytest.raises(SystemExit):
        main(["corruption", "--seeds", "1"])  # an interval needs two runs


COMMITTED = sorted(RESULTS_DIR.glob("*.json"))


def test_every_experiment_has_a_committed_results_file():
    assert {p.stem for p in COMMITTED} == set(EXPERIMENTS)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_results_file_is_complete(path):
    results = load_results(path.stem)
    experiment = EXPERIMENTS[path.stem]
    assert results.arms == list(experiment.arms)
    assert json.loads(json.dumps(experiment.settings)) == results.settings
    assert len(results.seeds) >= 3
    assert {(r.arm, r.seed) for r in results.runs} == {
        (a, s) for a in results.arms for s in results.seeds}
    assert PROVENANCE_KEYS <= set(results.provenance)
    assert results.provenance["command"].startswith(f"python -m mlm_lib.book.experiments {path.stem}")
    assert "uncommitted" not in results.provenance["git_commit"]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.stem)
def test_results_file_reproduces(path):
    results = load_results(path.stem)
    experiment = EXPERIMENTS[path.stem]
    arm, seed = experiment.cheapest_arm, results.seeds[0]
    stored = next(r.metrics for r in results.runs if r.arm == arm and r.seed == seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(results.provenance["threads"])  # as the file was made: same sums
    try:
        again = experiment.run(arm, seed)
    finally:
        torch.set_num_threads(threads)
    for metric, tolerance in experiment.tolerance.items():
        assert abs(again[metric] - stored[metric]) <= tolerance, (
            f"{path.stem} / {arm} / seed {seed}: {metric} is now {again[metric]:.4f}, the results "
            f"file says {stored[metric]:.4f} (tolerance {tolerance}); re-run "
            f"`{results.provenance['command']}`")
