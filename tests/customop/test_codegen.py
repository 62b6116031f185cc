"""Code generation: golden files pin the exact output for a few specs.

After an intended change to a template or to codegen.py, regenerate them with
    TFBRIDGE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/customop/test_codegen.py
and review the diff (refused on CI: tests/support/golden.py).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from bridge.customop import codegen, forwarddiff, init
from bridge.customop.spec import parse
from support import TESTS
from support.golden import update_requested

GOLDEN = TESTS / "golden" / "customop"
UPDATE = update_requested()
CASES = sorted(p.name for p in GOLDEN.iterdir()
               if (p / "custom_op.txt").is_file() and p.name != "scaffold")


def _spec(case: str):
    # Labelled "custom_op.txt" so the output does not depend on where the tests run.
    return parse((GOLDEN / case / "custom_op.txt").read_text(), "custom_op.txt")


def _outputs(case: str) -> dict[str, str]:
    spec = _spec(case)
    out = {f"{case}.cc": codegen.kernel_source(spec)}
    entries = codegen.entries_source(spec)
    if entries is not None:
        out[codegen.entries_file_name(spec)] = entries
    gradient = forwarddiff.gradient_source(spec)  # @gradient forwarddiff
    if gradient is not None:
        out[forwarddiff.gradient_file_name(spec)] = gradient
        out[codegen.julia_file_name(spec)] = codegen.julia_stub(spec)
    if case == "TwoLayer":  # the other files vary less with the spec: one case pins them
        out["CMakeLists.txt"] = codegen.cmake_lists(spec)
        out["two_layer.jl"] = codegen.julia_stub(spec)
        out["gradtest.py"] = codegen.gradtest_script(spec)
    return out


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with TFBRIDGE_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{path.name} differs from its golden file {path}"


@pytest.mark.parametrize("case", CASES)
def test_golden(case):
    for name, text in _outputs(case).items():
        _check(GOLDEN / case / name, text)


def test_scaffold_golden(tmp_path):
    written = init("Twice", tmp_path / "twice")
    assert [p.name for p in written] == ["custom_op.txt", "twice.jl"]
    for path in written:
        _check(GOLDEN / "scaffold" / path.name, path.read_text())


def test_output_is_deterministic():
    for case in CASES:
        assert _outputs(case) == _outputs(case)


# ------------------------------------------------------------------ conventions

def test_gradient_op_order():
    cc = codegen.kernel_source(_spec("SinkhornKnopp"))
    # Inputs: gradients of the float outputs, then every output, then every input.
    grad = cc[cc.index('REGISTER_OP("SinkhornKnoppGrad")'):]
    inputs = re.findall(r'\.Input\("(\w+): (\w+)"\)', grad.split(".SetShapeFn")[0])
    assert inputs == [("grad_p", "double"), ("grad_l", "double"), ("p", "double"), ("l", "double"),
                      ("m", "double"), ("iter", "int64")]
    outputs = re.findall(r'\.Output\("(\w+): (\w+)"\)', grad.split(".SetShapeFn")[0])
    assert outputs == [("grad_m", "double")]
    # grad_m is shaped like m, input 4 of the gradient op.
    assert "ctx->set_output(0, ctx->input(4));" in cc
    assert "JuliaKernel(ctx, \"sinkhorn_knopp_grad\")" in cc


def test_no_gradient_op_without_float_arguments():
    cc = codegen.kernel_source(_spec("Tokenize"))
    assert "TokenizeGrad" not in cc
    assert "It has no gradient op" in cc


def test_attrs_map_to_tf_attrs():
    cc = codegen.kernel_source(_spec("TwoLayer"))
    assert '.Attr("alpha: float = 0.5")' in cc      # TF's float attrs are 32-bit...
    assert '.Attr("alpha_f64bits: int = 4602678819172646912")' in cc  # ...the double's bits beside it
    assert 'OP_REQUIRES_OK(ctx, DoubleAttr(ctx, "alpha", "alpha_f64bits", &alpha_));' in cc
    assert "frame->Attr(alpha_, tfjl::DType::Float64);" in cc  # ...Julia gets the Float64
    assert '.Attr("k: int >= 0 = 2")' in cc         # sizes a dimension: never negative
    assert '.Attr("relu: bool = true")' in cc
    assert '.Attr("mode: string = \\"fast\\"")' in cc


def test_dims_in_shape_function_and_kernel():
    cc = codegen.kernel_source(_spec("TwoLayer"))
    assert "TF_RETURN_IF_ERROR(ctx->Merge(n, ctx->Dim(w1, 1), &n));" in cc
    assert "if (w1.dim_size(1) != n) {" in cc
    assert "TwoLayer: input 'w1' must have shape (h,n) with n = \", n, \" (from input 'x')" in cc
    # int64 with overflow detected; the parameters are the dimensions' names
    assert ("absl::StatusOr<int64_t> DimY_0(int64_t m, int64_t n) {\n"
            "  return SizeOf(Size(m) * Size(n), \"TwoLayer: output 'y' dimension 0 is m*n\", "
            "{{\"m\", m}, {\"n\", n}});") in cc
    assert "SizeOf(FloorDiv(Size(h) + 1, 2), " in cc
    assert "TF_ASSIGN_OR_RETURN(const int64_t y_0, DimY_0(m, n));" in cc
    cc = codegen.kernel_source(_spec("ZeroOutRow"))
    assert "TF_RETURN_IF_ERROR(HasSize(ctx, ctx->Dim(indices, 1), 2));" in cc
    assert "ctx->set_output(0, ctx->MakeShape({ctx->UnknownDim(), 2}));" in cc
    assert "frame->DynamicOutput(tfjl::DType::Int64, {-1, 2}, \"oindices\");" in cc


def test_free_dimension_shared_by_dynamic_outputs():
    spec = parse("Split\ndouble x(?)\ndouble a(j) -> output\ndouble b(j, 2) -> output\n")
    cc = codegen.kernel_source(spec)
    assert "DimensionHandle j = ctx->UnknownDim();" in cc
    assert "ctx->set_output(1, ctx->MakeShape({j, 2}));" in cc
    assert "if (args[1].result_dims[0] != args[0].result_dims[0]) {" in cc


def test_the_stub_documents_dynamic_outputs_as_assigned_and_as_arrays_to_the_gradient():
    """The forward function assigns a dynamic output (a Ref); the gradient
    function gets TensorFlow's tensor of that output, an array like any input."""
    stub = codegen.julia_stub(_spec("SinkhornKnopp"))
    assert ("- `p`     output: Ref: assign a Float64 array of size (?, ?): `p[] = A` (the output takes A's size, "
            "so there is nothing to write in place)") in stub
    assert "- `p`       forward output: Float64 matrix of size (?, ?), read-only\n" in stub
    assert "forward output: Ref" not in stub


def test_no_blank_line_runs():
    for case in CASES:
        cc = codegen.kernel_source(_spec(case))
        assert "\n\n\n" not in cc
        assert not re.search(r"\) \{\n\n", cc)  # no blank line opening a function body
        assert cc.endswith("}  // namespace tensorflow\n")


# ------------------------------------------------------------------ Julia

JULIA = shutil.which("julia")
needs_julia = pytest.mark.skipif(JULIA is None, reason="julia executable not on PATH")


@needs_julia
def test_julia_files_parse_and_scaffold_runs(tmp_path):
    init("Twice", tmp_path)
    stub = tmp_path / "two_layer.jl"
    stub.write_text(codegen.julia_stub(_spec("TwoLayer")))
    script = f"""
        include({json.dumps(str(tmp_path / 'twice.jl'))})
        x = [1.0, -2.0, 3.5]
        y = zeros(3)
        twice(y, x)
        @assert y == 2 .* x
        gx = zeros(3)
        twice_grad(gx, [1.0, 1.0, 0.5], y, x)
        @assert gx == [2.0, 2.0, 1.0]
        include({json.dumps(str(stub))})
        @assert isdefined(Main, Symbol("two_layer!")) && isdefined(Main, Symbol("two_layer_back!"))
        try
            two_layer!(zeros(2), zeros(Float32, 2, 1), zeros(1), zeros(1, 1), zeros(1), zeros(2, 1), zeros(2),
                       0.5, 2, true, "fast")
            error("the skeleton should stop")
        catch e
            @assert occursin("compute the outputs of TwoLayer", sprint(showerror, e))
        end
        print("ok")
    """
    proc = subprocess.run([JULIA, "--startup-file=no", "-e", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok"


def test_init_refuses_to_overwrite(tmp_path):
    (tmp_path / "custom_op.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not overwriting .*custom_op.txt"):
        init("Twice", tmp_path)
    assert (tmp_path / "custom_op.txt").read_text() == "keep me"
    assert not (tmp_path / "twice.jl").exists()


def test_init_rejects_bad_name_before_writing(tmp_path):
    with pytest.raises(ValueError, match="is not CamelCase"):
        init("twice", tmp_path / "op")
    assert not (tmp_path / "op").exists()


def _generation_seconds(spec_text: str) -> float:
    """CPU seconds to parse a spec and generate every file a build writes."""
    started = time.process_time()
    spec = parse(spec_text, "/ops/Many/custom_op.txt")
    codegen.kernel_source(spec)
    codegen.cmake_lists(spec)
    codegen.entries_source(spec)
    codegen.julia_stub(spec)
    codegen.gradtest_script(spec)
    return time.process_time() - started


def test_generation_is_linear_in_the_inputs_as_in_the_outputs():
    """Issue #31: 10,000 inputs took 100 s to generate against 2 s for 10,000
    outputs (the gradient op looked each input's position up with
    tuple.index, comparing Args field by field).  Inputs and outputs cost
    about the same per argument now; a ratio, so a slow machine passes too."""
    n = 10_000
    inputs = "Many\n" + "".join(f"double x{i}(n)\n" for i in range(n)) + "double y(n) -> output\n"
    outputs = "Many\ndouble x(n)\n" + "".join(f"double y{i}(n) -> output\n" for i in range(n))
    many_inputs = _generation_seconds(inputs)
    many_outputs = _generation_seconds(outputs)
    assert many_inputs < 3 * many_outputs, (many_inputs, many_outputs)
