"""A function for every op registered with TensorFlow: ``bridge.ops.mat_mul(a, b)``.

The functions are generated from TensorFlow's OpDef registry
(``TF_GetAllOpList``) by :mod:`bridge.ops.opgen`; each builds one op in the
graph of its inputs (else the default graph) and returns its outputs.

Rules of the generated functions
--------------------------------
Names
    The op type in snake_case, by TensorFlow's own rule: a "_" goes before an
    upper-case letter that follows a lower-case one or starts a new word
    (MatMul -> ``mat_mul``, AddV2 -> ``add_v2``, BiasAddGrad ->
    ``bias_add_grad``, TensorArrayV3 -> ``tensor_array_v3``, HSVToRGB ->
    ``hsv_to_rgb``).  ``OP_TYPES`` maps every function name back to its op
    type.  A name that is a Python keyword gets "_" appended (If -> ``if_``,
    Assert -> ``assert_``); names of builtins stay (``abs``, ``range``,
    ``min``), as in ``tf.abs``, but are left out of ``__all__`` so that
    ``from bridge.ops import *`` cannot shadow them.  When several op types
    share a snake_case name, the first in sorted order keeps it and the
    others get "_2", "_3"...; ``RENAMED`` lists every function whose name is
    not the plain snake_case (and why), ``COLLISIONS`` every shared name.
    Internal ops keep their leading underscore (``_Arg`` -> ``_arg``).
Parameters
    Inputs are positional (or keyword), in OpDef order; a list input takes
    a sequence.  Then, keyword-only: the attributes without a default
    (required), the attributes with a default (with it), and ``name=None``.
    Attributes that follow from the inputs are not parameters: the element
    type of an input (``T``), the length of a list input (``N``) and the
    types of a list input (``Tin``).  A parameter whose OpDef name is a
    Python keyword, a builtin or a name the generated code uses itself
    (``name``) gets "_" appended: ``input_``, ``filter_``, ``min_``,
    ``lambda_``; output field names follow the same rule.
Inputs
    Outputs pass through; numpy arrays, Python scalars/lists and
    ``bridge.Tensor`` values become Const ops (named ``<op>/<input>``, as
    TensorFlow names them) of the type the op needs: an Output decides a
    type attribute first, then a value with a dtype of its own (numpy), then
    the attribute's default, then the first Python value (ints -> int32,
    floats -> float32).  So ``add_v2(x, 1)`` makes the 1 of x's type.
    A ``bridge.Variable`` gives its value (its handle for resource inputs).
Outputs
    An op with one output returns an Output, with one list output a list of
    Outputs, with several outputs a namedtuple named after the op type whose
    fields are the outputs (a list output is a list field), and with none
    the Operation.
Docstrings
    The OpDef's summary and description where it has them (the wheel ships
    no ApiDefs, so most ops have none), then the inputs with their types,
    the attributes with types, allowed values, minimums and defaults, and
    the outputs.
Errors
    Checked before the C API and naming the op: a wrong number of inputs
    (Python's TypeError names the function), a missing required attribute
    (likewise), a value that cannot become the needed dtype, a dtype or
    string outside the attribute's allowed values, a list shorter than its
    minimum, inputs from different graphs.  Everything else is TensorFlow's
    own error from TF_FinishOperation, which names the op too.

When the code is generated
--------------------------
On the first import for a given op list: the registry's serialized OpList
(sorted by op name) and the generator's own source (opgen.py,
op_helpers.py, opdef.py, the templates) are hashed, and the module
generated for that hash is kept in
``bridge.platform.cache.root()/ops/registry-<hash>.py`` with its compiled code
beside it (``.bin``), both written atomically.  A new TensorFlow, or a
change to the generator, gives a new hash and so a new module; every later
import just loads the cached code (measured on a 2-core VM: about 1.2 s for
the first import, 50-90 ms after it; the four most recent modules are kept).  Ops of
libraries loaded with :func:`bridge.load_op_library` before this import are
left out (they live in that library's module).  The first use of a function loads
TensorFlow's libraries, which building any op needs anyway; importing the
package's own modules (``opgen``, ``op_helpers``, ``op_library``,
``operators``) generates nothing.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any, Optional


# The generated functions (bridge/ops/gen_ops.py) load on first use, so that
# importing this package's own modules (the generator, the operators that
# `import bridge` installs) generates nothing.  Function names are lower-case,
# so the capitalised names here never collide with one.
_SUBMODULES = frozenset({"opgen", "op_helpers", "op_library", "operators", "gen_ops"})
_LOCK = threading.RLock()
_EXPORTED: Optional[frozenset] = None


def _exports() -> frozenset:
    global _EXPORTED
    with _LOCK:
        if _EXPORTED is None:
            from . import gen_ops
            exports = gen_ops.EXPORTS
            globals().update(exports)
            _EXPORTED = frozenset(exports)
    return _EXPORTED


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("__") and name != "__all__":
        raise AttributeError(name)
    if name not in _exports():
        raise AttributeError(f"module 'bridge.ops' has no attribute '{name}'")
    return globals()[name]


def __dir__() -> list:
    return sorted(set(globals()) | _exports())


OP_TYPES: dict[str, str]
RENAMED: dict[str, str]
COLLISIONS: dict[str, list]
