# Loader Advisor. The two commands a new machine needs:
#   make lab    set up what is missing, start the demo S3 endpoint and JupyterLab on the wizard
#   make test   set up what is missing, then ruff, mypy, native build and the whole test suite
# Both are idempotent: a second run with nothing changed takes seconds.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Respect a torch that is already installed; otherwise this spec (a CPU wheel where one is offered).
TORCH_SPEC ?= torch==2.13.0
NATIVE_SOURCES := $(wildcard native_loader/csrc/*.cpp native_loader/csrc/*.hpp) native_loader/CMakeLists.txt
PYTEST_ARGS ?=
# The editable install maps each module file it saw: a module added, moved or removed since needs
# a reinstall, so the install depends on the list of module files (rewritten only when it changes).
PACKAGE_FILES := $(VENV)/.package-files
$(shell mkdir -p $(VENV) && find advisor native_loader -name '*.py' -not -path '*/__pycache__/*' \
	| sort > $(PACKAGE_FILES).now && (cmp -s $(PACKAGE_FILES).now $(PACKAGE_FILES) && rm $(PACKAGE_FILES).now \
	|| mv $(PACKAGE_FILES).now $(PACKAGE_FILES)))

.PHONY: all setup setup-test build lab test lint typecheck unit check bench demo clean

all: setup

setup: $(VENV)/.native-built

setup-test: system-deps-test setup

system-deps:
	@bash scripts/system-deps.sh

system-deps-test:
	@bash scripts/system-deps.sh --test

$(VENV)/bin/python:
	@bash scripts/system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Python dependencies: reinstalled only when pyproject.toml changes.
$(VENV)/.deps-installed: pyproject.toml | $(VENV)/bin/python
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q "scikit-build-core>=0.10" "nanobind>=2.4"
	$(PIP) install -q --no-build-isolation -e ".[wizard,gpu,demo,test]"
	@touch $@

# The native module: rebuilt incrementally (build/{wheel_tag} is kept) when a C++ source changes.
# Its build tree is named by the wheel tag scikit-build-core computes for this Python (pyproject's
# build-dir), resolved once here: a second tree (another Python) never hands over its stub.
NATIVE_BUILD_DIR = build/$(shell $(PY) -c "from scikit_build_core.builder.wheel_tag import WheelTag; print(WheelTag.compute_best([]))")
$(VENV)/.native-built: $(VENV)/.deps-installed $(NATIVE_SOURCES) $(PACKAGE_FILES)
	$(PIP) install -q --no-build-isolation --no-deps -e .
	@cp $(NATIVE_BUILD_DIR)/_native.pyi native_loader/_native.pyi
	@touch $@

build: setup

lab: system-deps setup
	$(PY) -m advisor.lab

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy

# The tests that start no server, kernel or browser: side by side in UNIT_WORKERS processes, then
# their `timing` tests alone, as `make test` runs the suite.
UNIT_WORKERS ?= 3
unit: setup
	MARKS="not s3 and not notebook and not browser and not slow" \
		bash scripts/run-tests.sh $(PY) $(UNIT_WORKERS) $(PYTEST_ARGS)

# The developer's quick loop: lint, types and the tests that start no server, kernel or browser.
check: lint typecheck unit

# The whole suite: the tests that start servers, kernels and browsers side by side in
# TEST_WORKERS processes, then the `timing` tests alone (scripts/run-tests.sh says why).
TEST_WORKERS ?= 4
test: system-deps-test setup lint typecheck
	bash scripts/run-tests.sh $(PY) $(TEST_WORKERS) $(PYTEST_ARGS)

# The peers compared with native_loader (the `bench` extra) are installed once, and again when
# pyproject.toml changes. `make bench BENCH_ARGS=--quick` for the ~2 minute version.
bench: setup
	@[ $(VENV)/.bench-installed -nt pyproject.toml ] || { \
		$(PIP) install -q -e ".[bench]" --no-build-isolation && touch $(VENV)/.bench-installed; }
	$(PY) -m bench $(BENCH_ARGS)

demo: setup
	$(PY) -m advisor.lab --cli

clean:
	rm -rf build $(VENV) .mypy_cache .ruff_cache .pytest_cache native_loader/_native.pyi
