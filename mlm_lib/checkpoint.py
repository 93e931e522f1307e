"""Checkpoints that never go through pickle and never lose the previous save.

A checkpoint is a folder:

- ``model.safetensors``    the weights (plain tensors, nothing executable)
- ``trainer.safetensors``  optimizer moments and RNG states as tensors (optional)
- ``checkpoint.json``      model config, step, optimizer hyper-parameters, scheduler state,
                           Python RNG state, free-form ``extra`` and a SHA-256 of every file

Why this shape: ``torch.load`` unpickles, so loading a stranger's ``.pt`` can run code. Safetensors
and JSON only ever yield tensors, numbers and strings. The hashes turn a truncated or bit-flipped
file into a clear :class:`CheckpointError` instead of a confusing failure deep inside torch.

Why a temporary folder: a save writes a complete new folder next to the target, flushes it to
the disk and renames it into place (:func:`mlm_lib.files.replaced_atomically`). A crash mid-save
leaves at worst a stray ``<folder>.tmp-*`` folder, and the previous checkpoint intact. Saving over
an existing folder takes two renames (the old one aside, the new one in): a crash in between
leaves the previous checkpoint whole as ``<folder>.tmp-*-previous``, never half of either.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from mlm_lib.files import audit_read, replaced_atomically, sha256_file

MANIFEST = "checkpoint.json"
WEIGHTS = "model.safetensors"
TRAINER = "trainer.safetensors"
# 2: mlm_lib 0.2 (the embeddings' LayerNorm is `embeddings.norm`; the masking recipe is one
# `corruption` entry of the training config). Version 1 folders come from mlm_lib 0.1.
FORMAT_VERSION = 2
# A training run keeps its checkpoints as "step-XXXXXXXX" folders: sorting the names sorts the steps.
STEP_FOLDER = "step-{:08d}"
STEP_FOLDER_RE = re.compile(r"step-\d{8}")


class CheckpointError(ValueError):
    """A checkpoint folder is missing, truncated, corrupted or of an unknown format."""


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` returns; tensors stay on the CPU until you move them."""

    path: Path
    config: dict[str, Any]
    step: int
    state_dict: dict[str, torch.Tensor]
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    rng: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- small helpers

def _jsonable(value: Any) -> Any:
    """Tuples become lists, tensors of one element become numbers; anything else must be JSON."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def _contiguous_cpu(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Safetensors refuses shared storage (tied weights), so each tensor gets its own copy."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for k, v in sd.items():
        t = v.detach().to("cpu")
        ptr = t.untyped_storage().data_ptr() if t.numel() else -1
        if ptr in seen or not t.is_contiguous():
            t = t.clone().contiguous()
        seen.add(ptr)
        out[k] = t
    return out


# ---------------------------------------------------------------- optimizer / RNG as tensors + JSON

def _split_optimizer_state(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (for safetensors) and JSON (everything else)."""
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {"param_groups": _jsonable(state["param_groups"]), "state": {}}
    for idx, st in state["state"].items():
        entry: dict[str, Any] = {}
        for name, value in st.items():
            if isinstance(value, torch.Tensor):
                key = f"optim.{idx}.{name}"
                tensors[key] = value.detach().to("cpu").contiguous()
                entry[name] = {"tensor": key}
            else:
                entry[name] = _jsonable(value)
        meta["state"][str(idx)] = entry
    return tensors, meta


def _join_optimizer_state(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`_split_optimizer_state`, ready for ``optimizer.load_state_dict``."""
    state: dict[int, dict[str, Any]] = {}
    for idx, entry in meta["state"].items():
        st: dict[str, Any] = {}
        for name, value in entry.items():
            if isinstance(value, dict) and "tensor" in value:
                if value["tensor"] not in tensors:
                    raise CheckpointError(f"optimizer tensor {value['tensor']!r} missing from {TRAINER}")
                st[name] = tensors[value["tensor"]]
            else:
                st[name] = value
        state[int(idx)] = st
    groups = []
    for g in meta["param_groups"]:
        g = dict(g)
        if isinstance(g.get("betas"), list):
            g["betas"] = tuple(g["betas"])
        groups.append(g)
    return {"state": state, "param_groups": groups}


def _capture_rng(generator: torch.Generator | None = None, py_random: random.Random | None = None
                ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The RNG states a run needs to continue exactly: torch (dropout), CUDA, the masking
    generator and a Python ``random.Random`` (data order)."""
    tensors = {"rng.torch": torch.get_rng_state()}
    meta: dict[str, Any] = {}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    if generator is not None:
        tensors["rng.generator"] = generator.get_state()
    if py_random is not None:
        version, internal, gauss = py_random.getstate()
        meta["python"] = [version, list(internal), gauss]
    return tensors, meta


def restore_rng(ckpt: Checkpoint, generator: torch.Generator | None = None,
                py_random: random.Random | None = None) -> None:
    """Put back what :func:`_capture_rng` saved (missing parts are left alone)."""
    rng = ckpt.rng or {}
    if "rng.torch" in rng:
        torch.set_rng_state(rng["rng.torch"])
    if torch.cuda.is_available():
        states = [rng[k] for k in sorted(k for k in rng if k.startswith("rng.cuda."))]
        if len(states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states)
    if generator is not None and "rng.generator" in rng:
        generator.set_state(rng["rng.generator"])
    if py_random is not None and "python" in rng:
        version, internal, gauss = rng["python"]
        py_random.setstate((version, tuple(internal), gauss))


# ---------------------------------------------------------------- save / load

def save_checkpoint(folder: str | os.PathLike, model: torch.nn.Module | dict[str, torch.Tensor],
                    config: dict[str, Any], step: int = 0,
                    optimizer: torch.optim.Optimizer | None = None,
                    scheduler: Any | None = None,
                    generator: torch.Generator | None = None,
                    py_random: random.Random | None = None,
                    extra: dict[str, Any] | None = None,
                    dtype: torch.dtype | None = None,
                    files: dict[str, bytes] | None = None) -> Path:
    """Write a checkpoint folder atomically and return its path.

    ``files`` adds small companion files (e.g. ``vocab.txt``) inside the same atomic swap.
    ``dtype`` (e.g. ``torch.float16``) stores floating weights smaller, for a committed model;
    leave it ``None`` for training checkpoints so that a resume is exact.
    """
    folder = Path(folder)
    weights = _weights_to_save(model, dtype)
    manifest, trainer_tensors = _build_manifest(config, step, extra, optimizer, scheduler,
                                                generator, py_random)
    with replaced_atomically(folder) as tmp:
        tmp.mkdir()
        _write_files(tmp, weights, trainer_tensors, files or {})
        _write_manifest(tmp, manifest)
    return folder


def _weights_to_save(model: torch.nn.Module | dict[str, torch.Tensor],
                     dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The weights as safetensors accepts them; floating ones cast to ``dtype`` if one is given."""
    sd = model.state_dict() if isinstance(model, torch.nn.Module) else dict(model)
    sd = _contiguous_cpu(sd)
    if dtype is not None:
        sd = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in sd.items()}
    return sd


def _build_manifest(config: dict[str, Any], step: int, extra: dict[str, Any] | None,
                    optimizer: torch.optim.Optimizer | None, scheduler: Any | None,
                    generator: torch.Generator | None, py_random: random.Random | None
                    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """``checkpoint.json`` without its hashes, and the trainer tensors its entries point to.

    The trainer state is split in two because JSON cannot hold tensors and safetensors holds
    nothing else. RNG states are saved whenever training could resume from this checkpoint."""
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "step": int(step),
        "config": _jsonable(config),
        "extra": _jsonable(extra or {}),
    }
    trainer_tensors: dict[str, torch.Tensor] = {}
    if optimizer is not None:
        tensors, meta = _split_optimizer_state(optimizer.state_dict())
        trainer_tensors.update(tensors)
        manifest["optimizer"] = meta
    if scheduler is not None:
        manifest["scheduler"] = _scheduler_state(scheduler)
    if generator is not None or py_random is not None or optimizer is not None:
        tensors, meta = _capture_rng(generator, py_random)
        trainer_tensors.update(tensors)
        manifest["rng"] = meta
    return manifest, trainer_tensors


def _scheduler_state(scheduler: Any) -> dict[str, Any]:
    """The scheduler's state as JSON; a lambda in it could only be saved by pickling code."""
    state = _jsonable(scheduler.state_dict())
    try:
        json.dumps(state)
    except TypeError as e:
        raise ValueError(f"the scheduler's state is not plain data ({e}); use "
                         "plain-function lambdas or mlm_lib.optim.WarmupLinearSchedule") from None
    return state


def _write_files(tmp: Path, weights: dict[str, torch.Tensor],
                 trainer_tensors: dict[str, torch.Tensor], files: dict[str, bytes]) -> None:
    """Everything but the manifest into the new folder: weights, trainer state, companion files.

    A companion may not take a reserved name, nor hide (a dot) or escape (a slash) the folder."""
    save_file(weights, str(tmp / WEIGHTS), metadata={"format": "pt"})
    if trainer_tensors:
        save_file(trainer_tensors, str(tmp / TRAINER))
    for name, data in files.items():
        if name in (MANIFEST, WEIGHTS, TRAINER) or "/" in name or name.startswith("."):
            raise ValueError(f"cannot add a companion file named {name!r}")
        (tmp / name).write_bytes(data)


def _write_manifest(tmp: Path, manifest: dict[str, Any]) -> None:
    """``checkpoint.json``, written last so that it records the SHA-256 of every other file."""
    manifest = {**manifest, "sha256": {p.name: sha256_file(p) for p in sorted(tmp.iterdir())}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")


def _read_manifest(folder: Path) -> dict[str, Any]:
    try:
        with open(folder / MANIFEST, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{folder} is not a checkpoint: {MANIFEST} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{folder / MANIFEST} is truncated or corrupted ({e})") from None
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if version == 1:
        raise CheckpointError(f"{folder} was written by mlm_lib 0.1 (format_version 1), whose "
                              "parameter names this version does not read; retrain it, or load "
                              "it with mlm_lib 0.1 and export it with mlm_lib.hf.save_hf_bert")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{folder / MANIFEST} has an unknown format (format_version={version})")
    return manifest


def _load_tensors(path: Path, expected_sha: str | None, map_location: str) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise CheckpointError(f"checkpoint file {path} is missing")
    if expected_sha is not None and sha256_file(path) != expected_sha:
        raise CheckpointError(f"checkpoint file {path} is corrupted or truncated "
                              "(its SHA-256 does not match checkpoint.json)")
    audit_read(path)
    try:
        return load_file(str(path), device=map_location)
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from None


def load_checkpoint(folder: str | os.PathLike, map_location: str = "cpu",
                    weights_only: bool = False) -> Checkpoint:
    """Read a folder written by :func:`save_checkpoint`; raises :class:`CheckpointError` on damage.

    ``weights_only=True`` skips the trainer state (what inference needs)."""
    folder = Path(folder)
    if not folder.exists():
        raise CheckpointError(f"no checkpoint at {folder}")
    manifest = _read_manifest(folder)
    hashes = manifest.get("sha256", {})
    sd = _load_tensors(folder / WEIGHTS, hashes.get(WEIGHTS), map_location)
    ck = Checkpoint(path=folder, config=manifest.get("config", {}), step=int(manifest.get("step", 0)),
                    state_dict=sd, scheduler=manifest.get("scheduler"), extra=manifest.get("extra", {}))
    if not weights_only and ((folder / TRAINER).exists() or TRAINER in hashes):
        trainer = _load_tensors(folder / TRAINER, hashes.get(TRAINER), "cpu")
        if "optimizer" in manifest:
            ck.optimizer = _join_optimizer_state(
                {k: v.to(map_location) for k, v in trainer.items() if k.startswith("optim.")},
                manifest["optimizer"])
        rng: dict[str, Any] = {k: v for k, v in trainer.items() if k.startswith("rng.")}
        rng.update(manifest.get("rng", {}))
        ck.rng = rng
    return ck


def step_folder(run_dir: str | os.PathLike, step: int) -> Path:
    """Where a training run keeps its checkpoint of ``step``."""
    return Path(run_dir) / STEP_FOLDER.format(step)


def step_folders(run_dir: str | os.PathLike) -> list[Path]:
    """A run directory's ``step-XXXXXXXX`` checkpoint folders, oldest step first. Only the exact
    name counts, so a save's temporary ``step-XXXXXXXX.tmp-*`` folder is never among them."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if STEP_FOLDER_RE.fullmatch(p.name) and p.is_dir())


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest ``step-XXXXXXXX`` folder under a run directory that has a manifest, or None."""
    found = [p for p in step_folders(run_dir) if (p / MANIFEST).exists()]
    return found[-1] if found else None
