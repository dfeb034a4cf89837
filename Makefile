# tileworkbench — two commands on a fresh machine:
#   make demo   installs into .venv and runs the main job (spec GEMM: lower, report, run on a GPU if present)
#   make test   installs into .venv and runs the whole suite (Python, notebooks, extension)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test test-python test-extension lab clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[cuda13,dev,lab,ray]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/python -m tileworkbench.demo --out out

test: install
	bash scripts/run_tests.sh

# JupyterLab refuses to start as root unless told; containers and Binder-like machines run as root.
lab: install
	$(BIN)/jupyter lab notebooks/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

clean:
	rm -rf $(VENV) out build dist .pytest_cache
