"""Python's operators on Outputs (bridge/operators.py): each builds the op TF
Python's operator builds, with the operands in the right order."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import bridge
from bridge.operators import OPERATORS

X = np.array([[1.5, -2.0], [0.5, 3.0]])
Y = np.array([[2.0, 0.25], [-1.0, 4.0]])

BINARY = [  # operator, op type, numpy
    (operator.add, "AddV2", np.add), (operator.sub, "Sub", np.subtract), (operator.mul, "Mul", np.multiply),
    (operator.truediv, "RealDiv", np.divide), (operator.matmul, "MatMul", np.matmul),
    (operator.pow, "Pow", lambda a, b: np.abs(a) ** b),
]


@pytest.mark.parametrize("op, op_type, expected", BINARY, ids=[b[1] for b in BINARY])
def test_binary_operators_and_their_reflections(op, op_type, expected):
    x = np.abs(X) if op_type == "Pow" else X
    g = bridge.Graph()
    with g.as_default():
        a = bridge.constant(x)
        b = bridge.constant(Y)
        # Output op Output, Output op array, and reflected: list op Output, array op Output
        outs = [op(a, b), op(a, Y), op(x.tolist(), b), op(x, b)]
    assert {out.op.type for out in outs} == {op_type}
    with bridge.Session(g) as sess:
        for got in sess.run(outs):
            np.testing.assert_allclose(got, expected(x, Y), rtol=1e-15)


def test_unary_operators():
    g = bridge.Graph()
    with g.as_default():
        a = bridge.constant(X)
        neg, absolute = -a, abs(a)
    assert (neg.op.type, absolute.op.type) == ("Neg", "Abs")
    with bridge.Session(g) as sess:
        got_neg, got_abs = sess.run([neg, absolute])
    np.testing.assert_array_equal(got_neg, -X)
    np.testing.assert_array_equal(got_abs, np.abs(X))


def test_every_operator_is_installed_on_output():
    for name, fn in OPERATORS.items():
        assert getattr(bridge.Output, name) is fn, name


def test_numpy_defers_to_outputs():
    """``array * x`` is one graph op, not numpy multiplying each element by x."""
    g = bridge.Graph()
    with g.as_default():
        x = bridge.constant(X)
        for y in (Y * x, Y @ x, np.float64(2.0) * x, np.abs(Y) ** x, 2.0 ** x):
            assert isinstance(y, bridge.Output), type(y)
        with pytest.raises(TypeError):
            np.add(Y, x)  # a ufunc on an Output: refused, never an object array
