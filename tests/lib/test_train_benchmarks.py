"""The benchmark scripts run end to end (tiny settings), so they are never dead code."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_gpu_runs_tiny_on_cpu(capsys):
    bench = _load("bench_gpu")
    res = bench.main(["--tiny", "--device", "cpu", "--peak-tflops", "1"])
    out = capsys.readouterr().out.strip().splitlines()
    assert res["tokens_per_s"] > 0 and 0 < res["mfu"] < 1
    assert out[-1].startswith("mfu: ") and "tokens_per_s:" in "\n".join(out)


def test_flops_per_token_counts_bert_base():
    from mlm_lib.config import BertConfig

    bench = _load("bench_gpu")
    cfg = BertConfig.preset("base")
    f = bench.flops_per_token(cfg, seq=128, mask_rate=0.15)
    # 85M encoder weights x 6 FLOPs, plus attention and the masked-only vocabulary projection
    assert 5.0e8 < f < 6.0e8 and math.isfinite(f)


def test_bench_quality_short_run_prints_the_figure(capsys):
    bench = _load("bench_quality")
    ratio = bench.main(["--seconds", "3", "--quiet", "--hidden", "32", "--heads", "2", "--layers", "1"])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == f"accuracy_over_unigram: {ratio:.2f}"
    assert any(line.startswith("both-neighbours baseline:") for line in out)


def test_execution_soak_flags_a_stalled_cell_even_with_two_rounds():
    soak = _load("execution_soak")
    cell = ("03_the_log.ipynb", "Cell 6")
    assert soak.find_stalls({cell: [1.4, 1.9], ("x", "tiny"): [0.01, 0.9]}) == []
    assert soak.find_stalls({cell: [1.4, 120.0]}) == [(cell, 120.0, 1.4)]
