"""Device specifications ("/job:worker/task:1/device:CPU:0"), parsed and
written as TensorFlow's DeviceSpec does."""
from __future__ import annotations

import functools

__all__ = ["device_fields", "device_string"]

_DEVICE_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPU"})


@functools.lru_cache(maxsize=256)
def device_fields(spec: str) -> tuple:
    """(job, replica, task, device type, index) of a device string, parsed as
    TensorFlow's DeviceSpec parses it ("/cpu:0" and "/device:CPU:0" alike)."""
    job = replica = task = kind = index = None
    for part in spec.split("/"):
        y = part.split(":")
        if y == [""]:
            continue
        if len(y) == 2 and y[0] in ("job", "replica", "task"):
            if y[0] == "job":
                job = y[1]
            elif y[0] == "replica":
                replica = int(y[1])
            else:
                task = int(y[1])
        elif len(y) in (1, 2) and y[0].upper() in _DEVICE_TYPES and kind is None:
            kind, index = y[0].upper(), (int(y[1]) if len(y) == 2 and y[1] != "*" else None)
        elif len(y) == 3 and y[0] == "device" and kind is None:
            kind = y[1].upper() if y[1] in ("cpu", "gpu") else y[1]
            index = int(y[2]) if y[2] != "*" else None
        else:
            raise ValueError(f"'{spec}' is not a device specification (part '{part}')")
    return job, replica, task, kind, index


def device_string(fields: tuple) -> str:
    """TensorFlow's canonical text of device fields ("/job:w/device:CPU:0")."""
    job, replica, task, kind, index = fields
    out = ""
    if job is not None:
        out += f"/job:{job}"
    if replica is not None:
        out += f"/replica:{replica}"
    if task is not None:
        out += f"/task:{task}"
    if kind is not None:
        out += f"/device:{kind}:{'*' if index is None else index}"
    return out
