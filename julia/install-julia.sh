#!/usr/bin/env bash
# Make sure a Julia that the bridge can embed is installed: the `julia`
# executable, its headers (julia.h), and exceptions that work inside compiled
# code. Quick when all is in place; on Debian without a Julia package it
# installs Debian bullseye's Julia 1.5 (see the project's ENVIRONMENT notes).
set -euo pipefail

JULIA=${TFBRIDGE_JULIA:-julia}
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

have_julia() {
  command -v "$JULIA" >/dev/null 2>&1 || return 1
  local header
  header=$("$JULIA" --startup-file=no -e 'print(joinpath(Sys.BINDIR, Base.INCLUDEDIR, "julia", "julia.h"))' 2>/dev/null) || return 1
  [ -f "$header" ] || [ -f /usr/include/julia/julia.h ]
}

# Debian's Julia 1.5 segfaults on the first exception thrown in compiled code
# when it runs with bookworm's libunwind 1.6; bullseye's 1.3 works.
exceptions_work() {
  # In a subshell whose stderr is dropped: the crash being probed for would
  # otherwise print the shell's "Segmentation fault" line.
  ( "$JULIA" --startup-file=no -e 'f(x) = try error(x) catch; 1 end; exit(f(1) == 1 ? 0 : 1)' >/dev/null 2>&1 ) 2>/dev/null
}

add_bullseye() {
  if [ ! -f /etc/apt/sources.list.d/bullseye.list ]; then
    echo 'deb http://deb.debian.org/debian bullseye main' | $SUDO tee /etc/apt/sources.list.d/bullseye.list >/dev/null
    printf 'Package: *\nPin: release n=bullseye\nPin-Priority: 100\n' | $SUDO tee /etc/apt/preferences.d/bullseye >/dev/null
  fi
  $SUDO apt-get update -q >/dev/null
}

bullseye_libunwind() {
  echo ">> installing Debian bullseye's libunwind (Julia 1.5 needs it for exceptions)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q -t bullseye --allow-downgrades libunwind8=1.3.2-2 >/dev/null
  $SUDO apt-mark hold libunwind8 >/dev/null
}

if have_julia; then
  if exceptions_work; then exit 0; fi
  if [ -f /etc/debian_version ] && command -v apt-get >/dev/null; then
    add_bullseye
    bullseye_libunwind
    exceptions_work && exit 0
  fi
  echo "Julia at $(command -v "$JULIA") crashes when an exception is thrown inside a function; the bridge cannot report Julia errors with it." >&2
  exit 1
fi

if [ -f /etc/debian_version ] && command -v apt-get >/dev/null; then
  echo ">> installing Julia and its headers from Debian bullseye (about a minute)"
  add_bullseye
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q -t bullseye julia libjulia-dev >/dev/null
  exceptions_work || bullseye_libunwind
  "$JULIA" --version
  exceptions_work && exit 0
  echo "the installed Julia cannot handle exceptions" >&2
  exit 1
fi

echo "Julia was not found. Install Julia (>= 1.5) with its headers (julia.h) from https://julialang.org/downloads/" \
     "and put 'julia' on PATH, or set TFBRIDGE_JULIA to the executable." >&2
exit 1
