"""Device selection without the devices: CUDA with and without bf16, Apple's MPS, a plain CPU.

``mlm_lib.device`` decides where a run goes and in which precision; the branches for hardware this
machine lacks are tested by making torch report that hardware (``monkeypatch``). What runs on the
device itself is covered by ``test_model.test_device_helpers_on_this_machine`` and, on a GPU box,
``benchmarks/bench_gpu.py``.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from mlm_lib import device as dev
from mlm_lib.__main__ import main


def pretend(monkeypatch, *, cuda: bool = False, bf16: bool = False, mps: bool = False) -> None:
    """Make torch report these devices (and nothing else)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


@pytest.mark.parametrize("cuda, bf16, mps, expected", [
    (True, True, False, "cuda"),
    (True, False, True, "cuda"),   # CUDA wins over MPS
    (False, False, True, "mps"),
    (False, False, False, "cpu"),
])
def test_pick_device_prefers_cuda_then_mps_then_cpu(monkeypatch, cuda, bf16, mps, expected):
    pretend(monkeypatch, cuda=cuda, bf16=bf16, mps=mps)
    assert dev.pick_device() == torch.device(expected)
    assert dev.resolve_device("auto") == torch.device(expected)


def test_resolve_device_takes_a_named_device_as_it_is(monkeypatch):
    pretend(monkeypatch)  # no accelerator: a name is still passed through, not second-guessed
    assert dev.resolve_device("cpu") == torch.device("cpu")
    assert dev.resolve_device("cuda:1") == torch.device("cuda", 1)
    assert dev.resolve_device("mps") == torch.device("mps")


def test_cuda_with_bf16_autocasts_to_bf16_without_a_scaler(monkeypatch):
    pretend(monkeypatch, cuda=True, bf16=True)
    assert dev.autocast_dtype("cuda") is torch.bfloat16
    assert dev.autocast_dtype(torch.device("cuda", 0)) is torch.bfloat16
    assert dev.make_grad_scaler("cuda") is None  # bf16 has fp32's range: nothing underflows


def test_cuda_without_bf16_autocasts_to_fp16_with_a_scaler(monkeypatch):
    pretend(monkeypatch, cuda=True, bf16=False)
    assert dev.autocast_dtype("cuda") is torch.float16
    with warnings.catch_warnings():  # a CPU-only torch may add that the scaler will do nothing
        warnings.simplefilter("ignore")
        scaler = dev.make_grad_scaler("cuda")
    assert isinstance(scaler, torch.amp.GradScaler)
    assert dev.make_grad_scaler("cuda", enabled=False) is None  # --no-amp


@pytest.mark.parametrize("name", ["mps", "cpu"])
def test_mps_and_cpu_run_in_fp32(monkeypatch, name):
    pretend(monkeypatch, mps=name == "mps")
    assert dev.autocast_dtype(name) is None
    assert dev.make_grad_scaler(name) is None
    with dev.autocast(name):  # a no-op: no autocast region is entered
        assert not torch.is_autocast_enabled()


def test_train_device_auto_goes_through_pick_device(monkeypatch, tmp_path, capsys):
    """``python -m mlm_lib train --device auto`` asks pick_device (here it answers cpu)."""
    calls = []

    def spy() -> torch.device:
        calls.append("pick_device")
        return torch.device("cpu")

    monkeypatch.setattr(dev, "pick_device", spy)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(f"The {w} was near the river." for w in ("road", "town", "hill"))
                                  for _ in range(12)))
    assert main(["train", "--corpus", str(corpus), "--out", str(tmp_path / "run"), "--preset", "tiny",
                 "--layers", "1", "--hidden", "32", "--heads", "2", "--batch-size", "4",
                 "--seq-len", "32", "--max-steps", "1", "--threads", "1", "--quiet",
                 "--device", "auto"]) == 0
    assert calls, "train --device auto did not ask pick_device"
    assert "checkpoint:" in capsys.readouterr().out
