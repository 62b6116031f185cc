"""Gradients: ``bridge.gradients``, ``jacobian``, ``hessian`` and the gradient registry.

Where things live
    ``api``        the public entry points (``gradients``, ``jacobian``, ``hessian``, ``hessians``)
    ``walk``       the graph walk of one ``gradients`` call: which ops go to TF's C++
                   registry in blocks, which to Python gradient functions (read its
                   docstring before changing how gradients are combined)
    ``cpp``        ``TF_AddGradientsWithPrefix`` and copying an op
    ``registry``   ``RegisterGradient``, ``NotDifferentiable``, overrides, and the order in
                   which an op's gradient is looked up
    ``_helpers``   the small op builders gradient functions use (``_op``, ``_const``, ``_mul``...)
    ``custom_op``  custom (Julia) ops differentiated by their ``<Op>Grad`` op
    ``function_grad``      calls of ``bridge.function`` functions
    ``control_flow_grad``  ``If``/``Case``/``While`` (``bridge.cond``/``bridge.while_loop``, or
                           imported from GraphDefs TF wrote), TensorLists
    ``state_grad``         ops reading the reference tensors of TF1 variables

Adding a gradient for a TensorFlow op
    Put it in the module named like TensorFlow's Python file that defines it
    (``math_grad``, ``nn_grad``, ``array_grad``; a new family gets a new
    ``<family>_grad.py``, imported below so its registrations run), written
    as TensorFlow's is with :class:`RegisterGradient` and the ``_helpers``.
    Such a module imports ``registry`` and ``_helpers`` (and bridge modules
    outside this package), never ``bridge.grad`` itself: that would be an
    import circle, which ``tests/project/test_import_graph.py`` rejects.  Only ops
    TensorFlow's C++ registry lacks (or gets wrong) need one: the walk hands
    every other op to C++ in blocks, and each Python-handled op splits them.
"""
from __future__ import annotations

from .api import gradients, hessian, hessians, jacobian
from .custom_op import register_custom_op_gradient, register_custom_op_second_gradient
from .registry import (ACCEPTS_NONE, NotDifferentiable, RegisterGradient, get_gradient_function, no_gradient,
                       register_gradient)

# Importing the op families registers their gradients.
from . import (array_grad, control_flow_grad, ctc_grad, data_flow_grad, device_grad, function_grad,
               image_grad, linalg_grad, list_grad, math_grad, nn_grad, ragged_grad, random_grad,
               resource_variable_grad, rnn_grad, sparse_grad, special_math_grad, spectral_grad,
               state_grad, tensor_array_grad)
from . import not_differentiable  # noqa: F401  (last: the families' registrations come first)

__all__ = ["gradients", "jacobian", "hessian", "hessians", "RegisterGradient", "NotDifferentiable",
           "no_gradient", "register_gradient", "register_custom_op_gradient", "register_custom_op_second_gradient",
           "get_gradient_function", "ACCEPTS_NONE"]
