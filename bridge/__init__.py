"""tf-julia-bridge: TensorFlow through its C API, with Julia functions as ops.

The TensorFlow libraries are loaded on first use (never ``import tensorflow``
in a process that runs Julia); Julia is started only when something needs it.
"""
from __future__ import annotations

import importlib

from bridge.platform import hooks as _hooks
from bridge.platform.version import VERSION as __version__

# Every public name loads its module on first access (PEP 562), so that
# `import bridge.julia` and Julia's start import neither numpy nor the graph
# modules (docs/internals/julia-start.md); tests/project/test_package.py resolves them all.
_DTYPE_NAMES = ("bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64", "int8", "int16",
                "int32", "int64", "resource", "string", "uint8", "uint16", "uint32", "uint64", "variant")
_LAZY = {
    "framework": ("bridge.framework", None),
    "platform": ("bridge.platform", None),
    "saved_model": ("bridge.saved_model", None),
    "dtypes": ("bridge.framework.dtypes", None),
    "errors": ("bridge.framework.errors", None),
    "DType": ("bridge.framework.dtypes", "DType"),
    "as_dtype": ("bridge.framework.dtypes", "as_dtype"),
    **{name: ("bridge.framework.dtypes", name) for name in _DTYPE_NAMES},
    "Tensor": ("bridge.framework.tensor", "Tensor"),
    "aligned_empty": ("bridge.framework.tensor", "aligned_empty"),
    "Shape": ("bridge.framework.attrs", "Shape"),
    "Graph": ("bridge.framework.graph", "Graph"),
    "Operation": ("bridge.framework.graph", "Operation"),
    "Output": ("bridge.framework.graph", "Output"),
    "get_default_graph": ("bridge.framework.graph", "get_default_graph"),
    "reset_default_graph": ("bridge.framework.graph", "reset_default_graph"),
    "Session": ("bridge.framework.session", "Session"),
    "SessionConfig": ("bridge.framework.session", "SessionConfig"),
    "RunOptions": ("bridge.framework.run_metadata", "RunOptions"),
    "RunMetadata": ("bridge.framework.run_metadata", "RunMetadata"),
    "SavedModel": ("bridge.saved_model", "SavedModel"),
    "Signature": ("bridge.saved_model", "Signature"),
    "load_saved_model": ("bridge.saved_model", "load_saved_model"),
    "colocate_with": ("bridge.framework.scopes", "colocate_with"),
    "control_dependencies": ("bridge.framework.scopes", "control_dependencies"),
    "device": ("bridge.framework.scopes", "device"),
    "name_scope": ("bridge.framework.scopes", "name_scope"),
    "ops": ("bridge.ops", None),
    "julia": ("bridge.julia", None),
    "customop": ("bridge.customop", None),
    "constant": ("bridge.framework.builders", "constant"),
    "placeholder": ("bridge.framework.builders", "placeholder"),
    "Variable": ("bridge.framework.builders", "Variable"),
    "SparseTensor": ("bridge.framework.builders", "SparseTensor"),
    "SparseTensorValue": ("bridge.framework.builders", "SparseTensorValue"),
    "IndexedSlices": ("bridge.framework.indexed_slices", "IndexedSlices"),
    "IndexedSlicesValue": ("bridge.framework.indexed_slices", "IndexedSlicesValue"),
    "convert_to_tensor": ("bridge.framework.indexed_slices", "convert_to_tensor"),
    "gather": ("bridge.ops.array_ops", "gather"),
    "math": ("bridge.api.namespaces", "math"),
    "linalg": ("bridge.api.namespaces", "linalg"),
    "random": ("bridge.api.namespaces", "random"),
    "random_normal": ("bridge.nn.random_ops", "random_normal"),
    "random_uniform": ("bridge.nn.random_ops", "random_uniform"),
    "truncated_normal": ("bridge.nn.random_ops", "truncated_normal"),
    "abs": ("bridge.ops.math_ops", "abs"),
    "add": ("bridge.ops.math_ops", "add"),
    "clip_by_value": ("bridge.ops.math_ops", "clip_by_value"),
    "divide": ("bridge.ops.math_ops", "divide"),
    "multiply": ("bridge.ops.math_ops", "multiply"),
    "round": ("bridge.ops.math_ops", "round"),
    "subtract": ("bridge.ops.math_ops", "subtract"),
    "exp": ("bridge.ops", "exp"),
    "log": ("bridge.ops", "log"),
    "sqrt": ("bridge.ops", "sqrt"),
    "rsqrt": ("bridge.ops", "rsqrt"),
    "square": ("bridge.ops", "square"),
    "tanh": ("bridge.ops", "tanh"),
    "sigmoid": ("bridge.ops", "sigmoid"),
    "sin": ("bridge.ops", "sin"),
    "cos": ("bridge.ops", "cos"),
    "sign": ("bridge.ops", "sign"),
    "floor": ("bridge.ops", "floor"),
    "ceil": ("bridge.ops", "ceil"),
    "pow": ("bridge.ops", "pow"),
    "maximum": ("bridge.ops", "maximum"),
    "minimum": ("bridge.ops", "minimum"),
    "reshape": ("bridge.ops", "reshape"),
    "tile": ("bridge.ops", "tile"),
    "identity": ("bridge.ops", "identity"),
    "stop_gradient": ("bridge.ops", "stop_gradient"),
    "equal": ("bridge.ops", "equal"),
    "not_equal": ("bridge.ops", "not_equal"),
    "less": ("bridge.ops", "less"),
    "less_equal": ("bridge.ops", "less_equal"),
    "greater": ("bridge.ops", "greater"),
    "greater_equal": ("bridge.ops", "greater_equal"),
    "logical_and": ("bridge.ops", "logical_and"),
    "logical_or": ("bridge.ops", "logical_or"),
    "logical_not": ("bridge.ops", "logical_not"),
    "gather_nd": ("bridge.ops", "gather_nd"),
    "reverse": ("bridge.ops", "reverse_v2"),
    "fill": ("bridge.ops", "fill"),
    "broadcast_to": ("bridge.ops", "broadcast_to"),
    "roll": ("bridge.ops", "roll"),
    "negative": ("bridge.ops", "neg"),
    "reciprocal": ("bridge.ops", "reciprocal"),
    "erf": ("bridge.ops", "erf"),
    "softplus": ("bridge.ops", "softplus"),
    "add_n": ("bridge.ops.math_ops", "add_n"),
    "argmax": ("bridge.ops.math_ops", "argmax"),
    "argmin": ("bridge.ops.math_ops", "argmin"),
    "cast": ("bridge.ops.math_ops", "cast"),
    "range": ("bridge.ops.math_ops", "range"),
    "concat": ("bridge.ops.array_ops", "concat"),
    "expand_dims": ("bridge.ops.array_ops", "expand_dims"),
    "one_hot": ("bridge.ops.array_ops", "one_hot"),
    "ones": ("bridge.ops.array_ops", "ones"),
    "ones_like": ("bridge.ops.array_ops", "ones_like"),
    "rank": ("bridge.ops.array_ops", "rank"),
    "shape": ("bridge.ops.array_ops", "shape"),
    "size": ("bridge.ops.array_ops", "size"),
    "split": ("bridge.ops.array_ops", "split"),
    "squeeze": ("bridge.ops.array_ops", "squeeze"),
    "stack": ("bridge.ops.array_ops", "stack"),
    "transpose": ("bridge.ops.array_ops", "transpose"),
    "unstack": ("bridge.ops.array_ops", "unstack"),
    "where": ("bridge.ops.array_ops", "where"),
    "zeros": ("bridge.ops.array_ops", "zeros"),
    "zeros_like": ("bridge.ops.array_ops", "zeros_like"),
    "matmul": ("bridge.ops.math_ops", "matmul"),
    "reduce_all": ("bridge.ops.math_ops", "reduce_all"),
    "reduce_any": ("bridge.ops.math_ops", "reduce_any"),
    "reduce_logsumexp": ("bridge.ops.math_ops", "reduce_logsumexp"),
    "reduce_max": ("bridge.ops.math_ops", "reduce_max"),
    "reduce_mean": ("bridge.ops.math_ops", "reduce_mean"),
    "reduce_min": ("bridge.ops.math_ops", "reduce_min"),
    "reduce_prod": ("bridge.ops.math_ops", "reduce_prod"),
    "reduce_sum": ("bridge.ops.math_ops", "reduce_sum"),
    "load_op_library": ("bridge.ops.op_library", "load_op_library"),
    "boolean_mask": ("bridge.ops.array_ops", "boolean_mask"),
    "gradients": ("bridge.grad", "gradients"),
    "jacobian": ("bridge.grad", "jacobian"),
    "hessian": ("bridge.grad", "hessian"),
    "RegisterGradient": ("bridge.grad", "RegisterGradient"),
    "NotDifferentiable": ("bridge.grad", "NotDifferentiable"),
    "custom_gradient": ("bridge.grad.custom_gradient", "custom_gradient"),
    "function": ("bridge.framework.functions", "function"),
    "TensorSpec": ("bridge.framework.tensor_spec", "TensorSpec"),
    "cond": ("bridge.framework.control_flow", "cond"),
    "while_loop": ("bridge.framework.control_flow", "while_loop"),
    "gradcheck": ("bridge.grad.gradient_check", "gradcheck"),
    "compare_jacobians": ("bridge.grad.gradient_check", "compare_jacobians"),
    "global_variables_initializer": ("bridge.framework.builders", "global_variables_initializer"),
    "global_variables": ("bridge.framework.builders", "global_variables"),
    "trainable_variables": ("bridge.framework.builders", "trainable_variables"),
    "train": ("bridge.train", None),
    "distribute": ("bridge.distribute", None),
    "summary": ("bridge.summary", None),
    "nn": ("bridge.nn", None),
    "layers": ("bridge.nn.layers", None),
    "losses": ("bridge.nn.losses", None),
    "initializers": ("bridge.nn.initializers", None),
    "set_random_seed": ("bridge.framework.random_seed", "set_random_seed"),
}


def _julia_session_runner():
    """Julia-thread sessions run through the Julia host, imported only when one is made."""
    from bridge.julia.host import session_runner
    return session_runner()


def _load_op_folder(folder):
    """An op folder in load_saved_model(op_libraries=...) loads through the custom-op tools, imported only then."""
    return __getattr__("customop").load(folder)


def _install_operators(graph_module) -> None:
    """x + y, x @ w, ... on Output (bridge.ops.operators), as the graph module is imported."""
    importlib.import_module("bridge.ops.operators")


# The package's hooks into the binding, run as each module is imported
# (bridge/platform/hooks.py), however it is reached.
_hooks.on_import("bridge.framework.graph", _install_operators)
_hooks.on_import("bridge.framework.session", lambda m: m.set_julia_thread_runner(_julia_session_runner))
_hooks.on_import("bridge.saved_model.load", lambda m: m.set_op_folder_loader(_load_op_folder))


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'bridge' has no attribute '{name}'")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
