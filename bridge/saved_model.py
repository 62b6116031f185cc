"""Loading a SavedModel (TF_LoadSessionFromSavedModel) with its signatures."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, Union

from . import _proto as pb
from . import buffers
from ._lib import ffi, lib
from .errors import check, status
from .graph import Graph, Output
from .session import Session, SessionConfig, session_options


@dataclass
class Signature:
    """A SignatureDef: named inputs and outputs of the loaded graph."""
    name: str
    inputs: dict[str, Output]
    outputs: dict[str, Output]
    method_name: str
    session: Session

    def __call__(self, **feeds: Any) -> dict[str, Any]:
        """Run the signature: keyword arguments by input key, a dict of outputs back."""
        unknown = set(feeds) - set(self.inputs)
        if unknown:
            raise TypeError(f"signature '{self.name}' has no input(s) {sorted(unknown)}; "
                            f"its inputs are {sorted(self.inputs)}")
        missing = set(self.inputs) - set(feeds)
        if missing:
            raise TypeError(f"signature '{self.name}' needs input(s) {sorted(missing)}")
        return self.session.run(dict(self.outputs),
                                {self.inputs[k]: v for k, v in feeds.items()})


@dataclass
class SavedModel:
    graph: Graph
    session: Session
    signatures: dict[str, Signature]
    tags: tuple[str, ...]


def _tensor_infos(buf, graph: Graph) -> dict[str, Output]:
    out = {}
    for entry in buf:
        e = pb.fields(bytes(entry))
        key = pb.text(e[1][0])
        info = pb.fields(bytes(e.get(2, [b""])[0]))
        out[key] = graph.get_tensor_by_name(pb.text(info.get(1, [b""])[0]))
    return out


def load_saved_model(export_dir: Union[str, Path], tags: Sequence[str] = ("serve",),
                     config: Union[SessionConfig, bytes, dict, None] = None) -> SavedModel:
    """Load a SavedModel into a new graph and session; variables are restored."""
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
    for entry in meta_fields.get(5, []):
        e = pb.fields(bytes(entry))
        name = pb.text(e[1][0])
        sig = pb.fields(bytes(e.get(2, [b""])[0]))
        signatures[name] = Signature(name, _tensor_infos(sig.get(1, []), graph), _tensor_infos(sig.get(2, []), graph),
                                     pb.text(sig.get(3, [b""])[0]), session)
    return SavedModel(graph, session, signatures, tuple(tags))
