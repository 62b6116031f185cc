"""Hand-written builders: constant, placeholder, Variable, SparseTensor; and
the loader's error when TensorFlow's libraries are missing."""
import os
import subprocess
import sys

import numpy as np
import pytest

import bridge
from bridge import dtypes, ops
from bridge.framework.builders import global_variables_initializer
from bridge.framework.graph_def import parse_graph_def


def _run(g, fetches, feeds=None):
    with bridge.Session(g) as s:
        return s.run(fetches, feeds)


def test_constant_follows_tensorflow_dtype_defaults():
    g = bridge.Graph()
    with g.as_default():
        c_int, c_big = bridge.constant(3), bridge.constant(2 ** 40)
        c_float, c_np = bridge.constant([1.5, 2.5]), bridge.constant(np.arange(3, dtype=np.int16))
        c_fill = bridge.constant(7.0, dtype=bridge.float64, shape=[2, 3], name="fill")
    assert (c_int.dtype, c_big.dtype, c_float.dtype, c_np.dtype) == (dtypes.int32, dtypes.int64, dtypes.float32,
                                                                      dtypes.int16)
    assert c_fill.op.name == "fill" and c_fill.shape == bridge.Shape([2, 3])
    np.testing.assert_array_equal(_run(g, c_fill), np.full((2, 3), 7.0))
    with g.as_default(), pytest.raises(ValueError, match="cannot fill shape"):
        bridge.constant([1, 2, 3], shape=[2, 2])


def test_placeholder_shapes():
    g = bridge.Graph()
    with g.as_default():
        any_shape = bridge.placeholder(bridge.float32, name="a")
        partial = bridge.placeholder(bridge.int64, [None, 4], name="b")
    assert any_shape.shape.unknown_rank
    assert partial.shape == bridge.Shape([None, 4])


def test_variable_layout_initializer_and_updates():
    g = bridge.Graph()
    with g.as_default():
        v = bridge.Variable(np.array([1.0, 2.0]), name="w")
        step = v.assign_add([10.0, 10.0])
        with bridge.control_dependencies([step]):
            after = v.read_value()
        init = global_variables_initializer()
    names = [n.name for n in parse_graph_def(g.as_graph_def())]
    assert {"w", "w/Assign", "w/Read/ReadVariableOp", "w/Initializer/initial_value"} <= set(names)
    assert v.op.type == "VarHandleOp" and v.initializer.type == "AssignVariableOp"
    with bridge.Session(g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(after), [11.0, 12.0])
        np.testing.assert_array_equal(s.run(after), [21.0, 22.0])
        s.run(v.assign([0.0, 1.0]))
        np.testing.assert_array_equal(s.run(v.read_value()), [0.0, 1.0])
    with g.as_default():
        assert ops.add_v2(v, 1.0).dtype == dtypes.float64  # a Variable passes as its value


def test_sparse_tensor_feeds_the_sparse_ops():
    g = bridge.Graph()
    with g.as_default():
        sp = bridge.SparseTensor([[0, 0], [1, 2]], np.array([5.0, 6.0]), [2, 3])
        dense = sp.to_dense()
        product = ops.sparse_tensor_dense_mat_mul(*sp, np.ones((3, 2)))
    d, p = _run(g, [dense, product])
    np.testing.assert_array_equal(d, [[5.0, 0.0, 0.0], [0.0, 0.0, 6.0]])
    np.testing.assert_array_equal(p, [[5.0, 5.0], [6.0, 6.0]])
    assert sp.indices.dtype == dtypes.int64 and sp.dtype == dtypes.float64


def test_missing_tensorflow_libraries_are_named():
    env = dict(os.environ, TFBRIDGE_LIBTENSORFLOW="/nonexistent/libtf")
    code = "import bridge; bridge.Graph()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    assert "LibraryNotFoundError" in proc.stderr and "TFBRIDGE_LIBTENSORFLOW=/nonexistent/libtf" in proc.stderr


def test_folder_without_the_c_api_library_is_named(tmp_path):
    env = dict(os.environ, TFBRIDGE_LIBTENSORFLOW=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", "import bridge; bridge.Graph()"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert "libtensorflow_framework.so.2" in proc.stderr and "libtensorflow_cc.so.2" in proc.stderr


def test_unwritable_cache_falls_back_to_parsing_the_declarations(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    env = dict(os.environ, TFBRIDGE_CACHE_DIR=str(blocker / "cache"))
    code = ("import numpy as np, bridge\n"
            "g = bridge.Graph()\n"
            "with g.as_default():\n"
            "    x = bridge.placeholder(bridge.float64, [2], name='x')\n"
            "    y = g.create_op('Identity', [x], attrs={'T': bridge.float64}).output(0)\n"
            "print(bridge.Session(g).run(y, {x: np.ones(2)}).sum())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "2.0"


def test_the_cli_names_missing_tensorflow_libraries_without_a_traceback():
    """`tfbridge` on a machine whose TensorFlow cannot be found says so in one line."""
    env = dict(os.environ, TFBRIDGE_LIBTENSORFLOW="/nonexistent/libtf")
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "fortran", "--flags"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "tfbridge: TFBRIDGE_LIBTENSORFLOW=/nonexistent/libtf is not a folder" in proc.stderr
