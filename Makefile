# Two commands from a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo deps lint test bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@echo "make: installing gpuorch with its dev extra (pytest, the cloud SDKs, emulators, playwright) into $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m gpuorch.demo

# The system packages the tests need (sshd, chromium, podman), listed, then installed if missing.
deps:
	./scripts/deps.sh --list
	./scripts/deps.sh

# The rules of DESIGN.md 5-6 (docs/development.md): each tool names the offending import or line.
lint: $(STAMP)
	$(PY) scripts/lint_imports.py --no-logo
	$(VENV)/bin/ruff check gpuorch providers tests bench scripts
	$(VENV)/bin/mypy

# Worker processes for pytest-xdist (docs/development.md, "Test workers"); 0 runs the suite in one process.
TEST_WORKERS ?= 4

# --max-worker-restart 0: a crashed worker ends the run at once, naming its test; replacing it can hang
# --dist loadfile for good (pytest-xdist issues 784 and 1323), which once ran CI into its time limit.
test: lint
	./scripts/test-services.sh
	$(PY) -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart 0

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
