"""The installed package carries every asset the library loads: the book's vocabulary, its model
and the experiments' results files. A file under ``mlm_lib/book/assets`` that no package-data pattern
in pyproject.toml matches would be missing from the wheel, and ``load_results`` or ``book_model``
would fail outside the repository."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mlm_lib" / "book"


def _patterns() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["package-data"]["mlm_lib.book"]


def unshipped(files: list[str], patterns: list[str]) -> list[str]:
    """The files (paths relative to the package) that no pattern matches; setuptools' ``*`` does not
    cross a ``/``."""
    return [f for f in files
            if not any(fnmatch(f, p) and f.count("/") == p.count("/") for p in patterns)]


def test_every_asset_ships_with_the_package():
    assets = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "assets").rglob("*")
                    if p.is_file())
    assert any(a.startswith("assets/results/") for a in assets), "no results files found"
    missing = unshipped(assets, _patterns())
    assert not missing, f"not in [tool.setuptools.package-data] of pyproject.toml: {missing}"


def test_the_check_sees_a_folder_without_a_pattern():
    assert unshipped(["assets/a.txt", "assets/new/b.json"], ["assets/*"]) == ["assets/new/b.json"]
