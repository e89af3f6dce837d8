# The two commands (README.md):
#   make book   install everything, then build the book into _build/html
#   make test   install what is missing, then run every test (scripts/run_tests.py lists the steps)
#
# Where things are installed: PYTHON=... if you give it; else the active virtual environment
# (VIRTUAL_ENV or CONDA_PREFIX); else .venv/ in this checkout, created with the python3 on PATH
# (Debian, Ubuntu and Homebrew Pythons refuse `pip install` outside a venv: PEP 668).
ifeq ($(origin PYTHON),undefined)
  ifneq ($(VIRTUAL_ENV),)
    PYTHON := $(VIRTUAL_ENV)/bin/python
  else ifneq ($(CONDA_PREFIX),)
    PYTHON := $(CONDA_PREFIX)/bin/python
  else
    PYTHON := $(CURDIR)/.venv/bin/python
    export ATTNLIB_MAKE_VENV := $(CURDIR)/.venv
  endif
endif
export PYTHON
# Every command below (and every notebook kernel it starts) imports attnlib from this checkout,
# whatever checkout an editable install elsewhere points at.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
# Files are read and written as UTF-8 whatever the machine's locale (a test must not depend on it).
export PYTHONUTF8 := 1

.PHONY: book test setup setup-test assets notebooks clean

book: setup
	$(PYTHON) scripts/build_book.py

test: setup-test
	$(PYTHON) scripts/run_tests.py

setup:
	bash scripts/setup

setup-test:
	bash scripts/setup --browser

# local copies of MathJax 3 and the ipywidgets html-manager (pinned; see scripts/vendor_assets.py)
assets:
	$(PYTHON) scripts/vendor_assets.py

# re-execute every chapter in a fresh kernel, storing outputs and widget state
notebooks:
	$(PYTHON) scripts/execute_notebooks.py

clean:
	rm -rf _build artifacts
