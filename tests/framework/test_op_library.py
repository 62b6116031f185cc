"""load_op_library: a custom op compiled here with g++, loaded, and used
through the functions generated for it."""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge.framework import _lib
from bridge import errors
from support import REPO


OPS_CC = textwrap.dedent(r"""
    #include <limits>
    #include "tensorflow/core/framework/op.h"
    #include "tensorflow/core/framework/op_kernel.h"
    #include "tensorflow/core/framework/shape_inference.h"

    using namespace tensorflow;

    REGISTER_OP("BridgeTestAddAmount")
        .Input("x: T")
        .Output("y: T")
        .Attr("T: {float, double, int32}")
        .Attr("amount: int = 1")
        .SetShapeFn([](shape_inference::InferenceContext* c) {
          c->set_output(0, c->input(0));
          return absl::OkStatus();
        })
        .Doc("Adds `amount` to every element.");

    template <typename T>
    class AddAmountOp : public OpKernel {
     public:
      explicit AddAmountOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
        OP_REQUIRES_OK(ctx, ctx->GetAttr("amount", &amount_));
      }
      void Compute(OpKernelContext* ctx) override {
        const Tensor& x = ctx->input(0);
        Tensor* y = nullptr;
        OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
        auto in = x.flat<T>();
        auto out = y->flat<T>();
        for (int64_t i = 0; i < in.size(); ++i) out(i) = in(i) + static_cast<T>(amount_);
      }
     private:
      int64_t amount_;
    };
    #define REGISTER(T) REGISTER_KERNEL_BUILDER( \
        Name("BridgeTestAddAmount").Device(DEVICE_CPU).TypeConstraint<T>("T"), AddAmountOp<T>)
    REGISTER(float);
    REGISTER(double);
    REGISTER(int32);

    // A list input and two outputs named like Python builtins.
    REGISTER_OP("BridgeTestMinMax")
        .Input("values: N * float")
        .Attr("N: int >= 1")
        .Output("min: float")
        .Output("max: float")
        .SetShapeFn([](shape_inference::InferenceContext* c) {
          c->set_output(0, c->Scalar());
          c->set_output(1, c->Scalar());
          return absl::OkStatus();
        });

    class MinMaxOp : public OpKernel {
     public:
      using OpKernel::OpKernel;
      void Compute(OpKernelContext* ctx) override {
        OpInputList values;
        OP_REQUIRES_OK(ctx, ctx->input_list("values", &values));
        float lo = std::numeric_limits<float>::infinity(), hi = -lo;
        for (const Tensor& t : values) {
          auto f = t.flat<float>();
          for (int64_t i = 0; i < f.size(); ++i) { lo = std::min(lo, f(i)); hi = std::max(hi, f(i)); }
        }
        Tensor* out = nullptr;
        OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
        out->scalar<float>()() = lo;
        OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &out));
        out->scalar<float>()() = hi;
      }
    };
    REGISTER_KERNEL_BUILDER(Name("BridgeTestMinMax").Device(DEVICE_CPU), MinMaxOp);
""")


def _compile_flags() -> list[str]:
    framework, _ = _lib.library_paths()
    return ["-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1", "-DEIGEN_MAX_ALIGN_BYTES=64", "-O1", "-fPIC", "-shared",
            "-Wno-deprecated-declarations",
            f"-I{_lib.include_dir()}", f"-L{framework.parent}", "-l:libtensorflow_framework.so.2"]


@pytest.fixture(scope="session")
def op_library_path() -> Path:
    """The test library, compiled once and kept in build/ keyed by its source,
    flags and TensorFlow build (a compile takes tens of seconds)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    framework, _ = _lib.library_paths()
    flags = _compile_flags()
    stat = framework.stat()
    key = hashlib.sha256(f"{OPS_CC}|{flags}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    out_dir = REPO / "build" / "test-op-library" / key
    target = out_dir / "bridge_test_ops.so"
    if not target.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        src = out_dir / "bridge_test_ops.cc"
        src.write_text(OPS_CC)
        tmp = out_dir / f".bridge_test_ops.{os.getpid()}.so"
        proc = subprocess.run(["g++", str(src), "-o", str(tmp)] + flags, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"compiling the test op library failed:\n{proc.stderr[-4000:]}"
        os.replace(tmp, target)
    return target


@pytest.fixture(scope="session")
def oplib(op_library_path):
    return bridge.load_op_library(op_library_path)


def test_functions_for_the_library_ops(oplib, op_library_path) -> None:
    assert oplib.OP_TYPES == {"bridge_test_add_amount": "BridgeTestAddAmount",
                              "bridge_test_min_max": "BridgeTestMinMax"}
    assert oplib.LIBRARY_PATH == str(op_library_path.resolve())
    sig = inspect.signature(oplib.bridge_test_add_amount)
    assert str(sig) == "(x, *, amount=1, name=None)"
    assert str(inspect.signature(oplib.bridge_test_min_max)) == "(values, *, name=None)"
    assert "Adds `amount` to every element." in oplib.bridge_test_add_amount.__doc__
    assert oplib.bridge_test_add_amount.__module__ == oplib.__name__


def test_library_ops_build_and_run(oplib) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [3], name="x")
        y = oplib.bridge_test_add_amount(x, amount=3)
        yi = oplib.bridge_test_add_amount([1, 2], name="ints")
        mm = oplib.bridge_test_min_max([[1.0, -2.0], np.array([7.5], np.float32)])
    assert y.op.type == "BridgeTestAddAmount" and y.dtype == bridge.float64
    assert type(mm).__name__ == "BridgeTestMinMax" and mm._fields == ("min_", "max_")
    with bridge.Session(g) as sess:
        out, ints, (lo, hi) = sess.run([y, yi, mm], {x: [1.0, 2.0, 3.5]})
    np.testing.assert_array_equal(out, [4.0, 5.0, 6.5])
    assert ints.tolist() == [2, 3] and ints.dtype == np.int32
    assert (lo, hi) == (-2.0, 7.5)
    with g.as_default(), pytest.raises(TypeError, match="BridgeTestAddAmount: input 'x' has type string"):
        oplib.bridge_test_add_amount("text")


def test_loading_twice_returns_the_same_module(oplib, op_library_path, tmp_path) -> None:
    assert bridge.load_op_library(str(op_library_path)) is oplib
    link = tmp_path / "link.so"
    link.symlink_to(op_library_path)
    assert bridge.load_op_library(link) is oplib
    relative = os.path.relpath(op_library_path)
    assert bridge.load_op_library(relative) is oplib


def test_missing_library(tmp_path) -> None:
    missing = tmp_path / "no_such_ops.so"
    with pytest.raises(errors.NotFoundError, match="no_such_ops.so"):
        bridge.load_op_library(missing)


def test_broken_libraries(tmp_path) -> None:
    garbage = tmp_path / "garbage_ops.so"
    garbage.write_bytes(b"this is not an ELF file")
    with pytest.raises(errors.OpError, match=r"garbage_ops\.so.*(invalid ELF header|file too short)"):
        bridge.load_op_library(garbage)
    if shutil.which("gcc") is None:   # a skip, not a pass (and on CI a failure: tests/support/ci.py)
        pytest.skip("gcc is not installed: the library with an undefined symbol cannot be built")
    src = tmp_path / "undefined.c"
    src.write_text("extern int bridge_no_such_symbol(void);\nint use(void) { return bridge_no_such_symbol(); }\n")
    lib_path = tmp_path / "undefined_ops.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(lib_path)], check=True)
    with pytest.raises(errors.OpError, match=r"undefined_ops\.so.*undefined symbol: bridge_no_such_symbol"):
        bridge.load_op_library(lib_path)


def test_bridge_ops_leaves_library_ops_out(op_library_path) -> None:
    """Loaded before bridge.ops, a library's ops stay in its own module (and
    the registry module's cache entry is the usual one)."""
    code = textwrap.dedent(f"""
        import json, bridge
        from bridge.framework import opdef
        lib = bridge.load_op_library({str(op_library_path)!r})
        registered = {{op.name for op in opdef.registry_op_defs()}}
        import bridge.ops
        print(json.dumps({{"registered": "BridgeTestAddAmount" in registered,
                           "in_ops": "BridgeTestAddAmount" in bridge.ops.OP_TYPES.values(),
                           "n": len(bridge.ops.OP_TYPES)}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["registered"] and not result["in_ops"]
    from bridge import ops
    assert result["n"] == len(ops.OP_TYPES)
