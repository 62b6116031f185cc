"""The README's and the documentation's examples run as written, and the
README stays a front page: at most 200 lines, its Performance rows those of
docs/performance.md.

Each block is found on its page by a string only it holds
(support.docs.block); tests/project/test_docs.py checks that every block of
every page is run here or elsewhere, or says why it cannot be."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from bridge.summary.records import unframe
from support.docs import block, text

FIRST_OP = "docs/getting-started/first-op.md"
README_LINES = 200


def _run(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _tfbridge(args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bridge.cli", *args.split()], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_readme_fits_on_two_screens():
    lines = text("README.md").splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines: at most {README_LINES}; " \
                                       "move the text into a page of docs/ and link it"


def test_readme_example_builds_the_op_and_checks_its_gradient(tmp_path):
    """The README's example: a Julia function as an op, run, and its gradient checked (PASS)."""
    out = _run(block("README.md", "python", "bridge.gradcheck(sinc"), tmp_path)
    values, verdict = out.strip().splitlines()
    assert values == "[0.95885108 0.84147098 0.45464871]", out
    assert verdict == "PASS", out
    assert (tmp_path / "ops" / "sinc" / "custom_op.txt").is_file()


def test_readme_performance_rows_are_the_performance_pages():
    """The README's headline rows are rows of docs/performance.md, word for word (the page is the source)."""
    readme_rows = [line for line in text("README.md").splitlines() if line.startswith("| `bench_")]
    page_rows = set(text("docs/performance.md").splitlines())
    assert len(readme_rows) >= 5
    for row in readme_rows:
        assert row in page_rows, f"README.md's row is not in docs/performance.md: {row[:100]}..."


def test_first_op_walkthrough_runs_end_to_end(tmp_path):
    """"Your first op, step by step": scaffold, stub, spec, Julia, build and call, gradtest, redefine;
    then, in the same Julia, the interruptible loop of docs/internals/interrupts.md. The op's gradient comes
    from ForwardDiff (@gradient forwarddiff), which the depot `make test` names (TFBRIDGE_JULIA_DEPOT) provides."""
    scaffold = block(FIRST_OP, "sh", "customop init Sinc")
    for line in scaffold.splitlines():
        command = line.split("#")[0].strip()
        assert command.startswith("tfbridge "), line
        proc = _tfbridge(command[len("tfbridge "):], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "function sinc(y, x)" in proc.stdout and "function sinc_grad(grad_x, grad_y, y, x)" in proc.stdout
    folder = tmp_path / "ops" / "sinc"
    spec = block(FIRST_OP, "", "Sinc\n")
    assert spec.splitlines()[-1] == "@gradient forwarddiff", spec   # the quickest path: no backward function
    (folder / "custom_op.txt").write_text(spec)
    (folder / "sinc.jl").write_text(block(FIRST_OP, "julia", "sinc(y, x) = (y .= sin.(x) ./ x; nothing)"))
    solver = block("docs/internals/interrupts.md", "julia", "function my_solver!")
    interrupts = (f"\nbridge.julia.eval({solver!r})\n"
                  "bridge.julia.eval('step!(u) = (u .*= 2; nothing)')\n"
                  "print(bridge.julia.eval('u = zeros(2); my_solver!(u, [1.0, 3.0], fill(3)); u').tolist())\n")
    out = _run(block(FIRST_OP, "python", "customop.load") + block(FIRST_OP, "python", "bridge.julia.eval(")
               + interrupts, tmp_path)
    assert "gradcheck PASS" in out
    redefined, solved = out.rstrip().splitlines()[-2:]
    assert redefined == "[1.95885108]", out
    assert solved == "[8.0, 24.0]", out
    gradtest = block(FIRST_OP, "sh", "tfbridge gradtest ops/sinc").split("#")[0].strip()
    proc = _tfbridge(gradtest[len("tfbridge "):], tmp_path)
    assert proc.returncode == 0 and "PASS" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert (folder / "gradcheck.png").is_file()


def test_first_op_with_its_backward_function_written_by_hand(tmp_path):
    """The same op with the page's hand-written sinc_grad in place of the @gradient line."""
    folder = tmp_path / "ops" / "sinc"
    folder.mkdir(parents=True)
    spec = block(FIRST_OP, "", "Sinc\n")
    (folder / "custom_op.txt").write_text(spec.replace("@gradient forwarddiff\n", ""))
    (folder / "sinc.jl").write_text(block(FIRST_OP, "julia", "sinc(y, x) = (y .= sin.(x) ./ x; nothing)")
                                    + block(FIRST_OP, "julia", "sinc_grad"))
    out = _run(block(FIRST_OP, "python", "customop.load"), tmp_path)
    assert "gradcheck PASS" in out


def test_fortran_op_scaffold_commands(tmp_path):
    """"Fortran ops": the scaffold and the stub it prints (no build)."""
    for line in block("docs/guides/fortran-ops.md", "sh", "customop init Scale ops/scale --fortran").splitlines():
        command = line.split("#")[0].strip()
        proc = _tfbridge(command[len("tfbridge "):], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "subroutine scale(" in proc.stdout and "subroutine scale_grad(" in proc.stdout, proc.stdout
    assert (tmp_path / "ops" / "scale" / "scale.f90").is_file()


def test_graph_building_example(tmp_path):
    code = block("docs/guides/graphs-and-gradients.md", "python", "grads = bridge.gradients") + (
        "\nwith bridge.Session(g) as s:\n"
        "    s.run(init)\n"
        "    gx, gw = s.run(grads, {x: np.ones((2, 3), np.float32)})\n"
        "print(y.name, gx.tolist(), gw.tolist())\n")
    out = _run(code, tmp_path)
    assert out.startswith("layer/Relu:0")
    assert "[[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]" in out


def test_training_example(tmp_path):
    out = _run(block("docs/guides/training.md", "python", "ScipyOptimizer"), tmp_path)
    adam_first, adam_last, lbfgs = re.match(r"Adam (\S+) -> (\S+), L-BFGS-B -> (\S+), saved ", out).groups()
    assert float(adam_last) < float(adam_first) / 10
    assert float(lbfgs) < float(adam_last)
    assert (tmp_path / "model.ckpt-300.index").is_file()
    assert (tmp_path / "exported" / "saved_model.pb").is_file()


def test_gradcheck_float32_and_order_2_example(tmp_path):
    """"Testing gradients": float32 promoted, float32 itself, a Hessian."""
    out = _run(block("docs/guides/julia-ops.md", "python", "bridge.gradcheck(ops.softplus, x0)"), tmp_path)
    assert out.split() == ["PASS", "PASS", "PASS"], out


# The files "Running a predefined graph" reads, made with the bridge: mlp.pb, a
# GraphDef whose tensors x:0 and probs:0 the example names, and export_dir, a
# SavedModel with the "predict" signature it calls.
_PREDEFINED_FILES = """
import numpy as np
import bridge
g = bridge.Graph()
with g.as_default():
    x = bridge.placeholder(bridge.float32, [None, 4], name="x")
    w = bridge.Variable(np.full((4, 3), 0.5, np.float32), name="w")
    probs = bridge.ops.softmax(bridge.ops.mat_mul(x, w.value()) + [0.0, 1.0, 2.0], name="probs")
    init = bridge.global_variables_initializer()
with bridge.Session(g) as sess:
    sess.run(init)
    bridge.saved_model.save(sess, "export_dir", {"predict": ({"x": x}, {"probs": probs})})
frozen = bridge.Graph()
with frozen.as_default():
    x = bridge.placeholder(bridge.float32, [None, 4], name="x")
    bridge.ops.softmax(bridge.ops.mat_mul(x, np.full((4, 3), 0.5, np.float32)) + [0.0, 1.0, 2.0], name="probs")
open("mlp.pb", "wb").write(frozen.as_graph_def())
"""


def test_predefined_graph_example(tmp_path):
    """"Running a predefined graph": a GraphDef imported and run, a SavedModel's signature called."""
    _run(_PREDEFINED_FILES, tmp_path)
    check = ("\nimport json\n"
             "with bridge.Session(g) as s:\n"
             "    by_graph = s.run(probs, {x: np.ones((2, 4), np.float32)})\n"
             "by_signature = model.signatures['predict'](x=np.ones((1, 4), np.float32))['probs']\n"
             "print('CHECK', json.dumps([by_graph.tolist(), by_signature.tolist()]))\n")
    out = _run(block("docs/guides/predefined-graphs.md", "python", "import_graph_def") + check, tmp_path)
    printed, check_line = out.rsplit("CHECK ", 1)
    by_graph, by_signature = json.loads(check_line)
    row = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()  # x = ones: every logit is 2 + its bias
    np.testing.assert_allclose(by_graph, [row, row], rtol=1e-6)
    np.testing.assert_allclose(by_signature, [row], rtol=1e-6)
    assert printed.count("[[") == 2 and "'probs'" in printed, printed  # the example's own two prints


def test_tensorboard_summary_example(tmp_path):
    """TensorBoard's summaries: the example writes an experiment and a run that the bridge's reader sees
    (its folder, /tmp/bridge_tb in the text, is the test's own here)."""
    logdir = tmp_path / "bridge_tb"
    code = block("docs/guides/tensorboard.md", "python", "summary.FileWriter(").replace("/tmp/bridge_tb", str(logdir))
    assert str(logdir) in code
    _run(code, tmp_path)
    root_events = list(logdir.glob("events.out.tfevents.*"))
    run_events = list((logdir / "lr=0.1").glob("events.out.tfevents.*"))
    assert len(root_events) == 1 and len(run_events) == 1
    records = unframe(run_events[0].read_bytes())
    # the file version, the graph, the hparams, 3 steps of (merged summaries, a Python scalar), the session's end
    assert len(records) == 1 + 1 + 1 + 3 * 2 + 1, len(records)
    assert b"python/value" in records[-2] and b"learning_rate" in records[2]
