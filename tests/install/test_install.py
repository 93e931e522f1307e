"""The book works wherever a reader opens it: a pip install, Colab, Binder, the launch buttons.

- The package: ``python -m build`` makes a wheel and an sdist that carry the book's model, its
  vocabulary, the results files and the recall items; the wheel, installed into a fresh virtual
  environment outside the repository, imports, fills a blank with the book's model and trains.
- The first cell of every chapter: the same text everywhere, right after the title, installing the
  version the site was built from; silent where ``mlm_lib`` is importable. A chapter executed in a
  kernel whose environment lacks ``mlm_lib``, with ``MLM_LIB_INSTALL`` pointed at the wheel, installs
  it in its first cell and runs to the end (what Colab and Binder do, minus the network).
- The launch buttons: _config.yml's repository, branch and path point at files that exist, and
  Binder's configuration installs CPU torch, the reader's packages and the library, no test tools.
- The version: one source, ``mlm_lib.__version__``, shown on the site.

The tests marked ``install`` build and install for real (two to three minutes on two cores with
pip's cache warm, most of it installing torch and the notebook stack into the fresh environment);
``pytest -m "not install"`` leaves them out.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import first_cell
import pytest
import yaml

import mlm_lib

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Needed by the library and shipped with it (mlm_lib/book/assets); tests/install/test_package_data.py
# checks the patterns, this the built files.
ASSETS = ["mlm_lib/assets/book-model/model.safetensors", "mlm_lib/assets/book-model/checkpoint.json",
          "mlm_lib/assets/book-model/vocab.txt", "mlm_lib/assets/recipes/book-32.json",
          "mlm_lib/assets/recipes/book.json"]
ASSET_FOLDERS = ["mlm_lib/book/assets/results/", "mlm_lib/book/assets/recall/"]
TEST_ONLY = ["pytest", "nbval", "hypothesis", "playwright", "jupyter-book", "build"]
# The Hugging Face libraries the chapters call: a reader installs them.
HF_READER = ["transformers", "datasets", "tokenizers", "accelerate"]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# The fresh environment of the chapter run: the notebook stack of a Colab or Binder kernel, no mlm_lib.
# A kernel's notebook stack, with the [book] packages the cheap chapter uses (Colab ships them).
KERNEL_STACK = ["ipykernel>=6.29,<7", "nbclient", "nbformat", "matplotlib>=3.8", "ipywidgets>=8.1",
                "altair>=5.4", "pyyaml>=6"]
CHEAP_CHAPTER = "00_how_to_read.ipynb"  # about 10 s; imports torch, matplotlib, ipywidgets, mlm_lib
INSTALL_TIMEOUT_S = 900


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
         timeout: int = INSTALL_TIMEOUT_S) -> str:
    """Run a command; on failure, fail the test with its output."""
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                    f"{done.stderr[-5000:]}")
    return done.stdout


def _requirements(path: Path) -> list[str]:
    """Project names a requirements file lists (options and nested files left out)."""
    names = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            names.append(re.split(r"[<>=!~\[; @]", line)[0].lower())
    return names


# --- the package -----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> dict[str, Path]:
    """wheel and sdist, built once, from a copy of the sources (the build leaves build/ behind)."""
    base = tmp_path_factory.mktemp("dist")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "MANIFEST.in", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "mlm_lib", src / "mlm_lib", ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", base / "out", src], cwd=base)
    wheel, = (base / "out").glob("mlm_lib-*.whl")
    sdist, = (base / "out").glob("mlm_lib-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.mark.install
def test_wheel_and_sdist_carry_the_model_and_vocabulary(dist):
    assert dist["wheel"].name == f"mlm_lib-{mlm_lib.__version__}-py3-none-any.whl"
    wheel = zipfile.ZipFile(dist["wheel"]).namelist()
    sdist = [n.split("/", 1)[1] for n in tarfile.open(dist["sdist"]).getnames() if "/" in n]
    for names, kind in ((wheel, "wheel"), (sdist, "sdist")):
        missing = [a for a in ASSETS if a not in names]
        missing += [f for f in ASSET_FOLDERS if not any(n.startswith(f) for n in names)]
        assert not missing, f"the {kind} lacks {missing}"
    assert "mlm_lib/__main__.py" in wheel
    assert not [n for n in wheel if n.startswith(("tests/", "notebooks/", "book/"))]
    entry_points = zipfile.ZipFile(dist["wheel"]).read(
        f"mlm_lib-{mlm_lib.__version__}.dist-info/entry_points.txt").decode()
    assert "mlm-lib = mlm_lib.__main__:main" in entry_points


def _venv_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell with ``venv`` activated, and nothing pointing into the repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PYTHONNOUSERSITE="1", **extra)
    return env


@pytest.fixture(scope="session")
def bare_venv(tmp_path_factory) -> Path:
    """A fresh venv outside the repository with torch and a kernel's notebook stack, not mlm_lib.

    torch is the version this environment runs, from TORCH_INDEX_URL when set (the CI sets PyTorch's
    CPU index, as `make setup` does)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", venv], cwd=venv.parent)
    python = venv / "bin" / "python"
    torch_version = importlib.metadata.version("torch").split("+")[0]
    index = os.environ.get("TORCH_INDEX_URL")
    # --no-compile: modules are compiled when first imported, not every file of every wheel up front.
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    _run(pip + [f"torch=={torch_version}"] + (["--index-url", index] if index else []),
         cwd=venv.parent, env=_venv_env(venv))
    _run(pip + KERNEL_STACK, cwd=venv.parent, env=_venv_env(venv))
    return venv


@pytest.fixture(scope="session")
def installed_venv(bare_venv, dist) -> Path:
    """The fresh venv with the wheel installed (its dependencies from the index)."""
    _run([bare_venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--no-compile", dist["wheel"]], cwd=bare_venv.parent, env=_venv_env(bare_venv))
    return bare_venv


@pytest.mark.install
def test_the_wheel_works_in_a_fresh_venv_outside_the_repository(installed_venv, tmp_path):
    env = _venv_env(installed_venv)
    where = _run(["python", "-c", "import mlm_lib; print(mlm_lib.__file__); print(mlm_lib.__version__)"],
                 cwd=tmp_path, env=env).split()
    assert Path(where[0]).is_relative_to(installed_venv), f"mlm_lib imported from {where[0]}"
    assert not Path(where[0]).is_relative_to(ROOT)
    assert where[1] == mlm_lib.__version__

    filled = _run(["mlm-lib", "fill-mask", "tirana is the capital of [MASK] ."], cwd=tmp_path, env=env)
    # the book's model, its top 5: albania first (0.46, the next 0.03), as the README shows
    assert filled.startswith("[MASK] #1: albania (") and filled.count("(") == 5, filled
    exported = _run(["mlm-lib", "export-hf", tmp_path / "book-model-hf"], cwd=tmp_path, env=env)
    assert (tmp_path / "book-model-hf" / "tokenizer_config.json").is_file(), exported  # README's line

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(f"The {a} was near the {b}." for a, b in
                                           (("road", "river"), ("town", "hill"), ("bridge", "road")))
                                  for _ in range(12)))
    trained = _run(["mlm-lib", "train", "--corpus", corpus, "--out", tmp_path / "run", "--preset", "tiny",
                    "--layers", "1", "--hidden", "32", "--heads", "2", "--batch-size", "4",
                    "--seq-len", "32", "--max-steps", "3", "--threads", "1", "--quiet"],
                   cwd=tmp_path, env=env, timeout=300)
    assert "checkpoint:" in trained and (tmp_path / "run" / "vocab.txt").exists(), trained


@pytest.mark.install
def test_a_chapter_installs_mlm_lib_in_its_first_cell_and_runs_to_the_end(bare_venv, dist, tmp_path):
    """Colab and Binder, minus the network: a kernel without mlm_lib, the install source a wheel."""
    env = _venv_env(bare_venv, MLM_LIB_INSTALL=str(dist["wheel"]))
    python = bare_venv / "bin" / "python"
    _run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "mlm_lib"], cwd=tmp_path, env=env)
    probe = "import importlib.util; print(importlib.util.find_spec('mlm_lib'))"
    assert _run([python, "-c", probe], cwd=tmp_path, env=env).strip() == "None"
    _run([python, "-m", "ipykernel", "install", "--sys-prefix", "--name", "bare"], cwd=tmp_path, env=env)

    chapter = tmp_path / CHEAP_CHAPTER
    shutil.copy2(ROOT / "notebooks" / CHEAP_CHAPTER, chapter)
    runner = tmp_path / "run_chapter.py"
    runner.write_text(
        "import sys, nbformat\nfrom nbclient import NotebookClient\n"
        "nb = nbformat.read(sys.argv[1], as_version=4)\n"
        "NotebookClient(nb, kernel_name='bare', timeout=300,\n"
        "               resources={'metadata': {'path': str(sys.argv[3])}}).execute()\n"
        "nbformat.write(nb, sys.argv[2])\n")
    executed = tmp_path / "executed.ipynb"
    _run([python, runner, chapter, executed, tmp_path], cwd=tmp_path, env=env)

    cells = [c for c in json.loads(executed.read_text())["cells"] if c["cell_type"] == "code"]
    first = cells[0]
    assert "".join(first["source"]) == first_cell.cell_source()
    printed = [o for o in first["outputs"] if o["output_type"] == "stream"]
    assert [o["name"] for o in printed] == ["stdout"] and len(first["outputs"]) == 1, first["outputs"]
    assert "".join(printed[0]["text"]) == f"Installed mlm_lib {mlm_lib.__version__} from {dist['wheel']}\n"
    errors = [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors and all(c["execution_count"] for c in cells if "".join(c["source"]).strip())
    assert _run([python, "-c", "import mlm_lib; print(mlm_lib.__file__)"], cwd=tmp_path,
                env=env).startswith(str(bare_venv))


# --- the first cell of every chapter ---------------------------------------------------------

@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_opens_with_the_install_cell(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    title = first_cell.title_index(cells)
    installs = [i for i, c in enumerate(cells) if first_cell.is_install_cell(c)]
    assert installs == [title + 1], (f"{path.name}: the install cell must come once, right after the "
                                     "title; run python scripts/first_cell.py")
    cell = cells[title + 1]
    assert cell["cell_type"] == "code" and "".join(cell["source"]) == first_cell.cell_source(), (
        f"{path.name}: the install cell differs from scripts/first_cell.py's; run it")
    assert cell["metadata"].get("tags") == ["remove-cell"]
    assert cell["id"] == first_cell.CELL_ID


def test_the_install_cell_installs_this_version_from_this_repository():
    source = first_cell.cell_source()
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert re.search(r'f"mlm_lib\[book\] @ git\+\{BOOK\}@v([^"]+)"', source)[1] == mlm_lib.__version__
    assert f'BOOK = "{url}"' in source
    assert '"MLM_LIB_INSTALL"' in source


def _run_cell(monkeypatch, missing: bool, pip_returncode: int = 0) -> tuple[str, list]:
    """Execute the install cell here, with mlm_lib present or pretended missing and pip faked."""
    calls = []
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if (missing and name == "mlm_lib") else real_find_spec(name, *args, **kwargs)

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, pip_returncode, "", "ERROR: no such wheel")

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(subprocess, "run", fake_pip)
    monkeypatch.setenv("MLM_LIB_INSTALL", "/wheels/mlm_lib.whl")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(first_cell.cell_source(), {})
    return out.getvalue(), calls


def test_the_install_cell_is_silent_where_mlm_lib_is_importable(monkeypatch):
    printed, calls = _run_cell(monkeypatch, missing=False)
    assert printed == "" and calls == []  # nbval and the local build see no output, and no pip


def test_the_install_cell_prints_one_line_after_installing(monkeypatch):
    printed, calls = _run_cell(monkeypatch, missing=True)
    assert printed == f"Installed mlm_lib {mlm_lib.__version__} from /wheels/mlm_lib.whl\n"
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", "/wheels/mlm_lib.whl"]]


def test_the_install_cell_shows_pips_error(monkeypatch):
    with pytest.raises(RuntimeError, match="could not install /wheels/mlm_lib.whl:\nERROR: no such wheel"):
        _run_cell(monkeypatch, missing=True, pip_returncode=1)


def test_first_cell_script_puts_the_cell_after_the_title_and_is_idempotent():
    nb = json.loads((ROOT / "notebooks" / CHEAP_CHAPTER).read_text(encoding="utf-8"))
    source = first_cell.cell_source()
    assert first_cell.updated(nb, source) == nb  # the committed chapter is what the script writes
    title = first_cell.title_index(nb["cells"])
    plain = {**nb, "cells": [c for c in nb["cells"] if not first_cell.is_install_cell(c)]}
    intro = {"cell_type": "markdown", "id": "0badcafe", "metadata": {}, "source": ["Before the title."]}
    plain["cells"].insert(0, intro)  # the title is found, not assumed to be the first cell
    once = first_cell.updated(plain, source)
    assert once["cells"][title + 2]["source"] == nb["cells"][title + 1]["source"]
    assert first_cell.updated(once, source) == once
    old = first_cell.updated(once, first_cell.cell_source("0.1.0"))  # a version bump rewrites it
    assert sum(first_cell.is_install_cell(c) for c in old["cells"]) == 1
    assert "@v0.1.0" in "".join(old["cells"][title + 2]["source"])


# --- requirements, Binder and the launch buttons ---------------------------------------------

def test_reader_requirements_hold_no_test_tools_and_the_test_file_holds_them():
    reader = _requirements(ROOT / "requirements.txt")
    assert {"torch", "ipywidgets", "matplotlib", "altair", "ipykernel", *HF_READER} <= set(reader)
    assert not set(reader) & set(TEST_ONLY)
    assert set(TEST_ONLY) <= set(_requirements(ROOT / "requirements-test.txt"))


def test_binder_installs_cpu_torch_the_reader_packages_and_the_library():
    binder = ROOT / "binder"
    text = (binder / "requirements.txt").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert f"--extra-index-url {CPU_INDEX}" in lines  # as PyTorch's install selector writes it
    assert "torch==" + importlib.metadata.version("torch").split("+")[0] + "+cpu" in lines
    # repo2docker runs pip from the repository's root; a nested -r is read relative to this file.
    nested = [line.split(None, 1)[1] for line in lines if line.startswith("-r ")]
    assert nested == ["../requirements.txt"] and (binder / nested[0]).resolve() == ROOT / "requirements.txt"
    assert not set(_requirements(binder / "requirements.txt")) & set(TEST_ONLY)
    post = (binder / "postBuild").read_text()
    assert os.access(binder / "postBuild", os.X_OK) and post.startswith("#!")
    assert re.search(r"^pip install .*--no-deps \.$", post, re.M), "postBuild must install mlm_lib"


def test_launch_buttons_point_at_files_that_exist():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo, buttons = config["repository"], config["launch_buttons"]
    assert buttons["binderhub_url"] == "https://mybinder.org"
    assert buttons["colab_url"] == "https://colab.research.google.com"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert repo["url"] == pyproject["project"]["urls"]["Repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo["url"])  # what Colab can open
    book = ROOT / repo.get("path_to_book", "")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for ch in part["chapters"]
             for entry in (ch, *ch.get("sections", []))]  # a chapter's second page is a section
    notebooks = [f for f in files if f.startswith("notebooks/")]
    assert len(notebooks) == len(CHAPTERS)
    missing = [f for f in files if not any((book / f"{f}{ext}").is_file() for ext in (".ipynb", ".md"))]
    assert not missing, f"in _toc.yml but not under path_to_book: {missing}"
    assert (ROOT / "binder" / "requirements.txt").is_file()  # Binder reads binder/ first
    pages = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    on = pages.get("on", pages.get(True))  # YAML 1.1 reads the key `on` as True
    assert repo["branch"] in on["push"]["branches"], "the buttons' branch is not the one published"
    assert "v*" in on["push"]["tags"], "a release tag must publish the site"


# --- the version -----------------------------------------------------------------------------

def test_the_version_has_one_source():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mlm_lib.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", mlm_lib.__version__)
    assert first_cell.library_version() == mlm_lib.__version__
    # the install examples: the README's and the contributor's guide's (Install in detail)
    readme = "\n".join((ROOT / name).read_text(encoding="utf-8") for name in ("README.md", "CONTRIBUTING.md"))
    tags = set(re.findall(r"fill-in-the-blank@v([\d.]+\d)", readme))
    assert tags == {mlm_lib.__version__}, f"the docs' install lines name v{tags}; bump them too"
    assert f"Installed mlm_lib {mlm_lib.__version__} from mlm_lib[book] @ git+" in readme
