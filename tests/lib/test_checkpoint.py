"""Checkpoints: exact round trip, no pickle, atomic replacement, clear errors on damage."""

from __future__ import annotations

import json
import random

import pytest
import torch

import mlm_lib.checkpoint as ckpt
import mlm_lib.files
from mlm_lib.checkpoint import (CheckpointError, latest_checkpoint, load_checkpoint, save_checkpoint,
                                step_folder, step_folders)


def _trained_pair(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    for _ in range(3):
        model(torch.tensor([1, 2, 3])).pow(2).sum().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def test_round_trip_weights_optimizer_rng(tmp_path):
    model, opt, sched = _trained_pair()
    gen = torch.Generator().manual_seed(5)
    gen.manual_seed(5)
    pyr = random.Random(3)
    pyr.random()
    path = save_checkpoint(tmp_path / "c", model, {"hidden": 4}, step=3, optimizer=opt,
                           scheduler=sched, generator=gen, py_random=pyr, extra={"note": "x"})
    ck = load_checkpoint(path)
    assert ck.step == 3 and ck.config == {"hidden": 4} and ck.extra == {"note": "x"}
    for k, v in model.state_dict().items():
        assert torch.equal(ck.state_dict[k], v)

    model2, opt2, sched2 = _trained_pair(seed=1)
    model2.load_state_dict(ck.state_dict)
    opt2.load_state_dict(ck.optimizer)
    sched2.load_state_dict(ck.scheduler)
    a, b = opt.state_dict(), opt2.state_dict()
    for i in a["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(torch.as_tensor(a["state"][i][name]), torch.as_tensor(b["state"][i][name]))
    assert a["param_groups"][0]["betas"] == b["param_groups"][0]["betas"]
    assert sched2.last_epoch == sched.last_epoch

    gen2, pyr2 = torch.Generator().manual_seed(99), random.Random(99)
    expected_t = torch.rand(3, generator=gen)
    expected_p = pyr.random()
    ckpt.restore_rng(ck, gen2, pyr2)
    assert torch.equal(torch.rand(3, generator=gen2), expected_t)
    assert pyr2.random() == expected_p


def test_files_are_safetensors_and_json_only(tmp_path):
    model, opt, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {}, optimizer=opt)
    names = sorted(p.name for p in path.iterdir())
    assert names == ["checkpoint.json", "model.safetensors", "trainer.safetensors"]
    manifest = json.loads((path / "checkpoint.json").read_text())
    assert set(manifest["sha256"]) == {"model.safetensors", "trainer.safetensors"}


def test_weights_only_skips_trainer_state(tmp_path):
    model, opt, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {}, optimizer=opt)
    (path / "trainer.safetensors").write_bytes(b"garbage")  # not even read
    ck = load_checkpoint(path, weights_only=True)
    assert ck.optimizer is None and ck.rng is None


def test_fp16_export_and_tied_weights(tmp_path):
    emb = torch.nn.Embedding(6, 4)
    head = torch.nn.Linear(4, 6, bias=False)
    head.weight = emb.weight  # shared storage, as BERT's tied decoder
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    ck = load_checkpoint(save_checkpoint(tmp_path / "c", model, {}, dtype=torch.float16))
    assert ck.state_dict["emb.weight"].dtype == torch.float16
    assert torch.equal(ck.state_dict["emb.weight"], ck.state_dict["head.weight"])


def test_truncated_weights_give_clear_error(tmp_path):
    model, _, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {})
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-7])
    with pytest.raises(CheckpointError, match="corrupted or truncated"):
        load_checkpoint(path)


def test_flipped_byte_and_bad_json_give_clear_errors(tmp_path):
    model, _, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {})
    f = path / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_checkpoint(path)
    (path / "checkpoint.json").write_text('{"format_version": 2, "step": ')
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        load_checkpoint(path)
    (path / "checkpoint.json").write_text('{"format_version": 1, "step": 0}')
    with pytest.raises(CheckpointError, match="mlm_lib 0.1"):
        load_checkpoint(path)
    (path / "checkpoint.json").write_text('{"format_version": 99, "step": 0}')
    with pytest.raises(CheckpointError, match="unknown format"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing")
    assert issubclass(CheckpointError, ValueError)


def test_crash_during_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    model, _, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {"version": 1}, step=1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "c", model, {"version": 2}, step=2)
    monkeypatch.undo()
    ck = load_checkpoint(path)
    assert ck.step == 1 and ck.config == {"version": 1}
    for k, v in before.items():
        assert torch.equal(ck.state_dict[k], v)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # no stray temporary folder


def test_saving_over_a_checkpoint_replaces_it_whole(tmp_path):
    model, opt, _ = _trained_pair()
    save_checkpoint(tmp_path / "c", model, {"version": 1}, step=1, optimizer=opt,
                    files={"notes.txt": b"old"})
    path = save_checkpoint(tmp_path / "c", model, {"version": 2}, step=2)
    ck = load_checkpoint(path)
    assert ck.step == 2 and ck.config == {"version": 2} and ck.optimizer is None
    assert sorted(p.name for p in path.iterdir()) == ["checkpoint.json", "model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_failed_rename_into_place_puts_the_previous_checkpoint_back(tmp_path, monkeypatch):
    model, _, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {}, step=7)
    renames = []

    def second_rename_fails(src, dst):
        renames.append((src, dst))
        if len(renames) == 2:  # the previous folder is aside, the new one is about to go in
            raise OSError("disk gone")
        return real_replace(src, dst)

    real_replace = mlm_lib.files.os.replace
    monkeypatch.setattr(mlm_lib.files.os, "replace", second_rename_fails)
    with pytest.raises(OSError, match="disk gone"):
        save_checkpoint(tmp_path / "c", model, {}, step=8)
    monkeypatch.undo()
    assert load_checkpoint(path).step == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_step_folders_are_exact_names_oldest_first(tmp_path):
    model, _, _ = _trained_pair()
    assert latest_checkpoint(tmp_path) is None and step_folders(tmp_path / "missing") == []
    save_checkpoint(step_folder(tmp_path, 10), model, {}, step=10)
    save_checkpoint(step_folder(tmp_path, 2), model, {}, step=2)
    (tmp_path / "step-00000020.tmp-abc").mkdir()  # a save that never finished
    save_checkpoint(tmp_path / "step-00000030.tmp-abc-previous", model, {}, step=30)
    (tmp_path / "step-00000040").mkdir()  # no manifest: not a checkpoint
    assert [p.name for p in step_folders(tmp_path)] == ["step-00000002", "step-00000010",
                                                         "step-00000040"]
    assert latest_checkpoint(tmp_path).name == "step-00000010"


def test_companion_files_are_hashed(tmp_path):
    model, _, _ = _trained_pair()
    path = save_checkpoint(tmp_path / "c", model, {}, files={"vocab.txt": b"[PAD]\n"})
    assert (path / "vocab.txt").read_bytes() == b"[PAD]\n"
    assert "vocab.txt" in json.loads((path / "checkpoint.json").read_text())["sha256"]
    with pytest.raises(ValueError, match="companion"):
        save_checkpoint(tmp_path / "d", model, {}, files={"checkpoint.json": b"{}"})
