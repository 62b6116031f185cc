"""bridge.train's optimizers, learning-rate schedules and gradient clipping
against stock TensorFlow's tf.compat.v1.train (issue #17).

The same float64 MLP (8 inputs, 16 tanh units, 1 output, 64 samples, raw
ops), with the same initial values and data, is trained for 100 steps here
and by the oracle (tests/oracle/train_steps.py, one call for every case):
the loss sequences must agree to 1e-10 relative, and so must every variable
at the end, slots included, looked up by TF's names.

The ``emb_*`` cases put an embedding table in front of the MLP, read by
``nn.embedding_lookup`` and ``gather`` (rows repeated, rows never read): its
gradient is IndexedSlices on both sides, applied by each optimizer's sparse
path (``ResourceScatterAdd``, ``ResourceSparseApply*``, Adam's scatter
fallback), or dense when a dense read of the table joins in.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import bridge
from bridge import ops

STEPS = 100
RNG = np.random.default_rng(1717)
_X = RNG.standard_normal((64, 8))
DATA = {
    "x": _X,
    "y": np.sin(_X @ RNG.standard_normal((8, 1))) + 0.1 * RNG.standard_normal((64, 1)),
    "w1": RNG.standard_normal((8, 16)) / np.sqrt(8.0),
    "b1": 0.1 * RNG.standard_normal(16),
    "w2": RNG.standard_normal((16, 1)) / 4.0,
    "b2": np.zeros(1),
}

EXP_DECAY = {"exponential_decay": {"learning_rate": 0.2, "decay_steps": 10, "decay_rate": 0.9}}
STAIRCASE = {"exponential_decay": {"learning_rate": 0.05, "decay_steps": 7, "decay_rate": 0.5,
                                   "staircase": True}}
PIECEWISE = {"piecewise_constant": {"boundaries": [30, 60], "values": [0.02, 0.01, 0.005]}}


def _case(name, optimizer, learning_rate, **extra):
    return {"name": name, "optimizer": optimizer, "learning_rate": learning_rate, "kwargs": {},
            "global_step": False, "clip": None, "scope": None, "dtype": "float64", **extra}


_ERNG = np.random.default_rng(2828)  # its own generator: the MLP's data stay as they were
EMBEDDING = {"table": 0.3 * _ERNG.standard_normal((20, 8)),
             "ids": _ERNG.integers(0, 16, 64).astype(np.int32),       # rows 16-19 never read
             "ids2": _ERNG.integers(8, 16, 64).astype(np.int32), "dense_read": False}


def _emb(name, optimizer, learning_rate, **extra):
    spec = dict(EMBEDDING, **extra.pop("embedding", {}))
    return _case(name, optimizer, learning_rate, embedding=spec, **extra)


CASES = [
    _case("adam", "Adam", 0.01, global_step=True),
    _case("gradient_descent", "GradientDescent", 0.1),
    _case("momentum", "Momentum", 0.05, kwargs={"momentum": 0.9}),
    _case("nesterov", "Momentum", 0.05, kwargs={"momentum": 0.9, "use_nesterov": True}),
    _case("rmsprop", "RMSProp", 0.01),
    _case("rmsprop_momentum", "RMSProp", 0.01, kwargs={"momentum": 0.9}),
    _case("rmsprop_centered", "RMSProp", 0.005, kwargs={"momentum": 0.5, "centered": True, "decay": 0.8}),
    _case("adagrad", "Adagrad", 0.1),
    _case("adam_clip_global_norm", "Adam", 0.05, global_step=True, clip={"global_norm": 0.5}, scope="train",
          kwargs={"beta1": 0.8, "epsilon": 1e-6}),
    _case("gd_clip_norm", "GradientDescent", 0.5, clip={"norm": 0.2}),
    _case("gd_exponential_decay", "GradientDescent", EXP_DECAY, global_step=True),
    _case("momentum_staircase", "Momentum", STAIRCASE, global_step=True, kwargs={"momentum": 0.9}),
    _case("adam_piecewise", "Adam", PIECEWISE, global_step=True),
    _case("adam_float32", "Adam", 0.01, global_step=True, dtype="float32"),
    _emb("emb_gradient_descent", "GradientDescent", 0.1),
    _emb("emb_momentum", "Momentum", 0.05, kwargs={"momentum": 0.9}),
    _emb("emb_nesterov", "Momentum", 0.05, kwargs={"momentum": 0.9, "use_nesterov": True}),
    _emb("emb_adam", "Adam", 0.01, global_step=True),
    _emb("emb_adam_one_lookup", "Adam", 0.02, embedding={"ids2": None}),
    _emb("emb_rmsprop", "RMSProp", 0.01),
    _emb("emb_rmsprop_centered", "RMSProp", 0.005, kwargs={"momentum": 0.5, "centered": True, "decay": 0.8}),
    _emb("emb_adagrad", "Adagrad", 0.1),
    _emb("emb_adam_clip_global_norm", "Adam", 0.05, global_step=True, clip={"global_norm": 0.5},
         scope="train"),
    _emb("emb_gd_clip_norm", "GradientDescent", 0.5, clip={"norm": 0.2}),
    _emb("emb_adam_float32", "Adam", 0.01, global_step=True, dtype="float32"),
    _emb("emb_adam_dense_read", "Adam", 0.01, embedding={"dense_read": True}),
]

CLIP = {
    "tensors": [RNG.standard_normal((3, 4)), None, 5.0 * RNG.standard_normal(5), np.array(0.7)],
    "clip_norm": 1.5,
    "axes_case": (RNG.standard_normal((4, 3)), [1], 0.5),
}

#: error case -> (exception type, start of the message both TF and the bridge give)
ERRORS = {
    "no_variables": ("ValueError", "No variables to optimize."),
    "no_gradients": ("ValueError", "No gradients provided for any variable, check your graph for ops"
                                   " that do not support gradients, between variables "),
    "apply_no_gradients": ("ValueError", "No gradients provided for any variable: ["),
    "apply_empty": ("ValueError", "No variables provided."),
    "int_loss": ("ValueError", "Invalid type "),
    "gate_gradients": ("ValueError", "gate_gradients must be one of: Optimizer.GATE_NONE"),
    "adagrad_initial_accumulator": ("ValueError", "initial_accumulator_value must be positive: 0.0"),
    "piecewise_boundary_dtype": ("ValueError", "Boundaries ("),
    "piecewise_lengths": ("ValueError", "The length of boundaries should be 1 less than the length of values"),
    "piecewise_value_dtypes": ("ValueError", "Values must have elements all with the same dtype ("),
    "global_step_twice": ("ValueError", '"global_step" already exists.'),
}


@pytest.fixture(scope="module")
def tf_answers(oracle):
    return oracle("train_steps", {"data": DATA, "steps": STEPS, "cases": CASES,
                                  "errors": list(ERRORS), "clip_values": CLIP})


# --- the bridge side: the same model, built with bridge.train ----------------

def build_model(dtype):
    d = {k: np.asarray(v, dtype) for k, v in DATA.items()}
    variables = [bridge.Variable(d[n], name=n) for n in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = variables
    x, y = bridge.constant(d["x"]), bridge.constant(d["y"])
    h = ops.tanh(ops.add_v2(ops.mat_mul(x, w1.value()), b1.value()))
    pred = ops.add_v2(ops.mat_mul(h, w2.value()), b2.value())
    return variables, ops.mean(ops.square(ops.sub(pred, y)), [0, 1])


def build_embedding_model(dtype, spec):
    d = {k: np.asarray(v, dtype) for k, v in DATA.items()}
    emb = bridge.Variable(np.asarray(spec["table"], dtype), name="emb")
    variables = [bridge.Variable(d[n], name=n) for n in ("w1", "b1", "w2", "b2")]
    w1, b1, w2, b2 = variables
    x, y = bridge.constant(d["x"]), bridge.constant(d["y"])
    feat = bridge.nn.embedding_lookup(emb, bridge.constant(spec["ids"]))
    if spec["ids2"] is not None:
        feat = ops.mul(feat, bridge.gather(emb, bridge.constant(spec["ids2"])))
    h = ops.tanh(ops.add_v2(ops.mat_mul(ops.add_v2(x, feat), w1.value()), b1.value()))
    pred = ops.add_v2(ops.mat_mul(h, w2.value()), b2.value())
    loss = ops.mean(ops.square(ops.sub(pred, y)), [0, 1])
    if spec["dense_read"]:
        penalty = ops.mean(ops.square(emb.value()), [0, 1])
        loss = ops.add_v2(loss, ops.mul(bridge.constant(np.asarray(0.01, dtype)), penalty))
    return [emb] + variables, loss


def learning_rate(spec, global_step):
    if not isinstance(spec, dict):
        return spec
    (kind, args), = spec.items()
    if kind == "exponential_decay":
        return bridge.train.exponential_decay(args["learning_rate"], global_step, args["decay_steps"],
                                              args["decay_rate"], staircase=args.get("staircase", False))
    return bridge.train.piecewise_constant(global_step, args["boundaries"], args["values"])


def run_case(case):
    g = bridge.Graph()
    with g.as_default():
        if case.get("embedding") is not None:
            variables, loss = build_embedding_model(case["dtype"], case["embedding"])
        else:
            variables, loss = build_model(case["dtype"])
        step = bridge.train.get_or_create_global_step() if case["global_step"] else None
        lr = learning_rate(case["learning_rate"], step)
        with bridge.name_scope(case["scope"]) if case["scope"] else contextlib.nullcontext():
            opt = getattr(bridge.train, case["optimizer"] + "Optimizer")(lr, **case["kwargs"])
            clip = case["clip"]
            if clip is None:
                train = opt.minimize(loss, global_step=step)
            else:
                grads_and_vars = opt.compute_gradients(loss)
                grads = [gr for gr, _ in grads_and_vars]
                if "global_norm" in clip:
                    grads, _ = bridge.train.clip_by_global_norm(grads, clip["global_norm"])
                else:
                    grads = [bridge.train.clip_by_norm(gr, clip["norm"]) for gr in grads]
                train = opt.apply_gradients(zip(grads, [v for _, v in grads_and_vars], strict=True), global_step=step)
        all_vars = bridge.global_variables()
        finals = {v.op.name: v.read_value() for v in all_vars}
        init = bridge.global_variables_initializer()
        opt_vars = [v.op.name for v in opt.variables()]
        kinds = None
        if case.get("embedding") is not None:  # after the train op, as the oracle
            kinds = ["IndexedSlices" if isinstance(gr, bridge.IndexedSlices) else "Tensor"
                     for gr, _ in type(opt)(0.1, **case["kwargs"]).compute_gradients(loss)]
    fetch_lr = isinstance(lr, bridge.Output)
    losses, rates = [], []
    with bridge.Session(g) as s:
        s.run(init)
        for _ in range(STEPS):
            out = s.run([loss, lr if fetch_lr else loss, train])
            losses.append(float(out[0]))
            rates.append(float(out[1]))
        final = {k: np.array(v) for k, v in s.run(finals).items()}
        global_step = int(s.run(step.value())) if step is not None else None
    return {"losses": np.array(losses), "rates": np.array(rates) if fetch_lr else None,
            "global_step": global_step, "variables": [v.op.name for v in all_vars],
            "slot_names": opt.get_slot_names(), "optimizer_variables": opt_vars,
            "train_op": (train.name, train.type), "final": final,
            "trainable": [v.op.name for v in bridge.trainable_variables(g)], "grad_kinds": kinds}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_training_matches_tensorflow(case, tf_answers):
    want = tf_answers["results"][case["name"]]
    assert not isinstance(want, str), want
    got = run_case(case)
    # float32: the same kernels, but gradients summed in another order may
    # differ in the last bit, which Adam's normalisation lifts for tiny entries.
    rtol, atol = (1e-10, 1e-14) if case["dtype"] == "float64" else (1e-5, 1e-5)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=rtol, atol=0)
    assert got["losses"][-1] < got["losses"][0]  # it trains
    if want["rates"] is not None:
        np.testing.assert_allclose(got["rates"], want["rates"], rtol=rtol, atol=0)
    assert got["global_step"] == want["global_step"]
    # TF's names, in TF's creation order: a checkpoint of either carries the same keys.
    assert got["variables"] == want["variables"]
    assert got["slot_names"] == want["slot_names"]
    assert got["optimizer_variables"] == want["optimizer_variables"]
    assert got["train_op"] == tuple(want["train_op"])
    emb = ["emb"] if case.get("embedding") is not None else []
    assert got["trainable"] == emb + ["w1", "b1", "w2", "b2"]  # slots, beta powers, global step are not
    assert got["grad_kinds"] == want["grad_kinds"]
    if emb:  # the table's gradient: sparse unless a dense read joins in
        assert want["grad_kinds"][0] == ("Tensor" if case["embedding"]["dense_read"] else "IndexedSlices")
    for name, value in want["final"].items():
        assert got["final"][name].dtype == value.dtype, name
        np.testing.assert_allclose(got["final"][name], value, rtol=rtol, atol=atol, err_msg=name)


def test_global_step_after_100_steps(tf_answers):
    assert tf_answers["results"]["adam"]["global_step"] == STEPS
    assert run_case(CASES[0])["global_step"] == STEPS


def test_clipping_matches_tensorflow(tf_answers):
    want = tf_answers["clip"]
    g = bridge.Graph()
    with g.as_default():
        ts = [None if t is None else bridge.constant(t) for t in CLIP["tensors"]]
        c = CLIP["clip_norm"]
        by_norm = [bridge.train.clip_by_norm(t, c) for t in ts if t is not None]
        gnorm = bridge.train.global_norm(ts)
        clipped, norm = bridge.train.clip_by_global_norm(ts, c)
        big, _ = bridge.train.clip_by_global_norm(ts, 1e6)
        t, axes, ac = CLIP["axes_case"]
        by_axes = bridge.train.clip_by_norm(bridge.constant(t), ac, axes=axes)
        zero = bridge.train.clip_by_norm(bridge.constant(np.zeros(3)), 1.0)
    assert [i for i, x in enumerate(clipped) if x is None] == want["none_positions"]
    with bridge.Session(g) as s:
        got = s.run({"by_norm": by_norm, "global_norm": gnorm, "norm": norm,
                     "clipped": [x for x in clipped if x is not None],
                     "big": [x for x in big if x is not None], "by_axes": by_axes, "zero": zero})
    for key in ("global_norm", "norm", "by_axes", "zero"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-15, atol=0, err_msg=key)
    for key in ("by_norm", "clipped", "big"):
        for a, b in zip(got[key], want[key], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-15, atol=0, err_msg=key)
    # The norm really clipped, and a norm below clip_norm leaves the values as they are.
    assert float(got["norm"]) > c
    np.testing.assert_allclose(np.sqrt(sum(np.sum(x ** 2) for x in got["clipped"])), c, rtol=1e-12)
    for a, t in zip(got["big"], [t for t in CLIP["tensors"] if t is not None], strict=True):
        np.testing.assert_allclose(a, t, rtol=1e-12)


# --- errors: the same exception and message as TF ------------------------------

def _raise(name):
    g = bridge.Graph()
    with g.as_default():
        (w1, *_), loss = build_model("float64")
        if name == "no_variables":
            bridge.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[])
        elif name == "no_gradients":
            unused = bridge.Variable(np.ones(3), name="unused")
            bridge.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[unused])
        elif name == "apply_no_gradients":
            bridge.train.AdamOptimizer().apply_gradients([(None, w1)])
        elif name == "apply_empty":
            bridge.train.AdamOptimizer().apply_gradients([])
        elif name == "int_loss":
            bridge.train.AdamOptimizer().minimize(bridge.constant(3))
        elif name == "gate_gradients":
            bridge.train.AdamOptimizer().compute_gradients(loss, gate_gradients=7)
        elif name == "adagrad_initial_accumulator":
            bridge.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
        elif name == "piecewise_boundary_dtype":
            bridge.train.piecewise_constant(bridge.train.get_or_create_global_step(), [1.5], [0.1, 0.2])
        elif name == "piecewise_lengths":
            bridge.train.piecewise_constant(bridge.train.get_or_create_global_step(), [10, 20], [0.1, 0.2])
        elif name == "piecewise_value_dtypes":
            bridge.train.piecewise_constant(bridge.train.get_or_create_global_step(), [10], [0.1, 2])
        elif name == "global_step_twice":
            from bridge.train.learning_rate import create_global_step
            create_global_step()
            create_global_step()


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_match_tensorflow(name, tf_answers):
    kind, prefix = ERRORS[name]
    tf_error = tf_answers["errors"][name]
    assert tf_error.startswith(f"{kind}: {prefix}"), tf_error
    with pytest.raises(Exception) as info:
        _raise(name)
    assert type(info.value).__name__ == kind
    assert str(info.value).startswith(prefix), str(info.value)


def test_no_gradients_message_names_the_variables_and_the_loss():
    with pytest.raises(ValueError, match=r"between variables \[.*'unused:0'.*\] and loss .*Mean"):
        _raise("no_gradients")


# --- behaviour checked on the bridge alone ------------------------------------

def test_slots_are_initialized_non_trainable_variables():
    g = bridge.Graph()
    with g.as_default():
        big = bridge.Variable(np.full((40, 30), 2.0), name="big")  # 1200 elements: Fill, not a Const
        loss = ops.sum(ops.square(big.value()), [0, 1])
        rms = bridge.train.RMSPropOptimizer(0.01, centered=True)
        ada = bridge.train.AdagradOptimizer(0.1, initial_accumulator_value=0.25)
        adam = bridge.train.AdamOptimizer()
        train_ops = [opt.minimize(loss) for opt in (rms, ada, adam)]
        init = bridge.global_variables_initializer()
    assert [v.op.name for v in bridge.trainable_variables(g)] == ["big"]
    assert rms.get_slot_names() == ["mg", "momentum", "rms"]
    assert rms.get_slot(big, "rms").op.name == "big/RMSProp"
    assert rms.get_slot(big, "mg").op.name == "big/RMSProp_1"
    assert rms.get_slot(big, "momentum").op.name == "big/RMSProp_2"
    assert ada.get_slot(big, "accumulator").op.name == "big/Adagrad"
    assert adam.get_slot(big, "m").name == "big/Adam:0" and adam.get_slot(big, "v").op.name == "big/Adam_1"
    assert adam.get_slot(big, "nothing") is None
    # 1200-element initial values are Fill ops (as TF's zeros/ones make them), not Consts.
    for name in ("big/Adam/Initializer/zeros", "big/RMSProp/Initializer/ones", "big/Adagrad/Initializer/Const"):
        assert g.get_operation_by_name(name).type == "Fill", name
    with bridge.Session(g) as s:
        s.run(init)
        slots = s.run({"rms": rms.get_slot(big, "rms").value(), "mg": rms.get_slot(big, "mg").value(),
                       "acc": ada.get_slot(big, "accumulator").value(), "m": adam.get_slot(big, "m").value()})
        assert slots["rms"].shape == (40, 30) and np.all(slots["rms"] == 1.0)
        assert np.all(slots["mg"] == 0.0) and np.all(slots["m"] == 0.0)
        assert np.all(slots["acc"] == 0.25)
        s.run(train_ops)
        assert np.all(s.run(big.value()) < 2.0)
    with g.as_default():
        assert [v.op.name for v in adam.variables()] == ["beta1_power", "beta2_power", "big/Adam", "big/Adam_1"]


def test_fed_learning_rate_and_float32_hyperparameters():
    # A fed float64 learning rate is used as it is; a Python float is rounded
    # to float32 first (TF converts it so), then cast to the variable's dtype.
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([1.0, -2.0]), name="w")
        loss = ops.sum(ops.square(w.value()), [0])
        lr = bridge.placeholder(bridge.float64, [], name="lr")
        fed = bridge.train.GradientDescentOptimizer(lr).minimize(loss)
        const = bridge.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = bridge.global_variables_initializer()
    with bridge.Session(g) as s:
        s.run(init)
        s.run(fed, {lr: 0.1})
        np.testing.assert_array_equal(s.run(w.value()), np.array([1.0, -2.0]) * (1 - 2 * 0.1))
        s.run(init)
        s.run(const)
        lr32 = float(np.float32(0.1))
        np.testing.assert_array_equal(s.run(w.value()), np.array([1.0, -2.0]) - lr32 * 2 * np.array([1.0, -2.0]))


def test_apply_gradients_rejects_tensors_and_mismatched_gradients():
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.ones(2), name="w")
        x = bridge.constant(np.ones(2))
        opt = bridge.train.GradientDescentOptimizer(0.1)
        with pytest.raises(NotImplementedError, match="Trying to update a Tensor"):
            opt.apply_gradients([(x, x)])
        with pytest.raises(TypeError, match="Gradient must be convertible"):
            opt.apply_gradients([("nope", w)])
        with pytest.raises(TypeError, match="gradient .* is float32, but variable 'w:0' is float64"):
            opt.apply_gradients([(bridge.constant(np.ones(2, np.float32)), w)])
        with pytest.raises(TypeError, match="global_step must be a bridge.Variable"):
            opt.apply_gradients([(x, w)], global_step=3)


def test_get_global_step_finds_the_variable_and_checks_it():
    g = bridge.Graph()
    with g.as_default():
        assert bridge.train.get_global_step() is None
        with bridge.name_scope("inner"):
            step = bridge.train.get_or_create_global_step()
        assert step.name == "global_step:0" and step.op.name == "global_step"
        assert step.dtype == bridge.int64 and not step.trainable
        assert bridge.train.get_global_step() is step
        assert bridge.train.get_or_create_global_step() is step
    g2 = bridge.Graph()
    with g2.as_default():
        bridge.Variable(np.zeros(()), name="global_step")  # float: not a global step
        with pytest.raises(TypeError, match="does not have integer type"):
            bridge.train.get_global_step()


def test_gate_graph_callable_learning_rate_and_grad_loss():
    # GATE_GRAPH only orders the gradients (Identity after all of them); a
    # callable learning rate is called when the update is built; grad_loss
    # scales the gradient.
    g = bridge.Graph()
    with g.as_default():
        w = bridge.Variable(np.array([1.0, -2.0]), name="w")
        loss = ops.sum(ops.square(w.value()), [0])
        opt = bridge.train.GradientDescentOptimizer(lambda: bridge.constant(np.float64(0.25)))
        (grad, var), = opt.compute_gradients(loss, gate_gradients=opt.GATE_GRAPH,
                                             grad_loss=bridge.constant(np.float64(2.0)))
        assert var is w and grad.op.type == "Identity" and grad.op.control_inputs
        train = opt.apply_gradients([(grad, var)])
        init = bridge.global_variables_initializer()
    assert train.type == "NoOp" and train.name == "GradientDescent"
    with bridge.Session(g) as s:
        s.run(init)
        s.run(train)
        np.testing.assert_array_equal(s.run(w.value()), np.array([1.0, -2.0]) * (1 - 0.25 * 2 * 2))
