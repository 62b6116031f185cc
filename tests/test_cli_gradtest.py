"""`tfbridge gradtest DIR`: the convergence test run on a custom op from its folder."""
import subprocess
import sys

import pytest

from bridge import customop

pytest.importorskip("matplotlib", reason="the gradtest plot needs matplotlib (the 'plot' extra)")


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
