"""`tfbridge gradtest DIR`: the convergence test run on a custom op from its folder."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bridge import customop
from support import REPO
from support.build import op_folder
from support.cli import tfbridge


def _gradtest(folder, *extra):
    return tfbridge("gradtest", str(folder), *extra, timeout=600)


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gradtest") / "jl_square"
    customop.init("JlSquare", folder)
    # A nonlinear body, so the test has a real slope to measure: y = x.^2.
    (folder / "jl_square.jl").write_text(
        "jl_square(y, x) = (y .= x .^ 2; nothing)\n"
        "jl_square_grad(grad_x, grad_y, y, x) = (grad_x .= 2 .* x .* grad_y; nothing)\n")
    return folder


def test_correct_gradient_passes_and_writes_the_plot(scaffold, tmp_path):
    plot = tmp_path / "conv.png"
    proc = _gradtest(scaffold, "--plot", str(plot))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "PASS" in proc.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wrong_gradient_fails_with_slope_one(tmp_path):
    folder = tmp_path / "bad"
    customop.init("BadSquare", folder)
    (folder / "bad_square.jl").write_text(
        "bad_square(y, x) = (y .= x .^ 2; nothing)\n"
        "bad_square_grad(grad_x, grad_y, y, x) = (grad_x .= 2.5 .* x .* grad_y; nothing)\n")
    proc = _gradtest(folder)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "FAIL" in proc.stdout
    assert (folder / "gradcheck.png").is_file()  # the default plot path is the op's folder


def test_missing_folder_is_a_clear_error(tmp_path):
    proc = _gradtest(tmp_path / "nowhere")
    assert proc.returncode == 1
    assert "custom_op.txt" in proc.stderr


def test_an_op_name_tensorflow_already_has_is_refused(tmp_path):
    folder = tmp_path / "square"
    customop.init("Square", folder)
    with pytest.raises(customop.SpecError, match="TensorFlow already has an op named Square"):
        customop.load(folder)


def test_an_op_without_float_arguments_has_no_gradient_to_test(tmp_path):
    folder = tmp_path / "count"
    folder.mkdir()
    (folder / "custom_op.txt").write_text("JlCountPositive\nint64 x(n)\nint64 c() -> output\n")
    (folder / "jl_count_positive.jl").write_text("jl_count_positive(c, x) = (c[] = count(>(0), x); nothing)\n")
    proc = _gradtest(folder)
    assert proc.returncode == 2  # the test cannot run, as docs/guides/julia-ops.md says: not a FAIL
    assert "no gradient to test" in proc.stderr


def test_a_dynamic_output_op_without_gradient_cannot_be_tested(tmp_path):
    folder = tmp_path / "positives"
    folder.mkdir()
    (folder / "custom_op.txt").write_text("JlPositives\nint64 x(n)\nint64 p(?) -> output\n")
    (folder / "jl_positives.jl").write_text("jl_positives(p, x) = (p[] = filter(>(0), x); nothing)\n")
    proc = _gradtest(folder)
    assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
    assert "JlPositives has no gradient to test" in proc.stderr and "Traceback" not in proc.stderr


# --- what the test cannot see is never a pass ----------------------------------------------

# mode 0: sqrt, NaN for negative x (the random samples have some); 1: x.^2 with a NaN
# gradient; 2: outputs that do not depend on x.
ODD_SPEC = "JlOdd\ndouble x(n)\n@attr int64 mode = 0\ndouble y(n) -> output\n"
ODD_JL = """
function jl_odd(y, x, mode)
    mode == 0 && (y .= ifelse.(x .< 0, NaN, sqrt.(abs.(x))))
    mode == 1 && (y .= x .^ 2)
    mode == 2 && (y .= 1.0)
    return nothing
end
function jl_odd_grad(gx, gy, y, x, mode)
    mode == 0 && (gx .= gy ./ (2 .* y))
    mode == 1 && (gx .= NaN .* gy)
    return nothing
end
"""

# A 3-point stencil on the interior, the boundary values copied: linear, so its
# gradient test is at roundoff; the gradient forgets the neighbours. At n = 2
# there is no interior: the op is the identity and the test saw nothing of it.
STENCIL_SPEC = "JlStencil\ndouble x(n)\ndouble y(n) -> output\n"
STENCIL_JL = """
function jl_stencil(y, x)
    y .= x
    for i in 2:length(x)-1
        y[i] = x[i-1] - 2x[i] + x[i+1]
    end
    return nothing
end
function jl_stencil_grad(gx, gy, y, x)
    gx .= gy
    for i in 2:length(x)-1
        gx[i] = -2gy[i]  # wrong: misses gy[i-1] + gy[i+1]
    end
    return nothing
end
"""


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    return op_folder(tmp_path_factory.mktemp("odd"), "JlOdd", ODD_SPEC, ODD_JL)


def test_nan_outputs_cannot_be_tested_and_are_named(odd, tmp_path):
    plot = tmp_path / "nan.png"
    proc = _gradtest(odd, "--plot", str(plot))
    out = _no_traceback(proc)
    assert proc.returncode == 2, out
    assert "JlOdd: gradcheck CANNOT TEST" in out and "output y is not finite" in out
    assert "PASS" not in out and "slope nan" not in out and "linear" not in out
    assert "--input NAME=VALUE or --inputs FILE" in out
    assert not plot.exists() and "convergence plot skipped" in out
    proc = _gradtest(odd, "--input", "x=[0.5, 1.0, 1.5, 2.0, 2.5]")
    out = _no_traceback(proc)
    assert proc.returncode == 0 and "JlOdd: gradcheck PASS" in out, out


def test_a_nan_gradient_fails_and_names_the_input(odd):
    proc = _gradtest(odd, "--input", "mode=1")
    out = _no_traceback(proc)
    assert proc.returncode == 1, out
    assert "JlOdd: gradcheck FAIL" in out and "the gradient with respect to x is not finite" in out


def test_outputs_that_ignore_the_inputs_cannot_be_tested(odd):
    proc = _gradtest(odd, "--input", "mode=2")
    out = _no_traceback(proc)
    assert proc.returncode == 2, out
    assert "JlOdd: gradcheck CONSTANT" in out and "f does not change along v" in out and "PASS" not in out


def test_the_default_samples_reach_a_stencils_interior(tmp_path):
    folder = op_folder(tmp_path, "JlStencil", STENCIL_SPEC, STENCIL_JL)
    proc = _gradtest(folder)
    out = _no_traceback(proc)
    assert proc.returncode == 1, out
    assert "JlStencil: gradcheck FAIL" in out and "the gradient is wrong" in out
    # Two points have no interior: the op is the identity there, reported as linear, not as a PASS.
    proc = _gradtest(folder, "--input", "x=[1.0, 2.0]")
    out = _no_traceback(proc)
    assert proc.returncode == 0, out
    assert "JlStencil: gradcheck LINEAR" in out and "f is linear along v" in out and "PASS" not in out


# --- inputs the samples cannot stand in for ---------------------------------------------

# Scales sum(x.^2) by k, which must be at least 10: the sample integers (0 to 2) never are.
SCALED_SPEC = "JlScaled\ndouble x(n)\nint64 k()\ndouble y() -> output\n"
SCALED_JL = """
function jl_scaled(y, x, k)
    k[] >= 10 || throw(ArgumentError("k must be at least 10, got $(k[])"))
    y[] = k[] * sum(x .^ 2)
    return nothing
end
jl_scaled_grad(gx, gy, y, x, k) = (gx .= 2 .* k[] .* x .* gy[]; nothing)
"""

# Applies the function a string names: the sample string 'a' names none.
NAMED_SPEC = "JlNamed\ndouble x(n)\nstring fn()\ndouble y(n) -> output\n"
NAMED_JL = """
pick(fn) = fn == "sin" ? (sin, cos) : fn == "exp" ? (exp, exp) : throw(ArgumentError("no function $fn"))
jl_named(y, x, fn) = (y .= first(pick(fn)).(x); nothing)
jl_named_grad(gx, gy, y, x, fn) = (gx .= last(pick(fn)).(x) .* gy; nothing)
"""


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    return op_folder(tmp_path_factory.mktemp("given"), "JlScaled", SCALED_SPEC, SCALED_JL)


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    return op_folder(tmp_path_factory.mktemp("given"), "JlNamed", NAMED_SPEC, NAMED_JL)


def _no_traceback(proc) -> str:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    return out


def test_invalid_sample_inputs_end_in_a_message_saying_how_to_give_inputs(scaled):
    proc = _gradtest(scaled)
    out = _no_traceback(proc)
    assert proc.returncode == 2, out
    assert "gradtest JlScaled: running the op failed" in out and "k must be at least 10" in out
    assert "--input NAME=VALUE or --inputs FILE" in out


def test_an_integer_given_on_the_command_line(scaled):
    proc = _gradtest(scaled, "--input", "k=12")
    out = _no_traceback(proc)
    assert proc.returncode == 0 and "JlScaled: gradcheck PASS" in out, out


def test_inputs_from_an_npz_file(scaled, tmp_path):
    path = tmp_path / "inputs.npz"
    np.savez(path, x=np.linspace(-1, 1, 5), k=np.int64(11))
    proc = _gradtest(scaled, "--inputs", str(path))
    out = _no_traceback(proc)
    assert proc.returncode == 0 and "PASS" in out, out


def test_inputs_from_a_python_file_and_the_command_line_wins(scaled, tmp_path):
    path = tmp_path / "inputs.py"
    path.write_text("import numpy as np\nx = np.arange(1.0, 4.0)\nk = 3\nunrelated = 'ignored'\n")
    proc = _gradtest(scaled, "--inputs", str(path))
    assert proc.returncode == 2 and "k must be at least 10, got 3" in _no_traceback(proc)
    proc = _gradtest(scaled, "--inputs", str(path), "--input", "k=30")
    out = _no_traceback(proc)
    assert proc.returncode == 0 and "PASS" in out, out


def test_a_string_input_given_on_the_command_line(named):
    proc = _gradtest(named)
    assert proc.returncode == 2 and "no function a" in _no_traceback(proc)
    for value in ("sin", "'exp'"):  # bare text or a quoted literal
        proc = _gradtest(named, "--input", f"fn={value}")
        out = _no_traceback(proc)
        assert proc.returncode == 0 and "JlNamed: gradcheck PASS" in out, out


@pytest.mark.parametrize("argument, message", [
    (["--input", "q=1"], "JlScaled has no input or attribute of that name (inputs: x, k)"),
    (["--input", "k"], "expected NAME=VALUE"),
    (["--input", "k=ten"], "not a Python literal"),
    (["--input", "x=[[1.0, 2.0]]"], "input 'x' of JlScaled has rank 1"),
    (["--input", "x=['a', 'b']"], "input 'x' of JlScaled is double: cannot use"),
    (["--inputs", "missing.npz"], "--inputs missing.npz: no such file"),
])
def test_bad_given_inputs_are_named(scaled, argument, message):
    proc = _gradtest(scaled, *argument)
    out = _no_traceback(proc)
    assert proc.returncode == 2 and message in out, out


def test_without_matplotlib_the_verdict_stands_and_the_plot_is_skipped(scaled, tmp_path):
    """matplotlib made unimportable in the child (a meta-path finder refusing it)."""
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoMatplotlib:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'matplotlib':\n"
        "            raise ImportError('matplotlib is blocked in this test')\n"
        "sys.meta_path.insert(0, _NoMatplotlib())\n")
    import os
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "bridge.cli", "gradtest", str(scaled), "--input", "k=12",
                           "--plot", str(tmp_path / "p.png")], capture_output=True, text=True, timeout=600,
                          env=env)
    out = _no_traceback(proc)
    assert proc.returncode == 0 and "PASS" in out, out
    assert "convergence plot skipped" in out and "matplotlib" in out
    assert not (tmp_path / "p.png").exists()


# --- float32 ops, copied folders, order 2 ---------------------------------------------------

SOFTPLUS32_SPEC = "JlSoftplus32\nfloat x(n)\nfloat y(n) -> output\n"
SOFTPLUS32_JL = """
jl_softplus32(y, x) = (y .= log1p.(exp.(x)); nothing)
jl_softplus32_grad(gx, gy, y, x) = (gx .= gy ./ (1 .+ exp.(-x)); nothing)
"""


@pytest.fixture(scope="module")
def softplus32(tmp_path_factory):
    folder = op_folder(tmp_path_factory.mktemp("float32"), "JlSoftplus32", SOFTPLUS32_SPEC, SOFTPLUS32_JL)
    customop.build(folder)
    return folder


def _python(*args: str) -> subprocess.CompletedProcess:
    """``python ARGS...`` with this checkout's bridge first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, env=env)


def _tested_folder(out: str, op: str) -> str:
    """The op folder gradtest says it tested (its line 'gradtest OP: op folder PATH')."""
    head = f"gradtest {op}: op folder "
    lines = [line[len(head):] for line in out.splitlines() if line.startswith(head)]
    assert len(lines) == 1, out
    return lines[0]


def test_a_float32_op_passes_on_the_default_samples(softplus32):
    """Issue 36: a float32 softplus FAILed ('only one step rose above roundoff'), exit 1."""
    proc = _gradtest(softplus32)
    out = _no_traceback(proc)
    assert proc.returncode == 0, out
    assert "JlSoftplus32: gradcheck PASS" in out
    assert ("evaluated in float32: f does not accept float64 (TypeError: JlSoftplus32: input 'x' must be "
            "float32, but 'x0:0' is float64)") in out
    assert _tested_folder(out, "JlSoftplus32") == str(softplus32.resolve())


def test_a_copied_folder_is_the_one_tested(scaffold, tmp_path):
    """Issue 36: after cp -r and a wrong gradient in the copy, gradtest of the copy tested the
    original (its build, a cache hit, held a gradtest.py naming the original) and said PASS."""
    key = customop.build(scaffold).parent.name
    copy = tmp_path / "jl_square_v2"
    shutil.copytree(scaffold, copy)
    source = (scaffold / "jl_square.jl").read_text()
    (copy / "jl_square.jl").write_text(source.replace("grad_x .= 2 .* x", "grad_x .= 3 .* x"))
    builds = sorted(p.name for p in (scaffold / "build").iterdir() if p.is_dir())
    proc = _gradtest(copy)
    out = _no_traceback(proc)
    assert proc.returncode == 1, out
    assert _tested_folder(out, "JlSquare") == str(copy.resolve())
    assert "JlSquare: gradcheck FAIL: first-order slope 1.0" in out
    # The copy's build was the original's, copied (the key depends on the spec): no rebuild.
    assert sorted(p.name for p in (copy / "build").iterdir() if p.is_dir()) == builds
    # Its gradtest.py, run directly, tests the copy too; the original still passes.
    script = copy / "build" / key / "gradtest.py"
    proc = _python(str(script))
    out = _no_traceback(proc)
    assert proc.returncode == 1 and _tested_folder(out, "JlSquare") == str(copy.resolve()), out
    proc = _gradtest(scaffold)
    assert proc.returncode == 0 and _tested_folder(proc.stdout, "JlSquare") == str(scaffold.resolve())


def test_a_gradtest_script_refuses_a_folder_whose_spec_changed(scaffold, tmp_path):
    key = customop.build(scaffold).parent.name
    copy = tmp_path / "changed"
    shutil.copytree(scaffold, copy)
    spec = copy / "custom_op.txt"
    spec.write_text(spec.read_text() + "# a comment changes the spec's text\n")
    script = copy / "build" / key / "gradtest.py"
    proc = _python(str(script))
    out = _no_traceback(proc)
    assert proc.returncode == 2, out
    assert (f"gradtest JlSquare: {copy.resolve() / 'custom_op.txt'} has changed since this script was "
            f"generated (from {script.parent / 'custom_op.txt'}): run `tfbridge gradtest {copy.resolve()}`") in out


def test_order_2_of_a_julia_op_says_its_gradient_op_has_no_gradient(softplus32):
    proc = _gradtest(softplus32, "--order", "2")
    out = _no_traceback(proc)
    assert proc.returncode == 2, out
    assert "JlSoftplus32: gradcheck CANNOT TEST (order 2)" in out
    assert ("cannot test the Hessian: the gradient of f is not differentiable: No gradient defined for "
            "operation 'gradcheck/gradients/JlSoftplus32_grad/JlSoftplus32Grad' (op type: JlSoftplus32Grad)") in out
    assert "convergence plot skipped: no step was evaluated" in out


# JlNamed's gradient op, JlNamedGrad (inputs gy, y, x, fn), differentiated in Python: d(gx)/d(gy) =
# cos(x) and d(gx)/dx = -sin(x) gy for fn = "sin", or twice that (wrong).
SECOND_ORDER = """
import sys
import numpy as np
import bridge
from bridge import ops
from bridge.grad.gradient_check import gradcheck

named = bridge.customop.load(sys.argv[1]).jl_named
for name, factor in (("Right", 1.0), ("Wrong", 2.0)):
    @bridge.RegisterGradient(f"JlNamedGradGrad{name}")
    def _grad(op, grad, factor=factor):
        gy, _, x, _ = op.inputs
        return [grad * ops.cos(x), None, grad * gy * -ops.sin(x) * factor, None]

x0 = np.array([0.3, -0.7, 1.2, 0.5])
for name in ("Right", "Wrong"):
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder("float64", [4], name="x")
        y = named(x, "sin")
    with g.gradient_override_map({"JlNamedGrad": f"JlNamedGradGrad{name}"}):
        result = gradcheck(y, x0, x=x, order=2)
    print(name, result.verdict, round(result.slope_second, 1))
"""


def test_order_2_of_a_julia_op_whose_gradient_op_has_a_right_and_a_wrong_gradient(named, tmp_path):
    script = tmp_path / "second_order.py"
    script.write_text(SECOND_ORDER)
    proc = _python(str(script), str(named))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-2:] == ["Right PASS 3.0", "Wrong FAIL 2.0"], proc.stdout
