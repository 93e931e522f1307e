"""The installed package carries every asset the library loads: the shipped model, its vocabulary
and recipes (``mlm_lib/assets``), the book's results files and recall items (``mlm_lib/book/assets``).
A file under either that no package-data pattern in pyproject.toml matches would be missing from
the wheel, and ``load_results`` or ``book_model`` would fail outside the repository."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"mlm_lib": ROOT / "mlm_lib", "mlm_lib.book": ROOT / "mlm_lib" / "book"}


def _patterns(package: str) -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["package-data"][package]


def unshipped(files: list[str], patterns: list[str]) -> list[str]:
    """The files (paths relative to the package) that no pattern matches; setuptools' ``*`` does not
    cross a ``/``."""
    return [f for f in files
            if not any(fnmatch(f, p) and f.count("/") == p.count("/") for p in patterns)]


@pytest.mark.parametrize("package, expected", [("mlm_lib", "assets/book-model/"),
                                               ("mlm_lib.book", "assets/results/")])
def test_every_asset_ships_with_the_package(package, expected):
    folder = PACKAGES[package]
    assets = sorted(p.relative_to(folder).as_posix() for p in (folder / "assets").rglob("*")
                    if p.is_file())
    assert any(a.startswith(expected) for a in assets), f"no {expected} files found"
    missing = unshipped(assets, _patterns(package))
    assert not missing, f"not in [tool.setuptools.package-data] of pyproject.toml: {missing}"


def test_the_check_sees_a_folder_without_a_pattern():
    assert unshipped(["assets/a.txt", "assets/new/b.json"], ["assets/*"]) == ["assets/new/b.json"]
