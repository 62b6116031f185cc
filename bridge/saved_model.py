"""Loading a SavedModel (TF_LoadSessionFromSavedModel) with its signatures.

TF1 SavedModels (``builder.add_meta_graph_and_variables``) and TF2 ones
(``tf.saved_model.save``, Keras' ``model.export``) load the same way: the C
API imports the MetaGraph (with its function library), restores the
variables and runs the init op (TF2's ``__saved_model_init_op`` signature,
or TF1's main op / legacy init op), which fills lookup tables.  TF2
signatures read their inputs from placeholders named
``<signature>_<input>`` and their outputs from a ``StatefulPartitionedCall``
of the traced function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from . import _proto as pb
from . import buffers
from ._lib import ffi, lib
from .errors import check, status
from .graph import Graph, Operation, Output
from .session import Session, SessionConfig, session_options

#: The signature under which TF2 records the op that initializes tables (the
#: loader runs it; it is not a signature to call).
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"


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


def load_saved_model(export_dir: Union[str, Path], tags: Sequence[str] = ("serve",),
                     config: Union[SessionConfig, bytes, dict, None] = None) -> SavedModel:
    """Load a SavedModel into a new graph and session: variables are restored
    and the init op has run.  ``signatures`` holds the callable signatures
    (TF2's ``__saved_model_init_op`` is ``init_op`` instead)."""
    export_dir = Path(export_dir)
    if not export_dir.is_dir():
        raise FileNotFoundError(f"SavedModel folder not found: {export_dir}")
    graph = Graph()
    c_tags = [ffi.new("char[]", t.encode()) for t in tags]
    meta = ffi.gc(lib.TF_NewBuffer(), lib.TF_DeleteBuffer)
    s = status()
    ptr = lib.TF_LoadSessionFromSavedModel(session_options(config), ffi.NULL, str(export_dir).encode(),
                                           ffi.new("char*[]", c_tags), len(c_tags), graph._ptr, meta, s.ptr)
    check(s, f"loading SavedModel {export_dir} with tags {list(tags)}")
    session = Session(graph, config, _ptr=ptr)
    for op in graph:
        graph._names_in_use.setdefault(op.name.lower(), 1)
    meta_fields = pb.fields(buffers.read(meta))
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
