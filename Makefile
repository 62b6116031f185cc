# Two entry points do all set-up: `make demo` and `make test`.
# Both create .venv, install the package, install Julia where none is found,
# and are quick when everything is already in place.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.bridge-installed

.PHONY: all setup tf-keras julia julia-image gfortran socat julia-packages twolayer-image demo test test-quick fuzz bench bench-check bench-goals contract docs docs-images clean

# Julia packages (docs/guides/julia-packages.md).  ../shared/julia-depot,
# where it exists, stands in for Julia's package registry: the bridge appends
# it after the user's depots (TFBRIDGE_JULIA_DEPOT, exported to every recipe;
# a value from the environment wins).  Copies of it that lost their symbolic
# links (each arrived as a text file naming its target, which breaks its JLL
# packages) are replaced by a mirror with the links restored, build/julia-depot
# (julia/mirror_julia_depot.py).  Without it, julia-packages installs ForwardDiff
# with Pkg where Julia's registry is reachable.
SHARED_JULIA_DEPOT := $(abspath ../shared/julia-depot)
ifneq ($(wildcard $(SHARED_JULIA_DEPOT)/packages),)
  ifneq ($(shell find $(SHARED_JULIA_DEPOT)/packages -mindepth 3 -maxdepth 3 -name override -type f),)
    JULIA_DEPOT_MIRROR := $(abspath build/julia-depot)
    export TFBRIDGE_JULIA_DEPOT ?= $(JULIA_DEPOT_MIRROR)
  else
    export TFBRIDGE_JULIA_DEPOT ?= $(SHARED_JULIA_DEPOT)
  endif
endif
JULIA ?= $(or $(TFBRIDGE_JULIA),julia)

all: test

setup: $(STAMP) tf-keras julia gfortran socat julia-image

$(STAMP): pyproject.toml
	@echo ">> creating $(VENV) and installing tf-julia-bridge (first time: about a minute)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[test,plot,docs]'
	@touch $@

# Stock TF's TF1 layers.batch_normalization, which tests/oracle/nn_layers.py
# runs, lives in tf-keras.  It is installed without its dependencies: it asks
# for the `tensorflow` wheel, which would replace tensorflow-cpu, and that is
# all it asks for.  Its version follows the installed TensorFlow's.
tf-keras: $(STAMP)
	@$(PY) -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("tf_keras") is None)' || { \
	  tf=$$($(PY) -c 'import importlib.metadata as m; d = m.packages_distributions().get("tensorflow"); print(m.version(d[0]) if d else "")'); \
	  if [ -n "$$tf" ]; then echo ">> installing tf-keras for TensorFlow $$tf (the test oracle's TF1 layers)"; \
	    $(PY) -m pip install -q --no-deps "tf-keras~=$${tf%.*}.0"; fi; }

# Julia 1.5+ with its embedding headers and working exceptions
# (julia/install-julia.sh: Debian bullseye's packages where none is found).
julia:
	@bash julia/install-julia.sh

# gfortran for Fortran ops and the tf_bridge Fortran module (docs/guides/fortran-ops.md; docs/guides/fortran.md):
# Debian's package where none is found.
gfortran:
	@command -v $${FC:-gfortran} >/dev/null 2>&1 || { echo ">> installing gfortran (apt-get)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q gfortran >/dev/null; }

# socat for the tested recipe of a cluster on an untrusted network (mutual-TLS tunnels between
# loopback servers, docs/guides/distributed.md; tests/distribute/test_tunnels.py): Debian's package where none is found.
socat:
	@command -v socat >/dev/null 2>&1 || { echo ">> installing socat (apt-get)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q socat >/dev/null; }

# Julia's system image with TFBridge built in (bridge/julia/sysimage.py), so
# that Julia starts in a fraction of a second instead of compiling TFBridge.jl
# at every start: about 3 minutes the first time on 2 cores (8 on a busy
# machine), then a check of
# its cache key (instant) until julia/ or Julia changes.  Without it everything
# works, starting about a second slower.
julia-image: $(STAMP) julia
	@$(PY) -m bridge.cli julia build-image

# ForwardDiff for examples/twolayer, and with SpecialFunctions and StaticArrays
# for the package tests (tests/julia/test_packages.py): from the depot above,
# else Julia's default environment, else Pkg.add from Julia's registry; where
# none works, the example uses its analytic Jacobian and says why, and the
# package tests are skipped saying how to get the packages (on CI, CI=true,
# they fail instead: tests/conftest.py).
JULIA_TEST_PACKAGES := "ForwardDiff", "SpecialFunctions", "StaticArrays"
julia-packages: julia $(if $(filter $(JULIA_DEPOT_MIRROR),$(TFBRIDGE_JULIA_DEPOT)),$(JULIA_DEPOT_MIRROR)/.mirror-of)
	@if [ -n "$$TFBRIDGE_JULIA_DEPOT" ]; then :; \
	elif $(JULIA) --startup-file=no -e 'exit(any(p -> Base.find_package(p) === nothing, [$(JULIA_TEST_PACKAGES)]))'; then :; \
	else echo ">> ForwardDiff, SpecialFunctions or StaticArrays not found: installing them into Julia's default environment with Pkg.add (Julia's registry)"; \
	  mkdir -p build; \
	  if timeout 1800 $(JULIA) --startup-file=no -e 'using Pkg; Pkg.add([$(JULIA_TEST_PACKAGES)])' >build/pkg-add.log 2>&1; then \
	    echo ">> ForwardDiff, SpecialFunctions and StaticArrays installed"; \
	  else echo ">> could not install them: $$(grep -m1 -o 'ERROR: .*' build/pkg-add.log | cut -c1-200) (log: build/pkg-add.log)"; \
	    echo ">> so examples/twolayer uses its analytic Jacobian, and the Julia package tests are skipped"; fi; \
	fi

$(JULIA_DEPOT_MIRROR)/.mirror-of: julia/mirror_julia_depot.py $(SHARED_JULIA_DEPOT)/packages
	@$(PYTHON) julia/mirror_julia_depot.py $(SHARED_JULIA_DEPOT) $(JULIA_DEPOT_MIRROR)

# The TwoLayer example's op image (docs/internals/julia-start.md): Julia's system
# image with ForwardDiff and the code a run of the op compiles built in, so
# that the example's first result comes in about 5 s instead of 8-9 s (Julia
# 1.5 keeps no machine code of packages).  About 3 minutes the first time (8
# on a busy machine), then a check of its cache key.  Where it cannot be
# built, the demo runs without it, only slower to its first result.
twolayer-image: setup julia-packages
	@$(PY) -m bridge.cli julia build-image --ops examples/twolayer || \
	  echo ">> could not build the TwoLayer op image (above): examples/twolayer starts without it, a few seconds slower"

demo: setup julia-packages twolayer-image
	$(PY) examples/twolayer/run.py
	$(PY) examples/inverse_diffusion/run.py

# The suite runs in two phases (CONTRIBUTING.md, "The test suite's time"):
# first every test not marked `serial`, on TEST_WORKERS pytest-xdist workers
# (one more than the cores by default: the suite's tests wait on their child
# processes, servers and sockets for about 40% of their wall time, measured
# with TFBRIDGE_TEST_CPU_LOG; each worker takes whole modules, longest first), then
# the `serial` ones (speed-ups, latencies, stress), one at a time with the
# machine to themselves.  Both always run; the target fails if either does.
# pytest exits 5 when it collects no test: that is a failure here, not a pass.
# The last line is the wall time, set-up included (MAKE_STARTED is read once,
# when make starts).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
MAKE_STARTED := $(shell date +%s)
# $(call run_suite,<marker expression>): both phases over the tests the expression selects.
define run_suite
	@t0=$$(date +%s); \
	$(PY) -m pytest -q -rs -n $(TEST_WORKERS) --dist loadscope -m "not serial$(if $(1), and ($(1)))" --durations=30 tests; rc1=$$?; \
	t1=$$(date +%s); \
	echo ">> serial phase: the tests marked serial, one at a time"; \
	$(PY) -m pytest -q -rs -p no:xdist -m "serial$(if $(1), and ($(1)))" --durations=10 tests; rc2=$$?; \
	t2=$$(date +%s); \
	for rc in $$rc1 $$rc2; do if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; fi; done; \
	m() { printf '%d min %02d s' $$(($$1 / 60)) $$(($$1 % 60)); }; \
	echo ">> $@: $$(m $$((t2 - $(MAKE_STARTED)))) in all: set-up $$(m $$((t0 - $(MAKE_STARTED)))), parallel phase $$(m $$((t1 - t0))) ($$(nproc) cores), serial phase $$(m $$((t2 - t1)))"; \
	if [ $$rc1 -ne 0 ] || [ $$rc2 -ne 0 ]; then exit 1; fi
endef

test: setup julia-packages
	$(call run_suite,)

# The same suite without the slow stress tests and the long fuzz runs.
test-quick: setup julia-packages
	$(call run_suite,not slow)

# Fuzzing (tests/customop/test_fuzz.py, tests/fuzz/): `make test` runs 2,000 derandomized
# examples per property; this runs 10x more with a new random seed each time
# (printed, with the command that reproduces a failure).  FUZZ_EXAMPLES and
# FUZZ_SEED (a number, or "random") override.
FUZZ_EXAMPLES ?= 20000
FUZZ_SEED     ?= random
fuzz: setup
	@TFBRIDGE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) TFBRIDGE_FUZZ_SEED=$(FUZZ_SEED) \
	$(PY) -m pytest -q -rs -s tests/customop/test_fuzz.py -k "not smoke"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

# Each benchmark prints its figure as a ratio to an anchor measured in the same run.
bench: setup julia-packages twolayer-image
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b 2>&1 | grep -v "^building \|oneDNN\|absl::InitializeLog" || exit 1; done

# `make bench-check`: the same benchmarks, failing when one fails or when a figure misses
# the goal printed beside it ("<figure>   (goal: <= 2x)": report() in bench/_common.py prints
# them so, and bench/_common.py checks every such line of the logs in build/bench-logs).
# BENCHES chooses the benchmarks, BENCH_LOGS the logs' folder; bench-goals runs them without the set-up.
BENCHES ?= $(wildcard bench/bench_*.py)
BENCH_LOGS ?= build/bench-logs
bench-check: setup julia-packages twolayer-image bench-goals

bench-goals:
	@mkdir -p $(BENCH_LOGS); rm -f $(BENCH_LOGS)/*.log; status=0; \
	for b in $(BENCHES); do echo "== $$b"; log=$(BENCH_LOGS)/$$(basename $$b .py).log; \
	  ( $(PY) $$b 2>&1; echo "== exit $$?" ) | grep -v "^building \|oneDNN\|absl::InitializeLog" | tee $$log; \
	  tail -n 1 $$log | grep -qx "== exit 0" || { echo ">> $$b failed"; status=1; }; \
	done; \
	$(PY) bench/_common.py $(BENCH_LOGS)/*.log || status=1; exit $$status

# The Julia-op contract's generated files (kernels_cpp/include/tfjl/contract.h,
# julia/contract.jl) from its table, bridge/julia/contract.py: run after
# editing the table (tests/julia/test_contract.py fails until then).
contract:
	@$(PY) -c 'import sys; from bridge.julia import contract; sys.exit(contract.main())'

# The documentation site (mkdocs.yml, docs/) into build/site, strict: a broken
# link, a missing page or an API reference that does not resolve fails.  It
# imports bridge's light package modules (no TensorFlow, no Julia): seconds.
# (Not --quiet: it hides the warnings --strict counts, and the build passes.)
docs: $(STAMP)
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
	@echo ">> docs built: build/site/index.html"

# The example plots the docs show (docs/images/gradcheck_two_layer.png,
# docs/images/inverse_diffusion.png), made by running the examples: they need
# Julia and a build, minutes rather than the docs build's seconds, so the PNGs
# are committed and this remakes them after a change to the examples.
docs-images: setup julia-packages
	$(PY) examples/twolayer/run.py
	cp examples/twolayer/gradcheck_two_layer.png docs/images/gradcheck_two_layer.png
	$(PY) examples/inverse_diffusion/run.py --no-log --plot docs/images/inverse_diffusion.png

clean:
	rm -rf build .pytest_cache
