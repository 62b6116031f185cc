"""cffi declarations parsed once per machine, not at every start.

``FFI().cdef(text)`` parses C with pycparser: importing pycparser and
parsing take tens of milliseconds, and every type string a process uses
(``ffi.new("char[]", n)``) is parsed again the first time.  ``cached_ffi``
emits the parsed declarations once as an out-of-line ABI module (cffi's
pure-Python form; no compiler involved) in the cache, ``root()/ffi/``, and
imports it after: its FFI parses type strings in C and never imports
pycparser.  The module's name holds a hash of cffi's version and the
declarations, so an edit names another module.  Where the cache cannot be
written, the declarations are parsed in memory (``bridge.platform.cache``).
"""
from __future__ import annotations

import contextlib
import io
import importlib.util

import cffi

from . import cache


def cached_ffi(declarations: str, prefix: str):
    """An FFI holding ``declarations`` (C text for ``cdef``), from the module
    ``root()/ffi/<prefix>_<hash>.py``, emitted there first if missing."""
    module_name = f"{prefix}_{cache.Key(cffi.__version__, declarations).hexdigest()}"
    builder = None
    try:
        path = cache.root() / "ffi" / f"{module_name}.py"
        if not path.exists():
            builder = cffi.FFI()
            builder.cdef(declarations)
            builder.set_source(module_name, None)
            # cffi says "generating <file>" on stdout: a `$(tfbridge fortran --flags)`
            # in a Makefile, or any other command whose output is captured, must not
            # get it, and a bridge process says nothing on stderr unless asked.
            with cache.publishing(path) as tmp, contextlib.redirect_stdout(io.StringIO()):
                builder.emit_python_code(str(tmp))
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.ffi
    except OSError:  # no writable cache: parse in memory
        if builder is not None:
            return builder  # parsed already; only emitting it failed
        built = cffi.FFI()
        built.cdef(declarations)
        return built
