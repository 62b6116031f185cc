# Two entry points do all set-up: `make demo` and `make test`.
# Both create .venv, install the package, install Julia where none is found,
# and are quick when everything is already in place.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.bridge-installed

.PHONY: all setup julia demo test test-quick fuzz bench contract clean

all: test

setup: $(STAMP) julia

$(STAMP): pyproject.toml
	@echo ">> creating $(VENV) and installing tf-julia-bridge (first time: about a minute)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[test,plot]'
	@touch $@

# Julia 1.5+ with its embedding headers and working exceptions
# (julia/install-julia.sh: Debian bullseye's packages where none is found).
julia:
	@bash julia/install-julia.sh

demo: setup
	$(PY) examples/twolayer/run.py

# pytest exits 5 when it collects no test: that is a failure here, not a pass.
test: setup
	@$(PY) -m pytest -q -rs tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# The same suite without the two slow stress tests (the GC test alone takes ~9 min).
test-quick: setup
	@$(PY) -m pytest -q -rs -m "not slow" tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# Fuzzing (tests/test_fuzz.py, tests/fuzz/): `make test` runs 2,000 derandomized
# examples per property; this runs 10x more with a new random seed each time
# (printed, with the command that reproduces a failure).  FUZZ_EXAMPLES and
# FUZZ_SEED (a number, or "random") override.
FUZZ_EXAMPLES ?= 20000
FUZZ_SEED     ?= random
fuzz: setup
	@TFBRIDGE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) TFBRIDGE_FUZZ_SEED=$(FUZZ_SEED) \
	$(PY) -m pytest -q -rs -s tests/test_fuzz.py -k "not smoke"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# Each benchmark prints its figure as a ratio to an anchor measured in the same run.
bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b 2>&1 | grep -v "^building \|oneDNN\|absl::InitializeLog" || exit 1; done

# The Julia-op contract's generated files (kernels_cpp/include/tfjl/contract.h,
# julia/contract.jl) from its table, bridge/julia_contract.py: run after
# editing the table (tests/test_contract.py fails until then).
contract:
	@$(PY) -c 'import sys; from bridge import julia_contract; sys.exit(julia_contract.main())'

clean:
	rm -rf build .pytest_cache
