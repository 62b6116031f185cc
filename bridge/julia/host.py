"""Julia inside this Python process.

``init()`` loads TensorFlow's libraries first (the LLVM clash, see
``bridge.framework._lib``), then libjulia RTLD_GLOBAL, then the runtime
(libtfjl_runtime.so) through its own cffi instance, and starts Julia on the
runtime's dedicated thread with julia/TFBridge.jl loaded (built into Julia's
system image where ``make setup`` built one: ``bridge.julia.sysimage``).  Every Julia call
made here is handed to that thread by the runtime: Python threads never touch
jl_* themselves, so all functions here may be called from any thread.

    >>> from bridge import julia
    >>> julia.eval("1 + 1")
    2
    >>> julia.call("sum", np.arange(4.0))
    6.0

Julia finds packages as the ``julia`` executable does (JULIA_DEPOT_PATH,
JULIA_LOAD_PATH, JULIA_PROJECT), plus the read-only depot that
TFBRIDGE_JULIA_DEPOT names (julia/TFBridge.jl, "package environments").
"""
from __future__ import annotations

import atexit
import ctypes
import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

from bridge.framework import _lib
from bridge.platform import ffi_modules, paths
from . import runtime as julia_runtime
from . import opimage as julia_opimage
from . import sysimage as julia_sysimage
from bridge.framework import errors as _errors

# numpy and the contract table (which brings TensorFlow's dtypes) are
# imported by the calls that convert values, not here: `import bridge.julia;
# bridge.julia.init()` then waits for neither (docs/internals/julia-start.md).

__all__ = ["JuliaError", "JuliaStackOverflowError", "JuliaObject", "init", "image", "is_initialized", "eval",
           "include", "call", "JuliaThreadRunner", "interrupt", "install_interrupt_handler", "call_counts"]


def _cdef_text() -> str:
    header = (paths.kernels_cpp_dir() / "include" / "tfjl" / "capi.h").read_text()
    start, end = header.index("/* cffi-begin */"), header.index("/* cffi-end */")
    return header[start + len("/* cffi-begin */"):end]


_ffi = ffi_modules.cached_ffi(_cdef_text(), "_bridge_tfjl_ffi")


@functools.lru_cache(maxsize=None)
def _table() -> tuple[dict, int, int]:
    """tfjl::DType codes of numpy dtypes, String's code and FailedPrecondition's
    status: the contract table (bridge/julia/contract.py;
    kernels_cpp/include/tfjl/contract.h), read on first use."""
    from . import contract
    codes = {d.np_dtype: d.code for d in contract.DTYPES if d.np_dtype is not None}
    return codes, contract.by_name("String").code, contract.error_kind("FailedPrecondition").value


def __getattr__(name: str) -> Any:
    """``_DTYPE_CODES`` and ``_STRING``, the table's values, as module attributes."""
    if name == "_DTYPE_CODES":
        return _table()[0]
    if name == "_STRING":
        return _table()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class JuliaError(RuntimeError):
    """A Julia exception: ``str(e)`` is Julia's error text and backtrace.

    ``kind``: 1 invalid argument, 2 not found, 3 internal, 4 resource
    exhausted (Julia's ``OutOfMemoryError``), 5 failed
    precondition (this process was forked from one that runs Julia, which
    cannot run here: the message says what to do instead) (CONTRACT.md).
    """

    def __init__(self, message: str, kind: int = 3):
        super().__init__(message)
        self.kind = kind


class JuliaStackOverflowError(JuliaError, RecursionError):
    """Julia code recursed too deeply (Julia's ``StackOverflowError``).

    A ``RecursionError`` too, as Python's own would be; Julia unwound its
    stack, so Julia stays usable.
    """


def _error_class(message: str) -> type[JuliaError]:
    """The exception for a failure text from the runtime ("<ExceptionType>: ...")."""
    return JuliaStackOverflowError if message.startswith("StackOverflowError") else JuliaError


class JuliaObject:
    """A Julia value with no Python counterpart, kept as its ``repr`` text."""

    __slots__ = ("repr",)

    def __init__(self, repr_text: str):
        self.repr = repr_text

    def __repr__(self) -> str:
        return f"JuliaObject({self.repr})"

    def __str__(self) -> str:
        return self.repr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JuliaObject) and other.repr == self.repr

    def __hash__(self) -> int:
        return hash(self.repr)


_lock = threading.Lock()
_rt = None          # the runtime's cffi library, once Julia is up
_pinned: list = []  # libjulia's ctypes handle: never unloaded
_image: Optional[str] = None  # the system image Julia started from


def init(image: Optional[str | os.PathLike] = None, ops: Sequence[str | os.PathLike] = ()) -> None:
    """Start Julia in this process (idempotent, thread-safe).

    Julia's system image is chosen once, here (docs/internals/julia-start.md):
    ``image`` (or TFBRIDGE_JULIA_SYSIMAGE=<path>) if it is current, else
    the newest current image built for the op folders ``ops``
    (``tfbridge julia build-image --ops``; ``customop.load`` passes its
    folder), else the image with TFBridge (``make julia-image``), else
    Julia's own.  A stale image is never used: a line on stderr says so.
    ``bridge.julia.image()`` tells which one started."""
    global _rt, _image
    if _rt is not None:
        return
    with _lock:
        if _rt is not None:
            return
        # TensorFlow before libjulia, always (bridge.framework._lib explains
        # why): its libraries load on another thread while this one finds
        # Julia, the runtime and the image, then load() waits for them.
        _lib.start_loading()
        config = julia_runtime.julia_config()
        library = julia_runtime.loadable_runtime_library()  # a built op's copy if the cache has none
        bridge_jl = paths.julia_dir() / "TFBridge.jl"
        image = _choose_image(config, image, ops)
        _absolute_extra_depot()
        _lib.load()
        # Kernels that run before init (or in child processes) start Julia
        # from these; they must find the same installation.
        os.environ["TFBRIDGE_JULIA_BINDIR"] = config.bindir
        os.environ["TFBRIDGE_JULIA_IMAGE"] = image
        os.environ["TFBRIDGE_JULIA_BRIDGE_JL"] = str(bridge_jl)
        # The sysimage resolves jl_* through the global namespace.
        # libjulia brings libunwind, whose _Unwind_* would then win global
        # symbol lookup: C++ exceptions in extensions imported later (pybind11
        # in matplotlib, ...) could not unwind and abort the process. GCC's
        # unwinder, made global first, keeps resolving them; Julia itself uses
        # libunwind's own unw_* API, which this leaves alone.
        _pinned.append(ctypes.CDLL("libgcc_s.so.1", mode=os.RTLD_GLOBAL | os.RTLD_NOW))
        _pinned.append(ctypes.CDLL(config.libjulia, mode=os.RTLD_GLOBAL | os.RTLD_NOW))
        rt = _open_runtime(library)
        err = _ffi.new("char[]", 4096)
        if rt.tfjl_init(config.bindir.encode(), image.encode(), str(bridge_jl).encode(), err, 4096):
            raise JuliaError(f"Julia {config.version} ({config.executable}) could not be initialised: "
                             f"{_ffi.string(err).decode(errors='replace')}")
        rt.tfjl_ensure_sigint_hook()  # Ctrl-C abandons Julia calls (install_interrupt_handler)
        _image = image
        _rt = rt
        atexit.register(_drain_at_exit)
    # Julia's threads compile their serving loop once started: a call through
    # it returns when they serve.  A process that exited before (init() and
    # nothing else) could crash in LLVM's static destructors, run while
    # Julia's thread was still compiling.
    eval("nothing")


def _choose_image(config, image, ops) -> str:
    """The system image to start from (see ``init``); notes a stale one on stderr."""
    if julia_sysimage.disabled():
        return config.image
    explicit = image or os.environ.get(julia_sysimage.DISABLE_VARIABLE, "").strip()
    if str(explicit).lower() in ("1", "yes", "true", "on"):
        explicit = None  # the default choice, said explicitly
    note = ""
    if explicit:
        path = Path(explicit).expanduser().resolve()
        note = julia_opimage.check_explicit(path, config)
        if note is None:
            return str(path)
        note = (f"tf-julia-bridge: not using the system image {path}: {note}; "
                "Julia starts from the image with TFBridge")
    else:
        chosen, note = julia_opimage.choose([Path(f) for f in ops], config)
        if chosen is not None:
            return str(chosen)
    if note:
        print(note, file=sys.stderr, flush=True)
    # The image with TFBridge built in, where `make setup` built it for
    # these sources; else Julia's own, and the runtime includes TFBridge.jl.
    return str(julia_sysimage.current_image(config) or config.image)


def image() -> Optional[str]:
    """The system image Julia started from in this process, None before ``init``."""
    return _image


#: How long an exiting process waits for abandoned Julia calls to finish.
EXIT_DRAIN_SECONDS = 5.0


def _drain_at_exit() -> None:
    """Let Julia calls still in flight (abandoned by a deadline or Ctrl-C,
    finishing their loop) end before Python finalizes: an op's fed inputs
    are freed when its call ends, and a zero-copy feed's deallocator needs
    Python.  A call that never ends (Julia code that ignores
    TFBridge.checkinterrupt) is waited for EXIT_DRAIN_SECONDS at most."""
    if _rt is not None:
        _rt.tfjl_wait_idle(int(EXIT_DRAIN_SECONDS * 1e6))


#: An extra, read-only Julia depot appended after the user's depots, with its
#: environments/v<major>.<minor> appended to the load path (julia/TFBridge.jl,
#: "package environments", does it as Julia starts, however it starts).
EXTRA_DEPOT_VARIABLE = "TFBRIDGE_JULIA_DEPOT"


def _absolute_extra_depot() -> None:
    """Make TFBRIDGE_JULIA_DEPOT absolute in this process's environment, so
    that child processes (and kernels) started from another folder find the
    same depot; refuse, before Julia starts, a value that names no folder."""
    value = os.environ.get(EXTRA_DEPOT_VARIABLE, "")
    if not value:
        return
    depot = os.path.abspath(os.path.expanduser(value))
    if not os.path.isdir(depot):
        raise JuliaError(f"{EXTRA_DEPOT_VARIABLE}={value}: {depot} is not a folder (expected a Julia depot, "
                         "holding packages/); unset it or point it at one", 1)
    os.environ[EXTRA_DEPOT_VARIABLE] = depot


def _open_runtime(library: Path):
    """The runtime, reusing a copy a kernel library already brought in.

    Kernels link the runtime by its soname, so a kernel built against another
    build of it may have loaded that one; a second copy would try to start a
    second Julia.
    """
    # Asked of dlopen through ctypes: cffi, refused a bare name, would go on
    # to ctypes.util.find_library, which runs ldconfig and the C compiler.
    try:
        ctypes.CDLL(julia_runtime.LIBRARY_NAME, mode=os.RTLD_NOW | os.RTLD_NOLOAD)
    except OSError:
        return _ffi.dlopen(str(library), os.RTLD_NOW)
    return _ffi.dlopen(julia_runtime.LIBRARY_NAME, os.RTLD_NOW | os.RTLD_NOLOAD)


def is_initialized() -> bool:
    """True once ``init()`` has started Julia in this process."""
    return _rt is not None and bool(_rt.tfjl_is_initialized())


def _runtime():
    init()
    return _rt


def _raise(status: int, err, context: str = "") -> None:
    message = _ffi.string(err).decode("utf-8", errors="replace") if err != _ffi.NULL else "unknown error"
    _rt.tfjl_free(err)
    if message.startswith("InterruptException"):  # TFBridge.checkinterrupt after Ctrl-C
        _errors.raise_pending_signals()
    raise _error_class(message)(context + message, status)


def _text(value) -> str:
    return _ffi.unpack(value.text, value.text_len).decode("utf-8", errors="surrogateescape")


def _to_python(value) -> Any:
    kind = value.kind
    if kind == _rt.TFJL_VALUE_NOTHING:
        return None
    if kind == _rt.TFJL_VALUE_BOOL:
        return bool(value.i)
    if kind == _rt.TFJL_VALUE_INT:
        return int(value.i)
    if kind == _rt.TFJL_VALUE_FLOAT:
        return float(value.f)
    if kind == _rt.TFJL_VALUE_STRING:
        return _text(value)
    if kind == _rt.TFJL_VALUE_BIGINT:
        return int(_text(value))
    if kind == _rt.TFJL_VALUE_ARRAY:
        import numpy as np
        dims = [value.dims[k] for k in range(value.ndims)]
        raw = _ffi.buffer(value.data, value.nbytes)
        return np.frombuffer(raw, dtype=np.dtype(_text(value))).reshape(dims).copy()
    return JuliaObject(_text(value))


def _take_value(status: int, value, err, context: str = "") -> Any:
    try:
        if status:
            _raise(status, err[0], context)
        return _to_python(value)
    finally:
        _rt.tfjl_value_free(value)


def eval(code: str) -> Any:  # noqa: A001 - the natural name, as in Julia
    """Evaluate Julia code in Main and convert the last value.

    nothing -> None; Bool, Integer, AbstractFloat, String -> bool, int, float,
    str; numeric arrays -> a numpy copy in TF (row-major) index order;
    anything else -> ``JuliaObject`` holding its ``repr``.  Raises JuliaError.
    """
    rt = _runtime()
    value = _ffi.new("tfjl_value*")
    err = _ffi.new("char**")
    status = rt.tfjl_eval_value(code.encode(), value, err)
    return _take_value(status, value, err)


def include(path: str | os.PathLike) -> None:
    """``Base.include(Main, path)``: run a Julia file in Main.

    A relative ``path`` is relative to the current directory (Python's, as
    ``open`` takes it), made absolute before Julia sees it, so the file's own
    ``include`` lines resolve against its folder.  Raises FileNotFoundError
    naming the absolute path when there is no such file, and JuliaError naming
    the file when its code fails."""
    given = os.fsdecode(path)
    path = os.path.abspath(given)
    if not Path(path).is_file():
        where = "" if given == path else f" ('{given}' from {os.getcwd()})"
        raise FileNotFoundError(f"bridge.julia.include: {path}{where} does not exist")
    rt = _runtime()
    err = _ffi.new("char**")
    status = rt.tfjl_include(path.encode(), err)
    if status:
        _raise(status, err[0], f"bridge.julia.include({path}) failed: ")


def _scalar_arg(arg: Any, slot, keep: list, position: int) -> None:
    import numpy as np
    codes, string_code, _ = _table()
    slot.kind = _rt.TFJL_ARG_SCALAR
    if isinstance(arg, (bool, np.bool_)):
        slot.dtype, slot.i = codes[np.dtype(np.bool_)], int(arg)
    elif isinstance(arg, np.int32):
        slot.dtype, slot.i = codes[np.dtype(np.int32)], int(arg)
    elif isinstance(arg, (int, np.integer)):
        if not -2**63 <= int(arg) < 2**63:
            raise OverflowError(f"bridge.julia.call: argument {position} ({arg}) does not fit in an Int64")
        slot.dtype, slot.i = codes[np.dtype(np.int64)], int(arg)
    elif isinstance(arg, np.float32):
        slot.dtype, slot.f = codes[np.dtype(np.float32)], float(arg)
    elif isinstance(arg, (float, np.floating)):
        slot.dtype, slot.f = codes[np.dtype(np.float64)], float(arg)
    elif isinstance(arg, str):
        data = arg.encode()
        buf = _ffi.new("char[]", data)
        keep.append(buf)
        slot.dtype, slot.s, slot.len = string_code, buf, len(data)
    else:
        raise TypeError(f"bridge.julia.call: argument {position} is a {type(arg).__name__}; expected a "
                        "numpy array, bool, int, float or str")


def _array_arg(arg, slot, keep: list, position: int) -> None:
    import numpy as np
    codes = _table()[0]
    code = codes.get(arg.dtype)
    if code is None:
        raise TypeError(f"bridge.julia.call: argument {position} has dtype {arg.dtype}; expected one of "
                        + ", ".join(str(d) for d in codes))
    # Zero-copy needs C order, alignment and write access (Julia may write);
    # anything else is passed as a copy, so Julia's writes are not seen.
    arg = np.require(arg, requirements="CAW")
    dims = _ffi.new("int64_t[]", list(arg.shape) or [0])
    keep += [arg, dims]
    slot.kind, slot.dtype, slot.ndims, slot.dims = _rt.TFJL_ARG_ARRAY, code, arg.ndim, dims
    if arg.size:
        buf = _ffi.from_buffer(arg)
        keep.append(buf)  # the buffer stays exported for the call
        slot.data = buf


def call(fname: str, *args: Any) -> Any:
    """Call ``Main.<fname>(args...)`` (a dotted name reaches into modules) and convert its value.

    numpy arrays (float64, float32, int32, int64, bool) are passed zero-copy
    as views in TF index order when C-contiguous, aligned and writable (so
    Julia's in-place writes show in them), otherwise as copies; bool, int,
    float and str become Bool, Int64 (Int32 / Float32 for those numpy
    scalars), Float64 and String.  Raises JuliaError.
    """
    import numpy as np
    rt = _runtime()
    keep: list = []
    cargs = _ffi.new("tfjl_arg[]", max(len(args), 1))
    for i, arg in enumerate(args):
        if isinstance(arg, np.ndarray):
            _array_arg(arg, cargs[i], keep, i + 1)
        else:
            _scalar_arg(arg, cargs[i], keep, i + 1)
    value = _ffi.new("tfjl_value*")
    err = _ffi.new("char**")
    status = rt.tfjl_call_value(fname.encode(), cargs, len(args), value, err)
    return _take_value(status, value, err, f"bridge.julia.call({fname}): ")


class JuliaThreadRunner:
    """How a ``Session(config=SessionConfig(julia_thread=True))`` runs
    ``TF_SessionRun`` (bridge.framework.session.set_julia_thread_runner): on one of
    Julia's threads, with ops executed inline there, so Julia ops call Julia
    directly.  (With TF's thread pool, a Julia op would wait for Julia's
    thread while that thread waits for the run.)"""

    def run(self, session, run_options, inputs, input_values, ninputs: int, outputs, output_values,
            noutputs: int, targets, ntargets: int, run_metadata, status, timeout: Optional[float] = None,
            slot=None):
        """``TF_SessionRun`` with the same arguments (cdata of bridge.framework._lib).

        Returns None once the run is over, or, when ``timeout`` (seconds)
        passed or an interrupt came first, ``("deadline" | "interrupted",
        handle)``: the run was abandoned but may still be using every
        argument on Julia's thread; keep them alive until ``is_done(handle)``
        (or ``wait(handle)``), then ``release(handle)``.  A handle of None:
        the run is over, though abandoned first; its result stands if
        ``status`` is OK, and an error there is the abandon's doing.

        ``slot`` (from ``new_slot``) also receives the handle, as the runtime
        returns: a caller that records the slot before the call keeps an
        abandoned run even if Python raises before this returns (the
        KeyboardInterrupt of the Ctrl-C that abandoned it does, at once).
        """
        rt = _runtime()
        forked = rt.tfjl_forked()
        if forked != _ffi.NULL:  # the run would fail op by op; say why once
            raise JuliaError("Session(julia_thread=True).run: Julia is not available: "
                             + _ffi.string(forked).decode(errors="replace"), _table()[2])
        # The arguments are cdata of bridge.framework._lib's FFI; the runtime takes them type-erased.
        ptr, arr = (lambda v: _ffi.cast("void*", v)), (lambda v: _ffi.cast("void**", v))
        pending = slot if slot is not None else self.new_slot()
        timeout_us = -1 if timeout is None else max(0, int(timeout * 1e6))
        code = rt.tfjl_session_run_on_julia_thread(
            ptr(_lib.lib.TF_SessionRun), ptr(session), ptr(run_options), ptr(inputs), arr(input_values),
            ninputs, ptr(outputs), arr(output_values), noutputs, arr(targets), ntargets, ptr(run_metadata),
            ptr(status), timeout_us, pending)
        if code == 0:
            return None
        if code in (3, 4):  # over, though abandoned first: its status says how it ended
            return ("deadline" if code == 3 else "interrupted"), None
        return ("deadline" if code == 1 else "interrupted"), pending[0]

    @staticmethod
    def new_slot():
        """Where ``run`` leaves an abandoned run's handle; see ``slot_state``."""
        slot = _ffi.new("void*[1]")
        slot[0] = _NOT_RETURNED
        return slot

    @staticmethod
    def slot_state(slot):
        """``(returned, handle)``: whether ``run`` with this slot has returned
        from the runtime (False: it has not, or was never called), and the
        handle of the run it abandoned (None: the run is over)."""
        handle = slot[0]
        if handle == _NOT_RETURNED:
            return False, None
        return True, (handle if handle != _ffi.NULL else None)

    @staticmethod
    def is_done(handle) -> bool:
        return bool(_rt.tfjl_run_is_done(handle))

    @staticmethod
    def wait(handle) -> None:
        _rt.tfjl_run_wait(handle)

    @staticmethod
    def release(handle) -> None:
        _rt.tfjl_run_release(handle)


# A slot's value until the runtime writes it (it writes NULL or a handle as it returns).
_NOT_RETURNED = _ffi.cast("void*", 1)
_RUNNER = JuliaThreadRunner()


def session_runner() -> JuliaThreadRunner:
    """Start Julia and return what ``Session(config=SessionConfig(julia_thread=True))``
    runs ``TF_SessionRun`` with (bridge.framework.session.set_julia_thread_runner)."""
    init()
    return _RUNNER


def interrupt(why: str = "interrupted (bridge.julia.interrupt)") -> int:
    """Abandon every Julia call in flight, as Ctrl-C does.

    Julia ops handed over from TensorFlow's threads end at once with
    ``CancelledError`` (their session runs fail with it); runs of
    ``julia_thread`` sessions return, raising ``CancelledError``; and the Julia
    code of every running call sees ``TFBridge.checkinterrupt()`` throw
    ``InterruptException`` (Julia code that never calls it runs to its end,
    its outputs discarded).  Returns how many calls it reached; 0 if Julia
    has not started.
    """
    if _rt is None:
        return 0
    return int(_rt.tfjl_interrupt(why.encode()))


def install_interrupt_handler() -> None:
    """Put the handler that makes Ctrl-C abandon Julia calls back in front of
    the current SIGINT handler.  Julia's start installs it; call this after
    replacing Python's handler with ``signal.signal(SIGINT, ...)`` (idempotent)."""
    _runtime().tfjl_ensure_sigint_hook()


def call_counts() -> tuple[int, int]:
    """(calls run directly on Julia's thread, calls handed over to it) so far in this process."""
    rt = _runtime()
    direct, handed = _ffi.new("uint64_t*"), _ffi.new("uint64_t*")
    rt.tfjl_call_counts(direct, handed)
    return int(direct[0]), int(handed[0])


def register_entry(op_type: str, entry: int) -> None:
    """Make the kernels of ``op_type`` call the compiled entry at address
    ``entry`` (a C function pointer from Julia's ``@cfunction``, see
    templates/entries.jl.j2); 0 returns them to the generic path."""
    _runtime().tfjl_register_entry(op_type.encode(), _ffi.cast("void*", entry))


def entry_calls() -> int:
    """Calls made through compiled entries so far in this process."""
    return int(_runtime().tfjl_entry_calls())
