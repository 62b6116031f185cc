"""`tfbridge gradtest DIR`: the convergence test run on a custom op from its folder."""
import subprocess
import sys

import numpy as np
import pytest

from bridge import customop
from build_support import op_folder


def _gradtest(folder, *extra):
    return subprocess.run([sys.executable, "-m", "bridge.cli", "gradtest", str(folder), *extra],
                          capture_output=True, text=True, timeout=600)


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
    assert proc.returncode == 1
    assert "no gradient to test" in proc.stderr


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
