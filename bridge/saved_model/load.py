"""Loading a SavedModel (TF_LoadSessionFromSavedModel) with its signatures.

TF1 SavedModels (``builder.add_meta_graph_and_variables``) and TF2 ones
(``tf.saved_model.save``, Keras' ``model.export``) load the same way: the C
API imports the MetaGraph (with its function library), restores the
variables and runs the init op (TF2's ``__saved_model_init_op`` signature,
or TF1's main op / legacy init op), which fills lookup tables.  TF2
signatures read their inputs from placeholders named
``<signature>_<input>`` and their outputs from a ``StatefulPartitionedCall``
of the traced function.  A TF2 SavedModel's variables are then restored
through its object graph (:mod:`.objects`): the TF1 restore may fill copies
of the variables rather than the handles the signatures read (Keras 3
models saved with ``tf.saved_model.save``).

A graph that uses ops of custom op libraries (Julia ops among them) loads
once those libraries are: ``op_libraries`` lists them (built libraries, op
folders, or what ``bridge.customop.load`` returned).  A SavedModel written by
``bridge.saved_model.save`` records which library each such op type came
from (``assets.extra/bridge_op_libraries.json``), so a load without it names
the library to pass.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from bridge.framework import _proto as pb
from bridge.framework import buffers, errors
from bridge.framework._lib import ffi, lib
from bridge.framework.errors import check, status
from bridge.framework.graph import Graph, Operation, Output
from bridge.platform.paths import op_folder_of_library
from bridge.framework.session import Session, SessionConfig, session_options
from . import objects

#: The signature under which TF2 records the op that initializes tables (the
#: loader runs it; it is not a signature to call).
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"

#: Where bridge.saved_model.save records the op libraries the graph's op types came from.
OP_LIBRARIES_RECORD = Path("assets.extra") / "bridge_op_libraries.json"

# Loads an op folder (a Julia op: spec, Julia file, build).  The custom-op
# tools sit above the binding (they start Julia), so the package registers
# this hook (bridge/__init__.py) rather than the binding importing them.
_op_folder_loader: Optional[Callable[[Path], Any]] = None


def set_op_folder_loader(loader: Optional[Callable[[Path], Any]]) -> None:
    """Register how an op folder named in ``op_libraries`` is loaded (``bridge.customop.load``)."""
    global _op_folder_loader
    _op_folder_loader = loader


@dataclass
class Signature:
    """A SignatureDef: named inputs and outputs of the loaded graph.

    ``outputs`` maps keys to tensors; ``targets`` holds the keys whose
    TensorInfo names an operation (run, with None as its value);
    ``unsupported`` the keys of sparse or composite tensors, which the
    binding does not feed or fetch (with what they are)."""
    name: str
    inputs: dict[str, Output]
    outputs: dict[str, Output]
    method_name: str
    session: Session
    targets: dict[str, Operation] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)

    def __call__(self, **feeds: Any) -> dict[str, Any]:
        """Run the signature: keyword arguments by input key, a dict of outputs back."""
        unknown = set(feeds) - set(self.inputs)
        if unknown:
            raise TypeError(f"signature '{self.name}' has no input(s) {sorted(unknown)}; "
                            f"its inputs are {sorted(self.inputs)}")
        missing = set(self.inputs) - set(feeds)
        if missing:
            raise TypeError(f"signature '{self.name}' needs input(s) {sorted(missing)}")
        if self.unsupported:
            raise NotImplementedError(f"signature '{self.name}' has sparse or composite tensors, which the "
                                      f"binding cannot feed or fetch: {self.unsupported}")
        fetches: dict[str, Any] = dict(self.outputs)
        fetches.update(self.targets)
        return self.session.run(fetches, {self.inputs[k]: v for k, v in feeds.items()})


@dataclass
class SavedModel:
    graph: Graph
    session: Session
    signatures: dict[str, Signature]
    tags: tuple[str, ...]
    init_op: Optional[Operation] = None   # TF2's __saved_model_init_op, which loading ran

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> "SavedModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _tensor_infos(buf: list, graph: Graph) -> tuple[dict[str, Output], dict[str, Operation], dict[str, str]]:
    """A signature's map<string, TensorInfo>: tensors, operations, and the
    keys of tensors given otherwise than by name (sparse, composite)."""
    tensors, operations, unsupported = {}, {}, {}
    for entry in buf:
        e = pb.fields(bytes(entry))
        key = pb.text(e[1][0])
        info = pb.fields(bytes(e.get(2, [b""])[0]))
        if 1 not in info:  # TensorInfo.coo_sparse (4) or composite_tensor (5)
            unsupported[key] = "a sparse tensor" if 4 in info else "a composite tensor"
            continue
        name = pb.text(info[1][0])
        element = graph.as_graph_element(name)   # "op:0" a tensor, "op" an operation (TF2's init op)
        if isinstance(element, Operation):
            operations[key] = element
        else:
            tensors[key] = element
    return tensors, operations, unsupported


def _load_op_libraries(op_libraries: Sequence[Any]) -> None:
    """Load each entry: a built op library (a file), an op folder, or a
    module that load_op_library / bridge.customop.load returned."""
    if isinstance(op_libraries, (str, os.PathLike)):
        op_libraries = [op_libraries]
    if not op_libraries:
        return
    # The op layer loads here, not on import: `import bridge` stays free of it.
    from bridge.ops.op_library import is_loaded, load_op_library
    for entry in op_libraries:
        if hasattr(entry, "LIBRARY_PATH") and hasattr(entry, "OP_TYPES"):
            if not is_loaded(entry.LIBRARY_PATH):
                load_op_library(entry.LIBRARY_PATH)
            continue
        if not isinstance(entry, (str, os.PathLike)):
            raise TypeError(f"load_saved_model: op_libraries entry {entry!r} is neither a path (a built op library "
                            "or an op folder) nor what bridge.customop.load returned")
        path = Path(entry)
        if path.is_file() and _op_folder_loader is not None:
            # A Julia op's library needs its Julia code too: load its op folder.
            path = op_folder_of_library(path) or path
        if path.is_dir():
            if _op_folder_loader is None:
                raise RuntimeError(f"load_saved_model: the op folder {path} needs bridge.customop to load it, "
                                   "and none is registered; pass bridge.customop.load(folder) instead")
            _op_folder_loader(path)
        elif path.is_file():
            load_op_library(path)
        else:
            raise FileNotFoundError(f"load_saved_model: op library '{entry}' not found (op_libraries takes built "
                                    "op libraries, op folders, or what bridge.customop.load returned)")


def recorded_op_libraries(export_dir: Union[str, Path]) -> list[dict]:
    """The op libraries bridge.saved_model.save recorded for the model
    (``library``, ``folder``, ``op_types``, ``used``), or [] when none are."""
    path = Path(export_dir) / OP_LIBRARIES_RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    libraries = record.get("libraries") if isinstance(record, dict) else None
    return [lib for lib in libraries if isinstance(lib, dict)] if isinstance(libraries, list) else []


def _unregistered_op_error(export_dir: Path, op_type: str, cause: errors.OpError) -> errors.NotFoundError:
    origin = next((lib for lib in recorded_op_libraries(export_dir) if op_type in lib.get("op_types", ())), None)
    if origin is None:
        where = ("pass the library that defines it in op_libraries: its op folder, the built library, or what "
                 "bridge.customop.load returned")
    else:
        source = origin.get("folder") or origin.get("library")
        where = (f"when the model was saved it came from the op library {origin.get('library')}"
                 + (f" (op folder {origin['folder']})" if origin.get("folder") else "")
                 + f": pass it, as load_saved_model({str(export_dir)!r}, op_libraries=[{str(source)!r}]) "
                 "(or what bridge.customop.load returned)")
    return errors.NotFoundError(f"SavedModel {export_dir} uses the op type '{op_type}', which is not registered "
                                f"in this process; {where}.  (TensorFlow: {cause.message})")


def load_saved_model(export_dir: Union[str, Path], tags: Sequence[str] = ("serve",),
                     config: Union[SessionConfig, bytes, dict, None] = None,
                     op_libraries: Sequence[Any] = ()) -> SavedModel:
    """Load a SavedModel into a new graph and session: variables are restored
    and the init op has run.  ``signatures`` holds the callable signatures
    (TF2's ``__saved_model_init_op`` is ``init_op`` instead).

    ``op_libraries``: the custom op libraries the graph needs, loaded first:
    paths of built libraries (``lib<Op>.so``) or op folders (Julia ops), or
    modules ``bridge.customop.load`` / ``bridge.load_op_library`` returned.
    A Julia op's built library loads through its op folder, so its Julia
    code is included."""
    export_dir = Path(export_dir)
    if not export_dir.is_dir():
        raise FileNotFoundError(f"SavedModel folder not found: {export_dir}")
    _load_op_libraries(op_libraries)
    graph = Graph()
    c_tags = [ffi.new("char[]", t.encode()) for t in tags]
    meta = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
    s = status()
    ptr = lib.TF_LoadSessionFromSavedModel(session_options(config), ffi.NULL, str(export_dir).encode(),
                                           ffi.new("char*[]", c_tags), len(c_tags), graph._ptr, meta, s.ptr)
    try:
        check(s, f"loading SavedModel {export_dir} with tags {list(tags)}")
    except errors.OpError as exc:
        unregistered = re.search(r"Op type not registered '([^']+)'", exc.message)
        if unregistered:
            raise _unregistered_op_error(export_dir, unregistered.group(1), exc) from exc
        raise
    session = Session(graph, config, _ptr=ptr)
    for op in graph:
        graph._names_in_use.setdefault(op.name.lower(), 1)
    meta_fields = pb.fields(buffers.read(meta))
    try:
        # TF2: the variables the signatures read get their objects' values
        # (the TF1 restore above may have filled copies of them instead).
        objects.restore(export_dir, graph, session, objects.restore_plan(export_dir, meta_fields))
    except BaseException:
        session.close()
        raise
    signatures = {}
    init_op = None
    for entry in meta_fields.get(5, []):
        e = pb.fields(bytes(entry))
        name = pb.text(e[1][0])
        sig = pb.fields(bytes(e.get(2, [b""])[0]))
        inputs, input_ops, bad_inputs = _tensor_infos(sig.get(1, []), graph)
        outputs, targets, bad_outputs = _tensor_infos(sig.get(2, []), graph)
        if name == INIT_OP_SIGNATURE_KEY:
            init_op = next(iter(targets.values()), None)
            continue
        if input_ops:
            raise ValueError(f"SavedModel {export_dir}: signature '{name}' has inputs that name operations, "
                             f"not tensors: {sorted(input_ops)}")
        unsupported = {f"input {k}": v for k, v in bad_inputs.items()}
        unsupported.update({f"output {k}": v for k, v in bad_outputs.items()})
        signatures[name] = Signature(name, inputs, outputs, pb.text(sig.get(3, [b""])[0]), session,
                                     targets, unsupported)
    return SavedModel(graph, session, signatures, tuple(tags), init_op)


# The package's hooks for this module (bridge/__init__.py; bridge/platform/hooks.py).
from bridge.platform import hooks as _hooks  # noqa: E402
_hooks.imported(__name__)
