"""Zero-size tensors through Julia ops (issue #31 item 5): the unmodified
``customop init`` template op (``y .= 2 .* x``) failed for a 1-D input of
length 0, forward and gradient, in every mode ("ReadOnlyArray shares memory
... implement Base.unaliascopy": TF's empty buffers share one address, so
broadcasting took the input for an alias of the output).

Here every spec feature with every dimension 0: static sizes, named and
computed dimensions, every numeric dtype at ranks 1-3 (the compiled-entry
path), dynamic outputs and string tensors (the generic path), forward and
gradient, in each scheduling mode (docs/internals/threads.md): TF's caller thread,
TF's pool, a julia_thread session, and TFBRIDGE_JULIA_ASYNC=0 in a child.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import customop
from support.build import load_ops, toolchain_missing
from support import REPO, TESTS


ENTRY_SPEC = """ZeroEntry
double a(n)
float b(n, 0)
int32 c(n, m, k)
int64 d(0)
bool e(n, m)
double ya(n) -> output
float yb(n, 0) -> output
int32 yc(n, m, k) -> output
int64 yd(2*n + 3*m) -> output
bool ye(n, m) -> output
double yf(0, n) -> output
"""
ENTRY_JULIA = """
function zero_entry(ya, yb, yc, yd, ye, yf, a, b, c, d, e)
    ya .= 2 .* a
    yb .= 2 .* b
    yc .= c .+ Int32(1)
    yd .= sum(d) .+ length(yd)
    ye .= .!e
    yf .= 0
    return nothing
end
function zero_entry_grad(grad_a, grad_b, grad_ya, grad_yb, grad_yf, ya, yb, yc, yd, ye, yf, a, b, c, d, e)
    grad_a .+= 2 .* grad_ya
    grad_b .+= 2 .* grad_yb
    return nothing
end
"""

GENERIC_SPEC = """ZeroGeneric
double x(n, m)
string s(n)
string t(?, ?, ?)
double y(n, m) -> output
string u(n) -> output
double p(?, m) -> output
int64 q(?) -> output
bool r(?, ?, ?) -> output
float w(?) -> output
"""
GENERIC_JULIA = """
function zero_generic(y, u, p, q, r, w, x, s, t)
    y .= 2 .* x
    u .= s
    p[] = 2 .* x
    q[] = Int64[length(t) for _ in 1:length(s)]
    r[] = falses(size(t))
    w[] = Float32[]
    return nothing
end
function zero_generic_grad(grad_x, grad_y, grad_p, grad_w, y, u, p, q, r, w, x, s, t)
    grad_x .+= 2 .* grad_y .+ 2 .* grad_p
    return nothing
end
"""


@pytest.fixture(scope="module")
def ops(tmp_path_factory, twice_folder):
    """The template op Twice as `customop init` writes it, and the two ops above."""
    missing = toolchain_missing()
    if missing:
        pytest.skip(missing)
    twice = twice_folder
    (entry_dir, entry), (generic_dir, generic) = load_ops(
        tmp_path_factory, "empty", {"ZeroEntry": (ENTRY_SPEC, ENTRY_JULIA), "ZeroGeneric": (GENERIC_SPEC, GENERIC_JULIA)})
    return {"twice": (twice, customop.load(twice)), "entry": (entry_dir, entry), "generic": (generic_dir, generic)}


def check_twice(module, config) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None], name="x")
        y = module.twice(x)
        (gx,) = bridge.gradients(y, [x])
    with bridge.Session(g, config=config) as sess:
        for n in (0, 3, 0):
            out, grad = sess.run([y, gx], {x: np.arange(float(n))})
            np.testing.assert_array_equal(out, 2 * np.arange(float(n)))
            np.testing.assert_array_equal(grad, np.full(n, 2.0))


def check_entry(module, config) -> None:
    g = bridge.Graph()
    with g.as_default():
        a = bridge.placeholder(bridge.float64, [None], name="a")
        b = bridge.placeholder(bridge.float32, [None, 0], name="b")
        c = bridge.placeholder(bridge.int32, [None, None, None], name="c")
        d = bridge.constant(np.zeros(0, np.int64), name="d")
        e = bridge.placeholder(bridge.bool, [None, None], name="e")
        outs = module.zero_entry(a, b, c, d, e)
        ga, gb = bridge.gradients([outs[0], outs[1]], [a, b])
    with bridge.Session(g, config=config) as sess:
        for shape in ((0, 0, 0), (0, 2, 0), (0, 0, 3)):
            m = shape[1]
            got = sess.run(list(outs) + [ga, gb], {a: np.zeros(0), b: np.zeros((0, 0), np.float32),
                                                   c: np.zeros(shape, np.int32), e: np.zeros((0, m), bool)})
            expected = [((0,), np.float64), ((0, 0), np.float32), (shape, np.int32), ((3 * m,), np.int64),
                        ((0, m), np.bool_), ((0, 0), np.float64), ((0,), np.float64), ((0, 0), np.float32)]
            assert [(v.shape, v.dtype) for v in got] == [(s, np.dtype(t)) for s, t in expected], got
            np.testing.assert_array_equal(got[3], np.full(3 * m, 3 * m))


def check_generic(module, config) -> None:
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float64, [None, None], name="x")
        s = bridge.placeholder(bridge.string, [None], name="s")
        t = bridge.placeholder(bridge.string, [None, None, None], name="t")
        outs = module.zero_generic(x, s, t)
        (gx,) = bridge.gradients([outs[0], outs[2], outs[5]], [x])
    with bridge.Session(g, config=config) as sess:
        for m, tshape in ((0, (0, 0, 0)), (4, (2, 0, 3))):
            got = sess.run(list(outs) + [gx], {x: np.zeros((0, m)), s: np.zeros(0, object),
                                               t: np.zeros(tshape, object)})
            shapes = [v.shape for v in got]
            assert shapes == [(0, m), (0,), (0, m), (0,), tshape, (0,), (0, m)], shapes
            assert [v.dtype for v in got[2:6]] == [np.float64, np.int64, np.bool_, np.float32]


CHECKS = {"twice": check_twice, "entry": check_entry, "generic": check_generic}
CONFIGS = {"caller-thread": None, "tf-pool": {"inline_small_graphs": 0}, "julia-thread": {"julia_thread": True}}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("op", sorted(CHECKS))
def test_zero_size_tensors_forward_and_gradient(ops, op, config):
    calls = bridge.julia.entry_calls()
    CHECKS[op](ops[op][1], CONFIGS[config])
    if op == "entry":  # the compiled entry was the path taken
        assert bridge.julia.entry_calls() > calls


CHILD = """
import importlib.util, sys
sys.path.insert(0, {tests!r})
from bridge import customop
spec = importlib.util.spec_from_file_location("this_test", {this!r})  # this module's checks, in the child
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
for op, folder in {folders!r}.items():
    module = customop.load(folder)
    for config in t.CONFIGS.values():
        t.CHECKS[op](module, config)
print("ok")
"""


def test_zero_size_tensors_with_synchronous_kernels(ops):
    """TFBRIDGE_JULIA_ASYNC=0: a pool thread waits for its Julia call (the op folders are built: no build here)."""
    folders = {op: str(folder) for op, (folder, _) in ops.items()}
    env = dict(os.environ, PYTHONPATH=str(REPO), TFBRIDGE_JULIA_ASYNC="0")
    code = CHILD.format(tests=str(TESTS), this=__file__, folders=folders)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr[-4000:]
