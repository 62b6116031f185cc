"""The tf_bridge Fortran module loads TF2 SavedModels whose variables only the
object graph restores: Keras 3 models saved with ``tf.saved_model.save`` and
Keras' ``model.export`` (the make_keras_models oracle).  Every signature run
from Fortran gives bit for bit what stock TF's
``tf.saved_model.load(path).signatures`` gives (same kernels, same inputs,
same variable values: nothing to round).

Such a model holds each variable twice: the handles its signatures read and
copies that the SaverDef's restore (all TF_LoadSessionFromSavedModel runs)
fills; tf_bridge_objects.f90 restores the former through the object graph,
as bridge/saved_model/objects.py does.  Without it the signatures fail (their
variables are uninitialised): test_keras_signatures_read_variables_the_saver_does_not_fill
shows which Keras models need it, and models that loaded right before
(Keras' model.export, a tf.Module's, TF1's, the bridge's) get no restore
ops added."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bridge
from bridge import ops
from bridge.framework import _proto as pb
from bridge.saved_model import objects
from support.fortran import compile_program, run_program

#: The restore op tf_bridge_objects adds when it restores anything.
RESTORE_OP = objects.RESTORE_SCOPE + "/RestoreV2"

DTYPES = {"float32": (1, np.float32), "int32": (3, np.int32), "int64": (9, np.int64), "float64": (2, np.float64)}
BY_ENUM = {code: np.dtype(t) for code, t in DTYPES.values()}

# Loads the model, runs each signature of spec.txt twice (inputs from
# in_<s>_<i>.bin, float32 or int32, rank 0 to 2 in TF's order), writes each
# output's bytes to out_<s>_<i>.bin and prints its dtype and shape, and
# whether the load added the object graph restore.
PROGRAM = f"""
program keras
  use tf_bridge
  use tf_bridge_c, only: TF_GraphOperationByName
  use, intrinsic :: iso_c_binding
  implicit none
  type(tf_model) :: m
  type(tf_status) :: st
  type(tf_tensor), allocatable :: x(:), y(:), again(:)
  character(len=64), allocatable :: in_keys(:), out_keys(:)
  character(len=64) :: sig
  character(len=1024) :: dir
  character(len=32) :: file
  real(c_float), allocatable :: f0, f2(:,:)
  integer(c_int32_t), allocatable :: i2(:,:)
  integer(c_int8_t), pointer :: bytes(:)
  integer(c_int64_t), allocatable :: dims(:)
  integer :: u, v, n_sigs, n_in, n_out, s, i, dtype, rank, d(2), elsize
  call get_command_argument(1, dir)
  call tf_load_saved_model(m, trim(dir), st)
  call check(st)
  print '(a,l1)', "object_restore ", &
       c_associated(TF_GraphOperationByName(m%graph, "{RESTORE_OP}" // c_null_char))
  open(newunit=u, file="spec.txt", status="old")
  read(u, *) n_sigs
  do s = 1, n_sigs
    read(u, *) sig, n_in
    allocate(x(n_in), in_keys(n_in))
    do i = 1, n_in
      read(u, *) in_keys(i), dtype, rank, d
      write(file, '(a,i0,a,i0,a)') "in_", s, "_", i, ".bin"
      open(newunit=v, file=trim(file), access="stream", form="unformatted", status="old")
      if (dtype == 1 .and. rank == 0) then
        allocate(f0)
        read(v) f0
        call tf_tensor_from(x(i), f0, st, copy=.true.)
        deallocate(f0)
      else if (dtype == 1 .and. rank == 2) then
        allocate(f2(d(2), d(1)))              ! TF's [d1,d2]: dimensions reversed, no transpose
        read(v) f2
        call tf_tensor_from(x(i), f2, st, copy=.true.)
        deallocate(f2)
      else if (dtype == 3 .and. rank == 2) then
        allocate(i2(d(2), d(1)))
        read(v) i2
        call tf_tensor_from(x(i), i2, st, copy=.true.)
        deallocate(i2)
      else
        error stop "spec.txt: an input this program does not read"
      end if
      call check(st)
      close(v)
    end do
    read(u, *) n_out
    allocate(y(n_out), again(n_out), out_keys(n_out))
    do i = 1, n_out
      read(u, *) out_keys(i)
    end do
    call m%run(trim(sig), in_keys, x, out_keys, y, st)
    call check(st)
    call m%run(trim(sig), in_keys, x, out_keys, again, st)
    call check(st)
    do i = 1, n_out
      dims = y(i)%shape()
      select case (y(i)%dtype())
      case (TF_DOUBLE, TF_INT64); elsize = 8
      case default; elsize = 4
      end select
      call c_f_pointer(y(i)%data(), bytes, [product(dims) * elsize])
      write(file, '(a,i0,a,i0,a)') "out_", s, "_", i, ".bin"
      open(newunit=v, file=trim(file), access="stream", form="unformatted", status="replace")
      write(v) bytes
      call c_f_pointer(again(i)%data(), bytes, [product(dims) * elsize])
      write(v) bytes
      close(v)
      print '(a,i0,1x,i0,1x,i0,1x,i0,*(1x,i0))', "output ", s, i, y(i)%dtype(), size(dims), dims
      call y(i)%delete()
      call again(i)%delete()
    end do
    do i = 1, n_in
      call x(i)%delete()
    end do
    deallocate(x, y, again, in_keys, out_keys)
  end do
  close(u)
  call m%save_checkpoint("ckpt", st)
  print '(a,i0,a)', "checkpoint save ", st%code, " " // st%message
  call m%restore_checkpoint("ckpt", st)
  print '(a,i0,a)', "checkpoint restore ", st%code, " " // st%message
  call m%close()
contains
  subroutine check(st)
    type(tf_status), intent(in) :: st
    if (.not. st%ok()) then
      print '(a,i0,a)', "error ", st%code, ": " // st%message
      error stop 1
    end if
  end subroutine
end program keras
"""


@pytest.fixture(scope="module")
def keras_models(oracle) -> dict:
    return oracle("make_keras_models")


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    return compile_program(PROGRAM, tmp_path_factory.mktemp("keras_program"), "keras")


def _manifest(keras_models: dict, name: str) -> dict:
    if name not in keras_models["models"]:
        pytest.skip(f"Keras is not importable next to stock TF: {keras_models['keras_error']}")
    return keras_models["models"][name]


def _run(program: Path, folder: Path, path: str, signatures: dict) -> tuple[bool, dict, dict]:
    """Run the program in folder on the model at path: whether it restored
    through the object graph, {signature: {key: (first run, second run)}} and
    what save_checkpoint and restore_checkpoint then said ({"save": (code, message), "restore": ...})."""
    folder.mkdir()
    exe = folder / program.name
    exe.symlink_to(program)
    lines = [str(len(signatures))]
    for s, (name, info) in enumerate(signatures.items(), 1):
        feeds = info["feeds"]
        lines.append(f"'{name}' {len(feeds)}")
        for i, (key, value) in enumerate(feeds.items(), 1):
            value = np.asarray(value)
            dims = list(value.shape) + [1] * (2 - value.ndim)
            lines.append(f"'{key}' {DTYPES[value.dtype.name][0]} {value.ndim} {dims[0]} {dims[1]}")
            (folder / f"in_{s}_{i}.bin").write_bytes(np.ascontiguousarray(value).tobytes())
        keys = sorted(info["expected"])
        lines.append(str(len(keys)))
        lines.extend(f"'{key}'" for key in keys)
    (folder / "spec.txt").write_text("\n".join(lines) + "\n")
    printed = run_program(exe, path).splitlines()
    restored = printed[0] == "object_restore T"
    assert printed[0] in ("object_restore T", "object_restore F"), printed
    outputs: dict = {}
    checkpoint = {}
    for line in printed[1:]:
        if line.startswith("checkpoint "):
            _, what, code, *message = line.split(" ")
            checkpoint[what] = (int(code), " ".join(message).strip())
            continue
        _, s, i, dtype, rank, *dims = line.split()
        name = list(signatures)[int(s) - 1]
        key = sorted(signatures[name]["expected"])[int(i) - 1]
        raw = (folder / f"out_{s}_{i}.bin").read_bytes()
        half = len(raw) // 2
        shape = tuple(int(d) for d in dims[:int(rank)])
        outputs.setdefault(name, {})[key] = tuple(
            np.frombuffer(part, BY_ENUM[int(dtype)]).reshape(shape) for part in (raw[:half], raw[half:]))
    assert set(checkpoint) == {"save", "restore"}, printed
    return restored, outputs, checkpoint


# model -> whether its load needs the object graph restore: Keras' own
# model.export writes signatures that read the handles the SaverDef fills.
KERAS_MODELS = {"sequential": True, "functional": True, "signatures": True, "export": False}


@pytest.mark.parametrize("name", list(KERAS_MODELS))
def test_fortran_runs_keras_saved_models_like_stock_tf_bit_for_bit(keras_models, program, tmp_path, name):
    manifest = _manifest(keras_models, name)
    restored, outputs, checkpoint = _run(program, tmp_path / "run", manifest["path"], manifest["signatures"])
    assert restored == KERAS_MODELS[name], "the object graph restore ran" if restored else "it did not run"
    if restored:   # its SaverDef would save and restore other copies than the signatures read: refused
        for what in ("save", "restore"):
            code, message = checkpoint[what]
            assert code == 12, (what, code, message)
            assert message.startswith(f"{what}_checkpoint('ckpt'): {manifest['path']} is a TF2 export"), message
            assert f"its SaverDef would {what} other copies of them" in message, message
    else:
        assert checkpoint == {"save": (0, ""), "restore": (0, "")}, checkpoint
    assert set(outputs) == set(manifest["signatures"])
    for signature, info in manifest["signatures"].items():
        assert set(outputs[signature]) == set(info["expected"]), signature
        for key, want in info["expected"].items():
            for got in outputs[signature][key]:
                assert got.dtype == want.dtype and got.shape == want.shape, (signature, key, got.shape)
                np.testing.assert_array_equal(got, want, err_msg=f"{signature}/{key}", strict=True)
                assert np.all(np.isfinite(got))


def test_keras_signatures_read_variables_the_saver_does_not_fill(keras_models):
    """Why the old loader failed on these models: the handles the signature
    reads are not among those the SaverDef's restore op fills."""
    for name, needed in KERAS_MODELS.items():
        manifest = _manifest(keras_models, name)
        (meta,) = pb.fields(Path(manifest["path"], "saved_model.pb").read_bytes())[2]
        plan = objects.restore_plan(Path(manifest["path"]), pb.fields(bytes(meta)))
        assert plan and all(p.tf1_restored != needed for p in plan), name


def test_models_that_loaded_before_get_no_object_restore(keras_models, oracle_models, program, tmp_path):
    # A tf.Module's signatures read the handles the SaverDef's restore fills:
    # outputs equal stock TF's, and no restore op is added.
    manifest = keras_models["models"]["lazy_module"]
    restored, outputs, _ = _run(program, tmp_path / "module", manifest["path"], manifest["signatures"])
    assert not restored
    for key, want in manifest["signatures"]["serving_default"]["expected"].items():
        for got in outputs["serving_default"][key]:
            np.testing.assert_array_equal(got, want, err_msg=key, strict=True)
    # TF1 (no object graph) and the bridge's own SavedModels load as they did.
    restored, _, checkpoint = _run(program, tmp_path / "tf1", oracle_models["models"]["saved_model"]["path"], {})
    assert not restored
    assert checkpoint == {"save": (0, ""), "restore": (0, "")}, checkpoint   # a TF1 model's SaverDef is right
    g = bridge.Graph()
    with g.as_default():
        x = bridge.placeholder(bridge.float32, [None, 2], name="x")
        w = bridge.Variable(np.array([[1.5], [-2.0]], np.float32), name="w")
        y = ops.mat_mul(x, w.value(), name="y")
    export_dir = tmp_path / "bridge_export"
    with bridge.Session(g) as sess:
        sess.run(bridge.global_variables_initializer(g))
        bridge.saved_model.save(sess, export_dir, {"serving_default": ({"x": x}, {"y": y})})
    feeds = {"x": np.array([[1, 2], [3, 4]], np.float32)}
    restored, outputs, _ = _run(program, tmp_path / "bridge", str(export_dir),
                             {"serving_default": {"feeds": feeds, "expected": {"y": None}}})
    assert not restored
    for got in outputs["serving_default"]["y"]:
        np.testing.assert_array_equal(got, np.array([[-2.5], [-3.5]], np.float32), strict=True)


def _rewrite(buf: bytes, path: list[tuple[int, int]], change) -> bytes:
    """buf with the length-delimited field at path ((field number, which
    occurrence) per level) replaced by change(its bytes); the rest re-encoded."""
    if not path:
        return change(bytes(buf))
    (number, index), rest = path[0], path[1:]
    out, seen = b"", 0
    for n, wire, value in pb.iter_fields(bytes(buf)):
        if wire == 2:
            if n == number and seen == index:
                value = _rewrite(value, rest, change)
            seen += n == number
            out += pb.field_bytes(n, bytes(value))
        elif wire == 0:
            out += pb.field_varint(n, value)
        else:
            width = 8 if wire == 1 else 4
            out += pb._varint(n << 3 | wire) + int(value).to_bytes(width, "little")
    return out


def test_a_value_of_another_shape_than_its_variable_fails_the_load(keras_models, program, tmp_path):
    """The Fortran loader does not read the checkpoint's index (the Python
    one skips values saved in slices by it): a checkpoint value whose shape
    is not its variable's saved shape stops the load, naming the variable,
    instead of loading a wrong value.  Here a Dense layer's kernel and bias
    references are swapped in the SavedObjectGraph, so each variable is
    matched to the other's checkpoint value."""
    import os
    import shutil
    import subprocess
    manifest = _manifest(keras_models, "sequential")
    model = tmp_path / "sequential"
    shutil.copytree(manifest["path"], model)
    (meta,) = pb.fields((model / "saved_model.pb").read_bytes())[2]
    plan = {p.node_id: p for p in objects.restore_plan(model, pb.fields(bytes(meta)))}
    nodes, _ = objects.parse_saved_object_graph(bytes(pb.fields(bytes(meta))[7][0]))
    layer, kernel, bias = next((i, a, b) for i, node in enumerate(nodes) for a, _ in node.children
                               for b, _ in node.children
                               if a in plan and b in plan and len(nodes[a].variable.shape) == 2
                               and len(nodes[b].variable.shape) == 1)

    def swap(obj: bytes) -> bytes:
        out = b""
        for n, wire, value in pb.iter_fields(obj):
            if n == 1:
                ref = pb.fields(bytes(value))
                node_id = {kernel: bias, bias: kernel}.get(ref[1][0], ref[1][0])
                out += pb.field_bytes(1, pb.field_varint(1, node_id) + pb.field_bytes(2, bytes(ref[2][0])))
            else:
                out += pb.field_bytes(n, bytes(value)) if wire == 2 else pb.field_varint(n, value)
        return out

    doctored = _rewrite((model / "saved_model.pb").read_bytes(), [(2, 0), (7, 0), (1, layer)], swap)
    (model / "saved_model.pb").write_bytes(doctored)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "spec.txt").write_text("0\n")
    done = subprocess.run([str(program), str(model)], capture_output=True, text=True, timeout=120, cwd=folder,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode != 0, done.stdout
    assert done.stdout.startswith("error 3: tf_load_saved_model("), done.stdout
    assert "through the object graph" in done.stdout, done.stdout
    assert any(f"{objects.RESTORE_SCOPE}/{plan[i].handle}" in done.stdout for i in (kernel, bias)), done.stdout
