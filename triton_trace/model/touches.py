"""Element provenance: every recorded access to one element of a tensor, in execution order.

For a wrong output element this answers "which program wrote it, at which line, with what value" (and who
read it before and after). Aliasing views count: an argument that shares the element's storage (``x`` and
``x[1:]``) reaches it at the same storage offset. Lanes are decoded a bounded batch of op rows at a time,
so a query on a large trace stays within a few tens of MB.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ..errors import TraceUsageError

BATCH_LANES = 1 << 22        # lanes decoded at once


@dataclass(frozen=True)
class Touch:
    """One active lane of one op that addressed the element."""
    order: int                 # position in execution order (programs as they ran, then ops in program order)
    program: tuple
    seq: int                   # the op's number in its program
    kind: str                  # load, store, atomic_add, ...
    tensor: str                # the argument the op went through (an alias of the element's tensor, maybe)
    file: Optional[str]
    line: int
    lane: tuple                # the lane's position in the op's block
    value: Optional[float]     # loaded / stored / atomic operand value, when recorded

    def to_dict(self) -> dict:
        return {"order": self.order, "program": list(self.program), "seq": self.seq, "kind": self.kind,
                "tensor": self.tensor, "file": self.file, "line": self.line, "lane": list(self.lane),
                "value": self.value}


def element_offset(info, index: Union[int, tuple]) -> int:
    """The storage offset of ``info[index]`` (a TensorInfo and a view index), checked against the shape."""
    idx = (index,) if isinstance(index, (int, np.integer)) else tuple(index)
    if len(idx) != len(info.shape) or not all(-n <= int(i) < n for i, n in zip(idx, info.shape)):
        raise TraceUsageError(f"index {index!r} is not an element of '{info.name}' (shape {tuple(info.shape)})")
    idx = tuple(int(i) % n for i, n in zip(idx, info.shape))
    return int(info.storage_offset + sum(i * s for i, s in zip(idx, info.strides)))


def execution_rank(launch, programs: np.ndarray) -> np.ndarray:
    """Each program's position among the programs as they ran (``recorded_ids``; without it, (x, y, z)
    order); programs the launch did not record rank last."""
    ids = launch.recorded_ids if launch.recorded_ids is not None and len(launch.recorded_ids) else launch.programs()
    dims = np.maximum(np.asarray(launch.grid, np.int64), 1)
    linear = lambda a: (np.asarray(a, np.int64).reshape(-1, 3) * np.array([dims[1] * dims[2], dims[2], 1])).sum(axis=1)
    known = linear(ids)
    order = np.argsort(known, kind="stable")
    want = linear(programs)
    at = np.clip(np.searchsorted(known[order], want), 0, max(len(known) - 1, 0))
    found = len(known) > 0
    hit = (known[order][at] == want) if found else np.zeros(len(want), bool)
    return np.where(hit, order[at] if found else 0, len(known))


def touches(launch, tensor: Union[str, int], index: Union[int, tuple], kinds: tuple, memory_kinds: int) -> list:
    """Every active lane of every recorded load, store and atomic that addressed ``tensor[index]``, in
    execution order, with its program, op, line and value. ``kinds``: the op-kind names (model.KINDS), the
    first ``memory_kinds`` of them memory operations."""
    t = launch.tensor_index(tensor) if isinstance(tensor, str) else int(tensor)
    info = launch.tensors[t]
    target = element_offset(info, index)
    group = [k for k, other in enumerate(launch.tensors)
             if k == t or (info.storage >= 0 and other.storage == info.storage)]
    o = launch.ops
    rows = np.flatnonzero(np.isin(o["tensor"], group) & (o["kind"] < memory_kinds) & (o["lane_count"] > 0))
    rows = rows[np.lexsort((o["seq"][rows], execution_rank(launch, o["program"][rows])))]
    found = []
    start = 0
    while start < len(rows):
        counts = o["lane_count"][rows[start:]].astype(np.int64)
        take = max(1, int(np.searchsorted(np.cumsum(counts), BATCH_LANES)))
        batch = rows[start:start + take]
        start += take
        offsets, mask = launch.lanes.gather(o["lane_start"][batch], o["lane_count"][batch])
        hit = np.flatnonzero((offsets == target) & mask)
        if not len(hit):
            continue
        ends = np.cumsum(o["lane_count"][batch].astype(np.int64))
        for lane_at in hit:
            r = int(batch[np.searchsorted(ends, lane_at, side="right")])
            lane = int(lane_at - (ends[np.searchsorted(ends, lane_at, side="right")] - o["lane_count"][r]))
            found.append(_touch(launch, r, lane, kinds))
    return [Touch(order=k, **f) for k, f in enumerate(found)]


def _touch(launch, r: int, lane: int, kinds) -> dict:
    o = launch.ops
    ndim = int(o["ndim"][r])
    shape = tuple(int(s) for s in o["shape"][r][:ndim]) or (1,)
    value = None
    vd = int(o["value_dtype"][r])
    if vd >= 0:
        dt = np.dtype(launch.value_dtypes[vd])
        at = int(o["value_start"][r]) + lane * dt.itemsize
        value = np.frombuffer(launch.values[at:at + dt.itemsize].tobytes(), dtype=dt)[0].item()
    f = int(o["file"][r])
    return {"program": tuple(int(v) for v in o["program"][r]), "seq": int(o["seq"][r]), "kind": kinds[int(o["kind"][r])],
            "tensor": launch.tensors[int(o["tensor"][r])].name,
            "file": launch.files[f] if 0 <= f < len(launch.files) else None, "line": int(o["line"][r]),
            "lane": tuple(int(v) for v in np.unravel_index(lane, shape)), "value": value}
