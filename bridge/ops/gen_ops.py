"""The function of every op registered with TensorFlow, generated on import
(TF's ``gen_*_ops`` modules, in one): what ``bridge.ops`` exports.

Importing this module generates (or loads from the cache) the functions
(bridge/ops/__init__.py, "When the code is generated"); the package's own
modules that build on them (``array_ops``, ``math_ops``, ``operators``)
import this module, never the package ``bridge.ops``, whose names load
from here on first use.  Each function's ``__module__`` is ``bridge.ops``
(help() and pickle name them ``bridge.ops.<fn>``).
"""
# No lower-case name at module level but the generated functions (and
# dunders): every name here is one bridge.ops exports.


def _Load():
    """Import (generating on first use) the module of the registry's ops."""
    from . import op_library, opgen
    from bridge.framework import opdef
    from bridge.framework._lib import ffi, lib

    version = ffi.string(lib.TF_Version()).decode()
    return opgen.load_generated(
        "registry", opdef.registry_op_list_bytes(), "bridge.ops._generated",
        title="TensorFlow's registered ops as Python functions: the body of bridge.ops.",
        source=f"the op registry of TensorFlow {version}", exclude=op_library.library_op_names())


def _Exports(module) -> dict:
    import builtins
    out = {fn: getattr(module, fn) for fn in module.OP_TYPES}
    for fn in out.values():
        fn.__module__ = __package__  # bridge.ops: help() and pickle name them bridge.ops.<fn>
    out["OP_TYPES"] = module.OP_TYPES
    out["RENAMED"] = module.RENAMED
    out["COLLISIONS"] = module.COLLISIONS
    out["__all__"] = sorted(fn for fn in module.OP_TYPES
                            if not fn.startswith("_") and not hasattr(builtins, fn))
    return out


EXPORTS = _Exports(_Load())
globals().update(EXPORTS)
