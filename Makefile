# Two entry points do all set-up: `make demo` and `make test`.
# Both create .venv, install the package, install Julia where none is found,
# and are quick when everything is already in place.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.bridge-installed

.PHONY: all setup julia demo test bench clean

all: test

setup: $(STAMP) julia

$(STAMP): pyproject.toml
	@echo ">> creating $(VENV) and installing tf-julia-bridge (first time: about a minute)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[test,plot]'
	@touch $@

# Julia 1.5+ with its embedding headers. On Debian without a Julia package the
# bullseye packages are used (see shared ENVIRONMENT notes); elsewhere we say how.
julia:
	@if command -v julia >/dev/null 2>&1 && test -f "$$(julia --startup-file=no -e 'print(joinpath(Sys.BINDIR, Base.INCLUDEDIR, "julia", "julia.h"))' 2>/dev/null)" -o -f /usr/include/julia/julia.h; then \
	  :; \
	elif test -f /etc/debian_version; then \
	  echo ">> installing Julia and its headers from Debian bullseye"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  echo 'deb http://deb.debian.org/debian bullseye main' | $$SUDO tee /etc/apt/sources.list.d/bullseye.list >/dev/null; \
	  printf 'Package: *\nPin: release n=bullseye\nPin-Priority: 100\n' | $$SUDO tee /etc/apt/preferences.d/bullseye >/dev/null; \
	  $$SUDO apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q -t bullseye julia libjulia-dev >/dev/null && \
	  julia --version; \
	else \
	  echo "Julia was not found. Install Julia (>= 1.5) with its headers (julia.h) from https://julialang.org/downloads/ and put 'julia' on PATH, or set TFBRIDGE_JULIA to the executable." >&2; \
	  exit 1; \
	fi

demo: setup
	$(PY) examples/twolayer/run.py

# pytest exits 5 when it collects no test: that is a failure here, not a pass.
test: setup
	@$(PY) -m pytest -q -rs tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf build .pytest_cache
