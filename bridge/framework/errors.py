"""TensorFlow status codes as Python exceptions (the names of ``tf.errors``).

Every C call that takes a TF_Status goes through :func:`check`, the single
place where a code becomes an exception.
"""
from __future__ import annotations

import threading

from ._lib import ffi, lib


class OpError(Exception):
    """A TensorFlow error; ``code`` is TF's status code, ``message`` its text."""

    code = 2

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class CancelledError(OpError): code = 1
class UnknownError(OpError): code = 2
class InvalidArgumentError(OpError): code = 3
class DeadlineExceededError(OpError): code = 4
class NotFoundError(OpError): code = 5
class AlreadyExistsError(OpError): code = 6
class PermissionDeniedError(OpError): code = 7
class ResourceExhaustedError(OpError): code = 8
class FailedPreconditionError(OpError): code = 9
class AbortedError(OpError): code = 10
class OutOfRangeError(OpError): code = 11
class UnimplementedError(OpError): code = 12
class InternalError(OpError): code = 13
class UnavailableError(OpError): code = 14
class DataLossError(OpError): code = 15
class UnauthenticatedError(OpError): code = 16


_BY_CODE = {cls.code: cls for cls in OpError.__subclasses__()}


def error_for_code(code: int, message: str) -> OpError:
    return _BY_CODE.get(code, UnknownError)(message, code)


class Status:
    """A TF_Status owned by Python."""

    __slots__ = ("ptr",)

    def __init__(self):
        self.ptr = ffi.gc(lib.TF_NewStatus(), lib.TF_DeleteStatus)

    @property
    def code(self) -> int:
        return lib.TF_GetCode(self.ptr)

    @property
    def message(self) -> str:
        return ffi.string(lib.TF_Message(self.ptr)).decode("utf-8", "replace")


_local = threading.local()


def status() -> Status:
    """This thread's reusable status (a TF_Status per call would cost an allocation)."""
    s = getattr(_local, "status", None)
    if s is None:
        s = _local.status = Status()
    return s


def raise_pending_signals() -> None:
    """Run Python's pending signal handlers now: after Ctrl-C interrupted a
    call into C (a session run, a Julia call), this raises KeyboardInterrupt
    where Python would have at its next instruction."""
    import ctypes
    ctypes.pythonapi.PyErr_CheckSignals()


def lease_status() -> Status:
    """This thread's status, taken out of reuse until ``return_status``: for
    a run that may be abandoned and go on writing into it.  Whatever
    happens before it is given back (a KeyboardInterrupt as the run
    returns), a later run on this thread gets a status of its own, never
    one an abandoned run still writes into."""
    s = getattr(_local, "status", None)
    if s is None:
        return Status()
    _local.status = None
    return s


def return_status(s: Status) -> None:
    """Give back a status ``lease_status`` took, once nothing writes into it."""
    _local.status = s


def check(s: Status, context: str = "") -> None:
    """Raise the exception matching ``s`` if it is not OK, then reset it."""
    code = lib.TF_GetCode(s.ptr)
    if code:
        message = s.message
        lib.TF_SetStatus(s.ptr, 0, b"")
        raise error_for_code(code, f"{context}: {message}" if context else message)
