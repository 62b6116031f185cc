"""The checkpoint-state file, as TensorFlow's ``checkpoint_management`` has it.

``checkpoint`` (or another ``latest_filename``) beside the checkpoints names
the newest one and those kept, in TF's text format (``CheckpointState``),
paths inside the folder relative to it.  :func:`write_checkpoint_state`
replaces it in one step, under the folder's lock
(:mod:`bridge.train.checkpoint_commit`); :func:`latest_checkpoint` first
finishes the saves a kill left in the folder.  ``list_variables`` and
``checkpoint_exists`` read checkpoints without a graph.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from .bundle import read_index
from .checkpoint_commit import folder_lock, settle

__all__ = ["CHECKPOINT_STATE_FILE", "CheckpointState", "checkpoint_exists", "checked_path", "get_checkpoint_state",
           "latest_checkpoint", "list_variables", "write_checkpoint_state"]

#: The file beside the checkpoints that names the newest ones.
CHECKPOINT_STATE_FILE = "checkpoint"

PathLike = Union[str, os.PathLike]


def checkpoint_exists(prefix: PathLike) -> bool:
    """Whether the V2 checkpoint ``prefix`` exists (its .index file)."""
    return os.path.isfile(f"{os.fspath(prefix)}.index")


def checked_path(path: Any, where: str, what: str, folder_ok: bool = False, empty_ok: bool = False) -> str:
    """``path`` as a str, refused (ValueError) when it holds a NUL byte
    (TensorFlow would cut it there, writing another file than the one named),
    unless ``empty_ok`` when it is empty, and unless ``folder_ok`` when it
    ends with a separator (a folder)."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise TypeError(f"{where}: {what} must be a str or os.PathLike, not {type(path).__name__}") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text and not empty_ok:
        raise ValueError(f"{where}: {what} is empty; give a checkpoint prefix such as 'ckpt/model'")
    if "\0" in text:
        raise ValueError(f"{where}: {what} {text!r} holds a NUL byte, which no file name can hold; nothing "
                         "was written")
    if not folder_ok and text.endswith((os.sep, "/") if os.altsep is None else (os.sep, os.altsep)):
        raise ValueError(f"{where}: {what} {text!r} names a folder; give a checkpoint prefix inside it, such "
                         f"as {os.path.join(text, 'model')!r}")
    return text


def list_variables(ckpt: PathLike) -> list[tuple[str, list[Optional[int]]]]:
    """(name, shape) of every tensor in a checkpoint (a prefix, or a folder
    with a state file), sorted by name, as ``tf.train.list_variables``."""
    prefix = os.fspath(ckpt)
    if os.path.isdir(prefix):
        found = latest_checkpoint(prefix)
        if found is None:
            raise ValueError(f"list_variables: no checkpoint in the folder {prefix}")
        prefix = found
    return [(name, list(entry.shape)) for name, entry in sorted(read_index(prefix).items())]


def _escape(text: str) -> str:
    """A text-format string literal's body (C escapes, as protobuf's CEscape)."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        if ch in "\"'\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


def _unescape(body: str) -> str:
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8")


@dataclass
class CheckpointState:
    """The state file's content (TF's CheckpointState), paths joined to its folder."""
    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = field(default_factory=list)
    last_preserved_timestamp: float = 0.0


def write_checkpoint_state(folder: PathLike, model_checkpoint_path: str, all_model_checkpoint_paths: Sequence[str],
                           timestamps: Sequence[float] = (), latest_filename: str = CHECKPOINT_STATE_FILE) -> Path:
    """Write ``folder/latest_filename`` in TF's text format, replacing it in
    one step; paths inside ``folder`` are written relative to it (so the
    folder can move), others as given."""
    folder = Path(os.fspath(folder) or ".")

    def shown(path: str) -> str:
        p = Path(path)
        try:
            return os.fspath(p.resolve().relative_to(folder.resolve()))
        except ValueError:
            return path

    lines = [f'model_checkpoint_path: "{_escape(shown(model_checkpoint_path))}"']
    lines += [f'all_model_checkpoint_paths: "{_escape(shown(p))}"' for p in all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in timestamps]
    if timestamps:
        lines.append("last_preserved_timestamp: 0.0")
    target = folder / latest_filename
    # Not tempfile.mkstemp: its file is private (0600); "x" mode keeps the usual permissions.  Written
    # under the folder's lock: a later save holding it removes the file, should this process die first.
    tmp = folder / f".{latest_filename}.{secrets.token_hex(8)}.tmp"
    with folder_lock(os.fspath(folder)):
        try:
            with open(tmp, "x", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    return target


def get_checkpoint_state(checkpoint_dir: PathLike, latest_filename: Optional[str] = None) -> Optional[CheckpointState]:
    """The state file of ``checkpoint_dir`` (None if there is none), relative paths joined to the folder."""
    folder = checked_path(checkpoint_dir, "get_checkpoint_state", "checkpoint_dir", folder_ok=True,
                           empty_ok=True)
    path = os.path.join(folder, checked_path(latest_filename or CHECKPOINT_STATE_FILE, "get_checkpoint_state",
                                              "latest_filename"))
    if not os.path.isfile(path):
        return None
    state = CheckpointState()
    with open(path, "rb") as f:
        raw = f.read()
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"checkpoint state file {path} is not a text file (byte {raw[exc.start]:#04x} at offset "
                         f"{exc.start} is not UTF-8): it is corrupt, or not a state file; remove it or write "
                         "it again (Saver.save writes one)") from None
    if "\0" in content:
        raise ValueError(f"checkpoint state file {path} holds a NUL byte at offset {content.index(chr(0))}: it is "
                         "corrupt, or not a state file; remove it or write it again (Saver.save writes one)")
    for number, line in enumerate(content.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        try:
            if key in ("model_checkpoint_path", "all_model_checkpoint_paths"):
                if not (sep and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"):
                    raise ValueError("expected a quoted string")
                text = _unescape(value[1:-1])
                if "\0" in text or not text:
                    raise ValueError("a checkpoint path must be non-empty and hold no NUL byte")
                text = text if os.path.isabs(text) else os.path.join(folder, text)
                if key == "model_checkpoint_path":
                    state.model_checkpoint_path = text
                else:
                    state.all_model_checkpoint_paths.append(text)
            elif key == "all_model_checkpoint_timestamps":
                state.all_model_checkpoint_timestamps.append(float(value))
            elif key == "last_preserved_timestamp":
                state.last_preserved_timestamp = float(value)
            else:
                raise ValueError(f"unknown field '{key}'")
        except (ValueError, UnicodeError) as exc:
            raise ValueError(f"checkpoint state file {path}, line {number}: {exc}: {line!r}") from None
    return state


def latest_checkpoint(checkpoint_dir: PathLike, latest_filename: Optional[str] = None) -> Optional[str]:
    """The prefix of the newest checkpoint the state file in ``checkpoint_dir``
    names, or None when there is none (or its files are gone).  A save to
    the folder that was killed after its commit is finished first (see the
    module doc)."""
    folder = checked_path(checkpoint_dir, "latest_checkpoint", "checkpoint_dir", folder_ok=True,
                           empty_ok=True) or "."
    if os.path.isdir(folder):
        settle(folder)
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix = state.model_checkpoint_path
    return prefix if checkpoint_exists(prefix) else None
