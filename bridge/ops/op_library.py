"""Custom op libraries: load a compiled ``.so`` and get a function per op it registers.

``load_op_library(path)`` is TensorFlow's ``tf.load_op_library``: the library
is loaded with ``TF_LoadLibrary`` (its ops and kernels register themselves),
its OpList is read with ``TF_GetOpList``, and the same generator that makes
``bridge.ops`` makes a module of functions for those ops (cached the same
way, under ``library_<name>-<hash>.py``).
"""
from __future__ import annotations

import os
import threading
import types
from pathlib import Path
from typing import Union

from bridge.framework import buffers, errors
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import status
from bridge.framework.opdef import op_def

_lock = threading.Lock()
_modules: dict[str, types.ModuleType] = {}
_handles: list = []  # TF_Library handles, never deleted: the ops stay registered
_library_ops: set[str] = set()
_descriptions: dict[str, dict[str, str]] = {}


def describe_op(op_type: str, attributes: dict[str, str]) -> None:
    """Record what explains an op type to a reader of the graph (the custom-op
    tools record an op's spec, language, file and function): TensorBoard's
    graph shows these as attributes of every node of that type
    (``FileWriter.add_graph``).  The graph TensorFlow runs is not changed."""
    with _lock:
        _descriptions[op_type] = {str(k): str(v) for k, v in attributes.items()}


def op_description(op_type: str) -> dict[str, str]:
    """What :func:`describe_op` recorded for ``op_type`` ({} when nothing)."""
    with _lock:
        return dict(_descriptions.get(op_type, {}))


def library_op_names() -> frozenset[str]:
    """Op types registered by the libraries loaded here (``bridge.ops`` leaves them out)."""
    return frozenset(_library_ops)


def is_registered(op_type: str) -> bool:
    """Whether TensorFlow's op registry (built-in ops and loaded libraries) knows ``op_type``."""
    try:
        op_def(op_type)
    except errors.OpError:
        return False
    return True


def loaded_libraries() -> dict[str, frozenset[str]]:
    """The libraries :func:`load_op_library` loaded: resolved path -> the op types each registers."""
    with _lock:
        return {path: frozenset(module.OP_TYPES.values()) for path, module in _modules.items()}


def is_loaded(path: Union[str, os.PathLike]) -> bool:
    """Whether the library at ``path`` was loaded by :func:`load_op_library`."""
    return str(Path(path).expanduser().resolve()) in _modules


def load_op_library(path: Union[str, os.PathLike]) -> types.ModuleType:
    """Load a custom op library and return a module with a function per op.

    The module also has ``OP_TYPES`` (function name -> op type), ``OP_LIST``
    (the serialized OpList) and ``LIBRARY_PATH``.  Loading the same file
    again returns the same module.  A missing or unloadable library raises
    :class:`bridge.errors.NotFoundError` (or the error TensorFlow reports),
    naming the file and the loader's message.
    """
    resolved = Path(path).expanduser().resolve()
    key = str(resolved)
    with _lock:
        module = _modules.get(key)
        if module is not None:
            return module
        if not resolved.is_file():
            raise errors.NotFoundError(f"op library '{path}' not found (looked for {resolved})")
        s = status()
        handle = lib.TF_LoadLibrary(key.encode(), s.ptr)
        code = lib.TF_GetCode(s.ptr)
        if code or handle == ffi.NULL:
            message = s.message
            lib.TF_SetStatus(s.ptr, 0, b"")
            raise errors.error_for_code(code or 2, f"could not load op library '{resolved}': {message}")
        _handles.append(handle)
        buf = lib.TF_GetOpList(handle)  # owned by the handle
        op_list = buffers.read(buf)
        module = _generate(op_list, resolved)
        _library_ops.update(module.OP_TYPES.values())
        _modules[key] = module
        return module


def _generate(op_list: bytes, path: Path) -> types.ModuleType:
    from . import opgen
    ident = _identifier(path.stem)
    module_name = f"bridge.ops.op_library.{ident}"
    module = opgen.load_generated(
        f"library_{ident}", op_list, module_name,
        title=f"Ops of the custom op library {path.name}.",
        source=f"the OpList of {path.name}")
    for fn in module.OP_TYPES:
        getattr(module, fn).__module__ = module_name
    module.OP_LIST = op_list
    module.LIBRARY_PATH = str(path)
    return module


def _identifier(stem: str) -> str:
    text = "".join(c if c.isalnum() else "_" for c in stem)
    return text if text and not text[0].isdigit() else "_" + text
