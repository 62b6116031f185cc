"""The README's examples run as written."""
import re
import subprocess
import sys
from pathlib import Path
from support import REPO

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, re.S)


def _block(lang: str, containing: str) -> str:
    matches = [code for kind, code in BLOCKS if kind == lang and containing in code]
    assert len(matches) == 1, f"expected one {lang} block with {containing!r} in README.md"
    return matches[0]


def _run(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _tfbridge(args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bridge.cli", *args.split()], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_first_op_walkthrough_runs_end_to_end(tmp_path):
    """"Your first op, step by step": scaffold, stub, spec, Julia, build and call, gradtest, redefine.
    Its gradient comes from ForwardDiff (@gradient forwarddiff), which the depot `make test` names
    (TFBRIDGE_JULIA_DEPOT) provides."""
    scaffold = _block("sh", "customop init Sinc")
    for line in scaffold.splitlines():
        command = line.split("#")[0].strip()
        assert command.startswith("tfbridge "), line
        proc = _tfbridge(command[len("tfbridge "):], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "function sinc(y, x)" in proc.stdout and "function sinc_grad(grad_x, grad_y, y, x)" in proc.stdout
    folder = tmp_path / "ops" / "sinc"
    spec = next(code for kind, code in BLOCKS if kind == "" and code.startswith("Sinc\n"))
    (folder / "custom_op.txt").write_text(spec)
    (folder / "sinc.jl").write_text(_block("julia", "sinc(y, x) = (y .= sin.(x) ./ x; nothing)"))
    assert "@gradient forwarddiff" in spec   # the quickest path: no backward function
    out = _run(_block("python", "customop.load") + _block("python", "bridge.julia.eval("), tmp_path)
    assert "gradcheck PASS" in out
    assert out.rstrip().endswith("[1.95885108]"), out
    gradtest = _block("sh", "tfbridge gradtest ops/sinc").split("#")[0].strip()
    proc = _tfbridge(gradtest[len("tfbridge "):], tmp_path)
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert (folder / "gradcheck.png").is_file()


def test_first_op_with_its_backward_function_written_by_hand(tmp_path):
    """The same op with the README's hand-written sinc_grad in place of the @gradient line."""
    folder = tmp_path / "ops" / "sinc"
    folder.mkdir(parents=True)
    spec = next(code for kind, code in BLOCKS if kind == "" and code.startswith("Sinc\n"))
    (folder / "custom_op.txt").write_text(spec.replace("@gradient forwarddiff\n", ""))
    (folder / "sinc.jl").write_text(_block("julia", "sinc(y, x) = (y .= sin.(x) ./ x; nothing)")
                                    + _block("julia", "sinc_grad"))
    out = _run(_block("python", "customop.load"), tmp_path)
    assert "gradcheck PASS" in out


def test_graph_building_example(tmp_path):
    code = _block("python", "grads = bridge.gradients") + (
        "\nwith bridge.Session(g) as s:\n"
        "    s.run(init)\n"
        "    gx, gw = s.run(grads, {x: np.ones((2, 3), np.float32)})\n"
        "print(y.name, gx.tolist(), gw.tolist())\n")
    out = _run(code, tmp_path)
    assert out.startswith("layer/Relu:0")
    assert "[[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]" in out


def test_training_example(tmp_path):
    out = _run(_block("python", "ScipyOptimizer"), tmp_path)
    adam_first, adam_last, lbfgs = re.match(r"Adam (\S+) -> (\S+), L-BFGS-B -> (\S+), saved ", out).groups()
    assert float(adam_last) < float(adam_first) / 10
    assert float(lbfgs) < float(adam_last)
    assert (tmp_path / "model.ckpt-300.index").is_file()
    assert (tmp_path / "exported" / "saved_model.pb").is_file()


def test_gradcheck_float32_and_order_2_example(tmp_path):
    """"Testing gradients": float32 promoted, float32 itself, a Hessian."""
    out = _run(_block("python", "bridge.gradcheck(ops.softplus, x0)"), tmp_path)
    assert out.split() == ["PASS", "PASS", "PASS"], out
