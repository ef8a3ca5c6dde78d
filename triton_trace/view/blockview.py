"""``GET /api/launch/<i>/block/<x>,<y>,<z>/<seq>`` -> ``BlockPayload``: one op's block in its own shape.

Every lane of the op in row-major block order: the storage offset it addressed, whether it was active,
whether it fell outside its tensor, the element's view index and the value (when recorded). A block of
more than ``MAX_BLOCK_LANES`` lanes is cut to its first lanes (and says so); blocks of rank 3 and more are
drawn with their leading dims stacked as rows.
"""
from __future__ import annotations

from typing import Optional, TypedDict

import numpy as np

from ..model import KINDS, MEMORY_KINDS
from ..model.layout import invertible, view_index
from .limits import MAX_BLOCK_LANES
from .lookup import TraceIndex
from .payload import clip, json_values, op_row


class BlockPayload(TypedDict):
    program: list
    seq: int
    kind: str
    tensor: Optional[str]
    shape: list           # the op's block shape
    grid: list            # [rows, cols] the block is drawn as
    lanes: int            # lanes of the op (0: not a memory op)
    active: int
    oob: int              # active lanes outside the tensor's storage
    truncated: bool
    offset: list          # per drawn lane: storage offset
    mask: list            # 1 active
    out: list             # 1 outside the tensor
    index: Optional[list] # view index of the element, or None (outside the view); None for huge tensors
    value: Optional[list] # the lane's value ("nan", "inf", "-inf" as strings), None where not recorded


def _view_index(info, offsets: np.ndarray) -> Optional[list]:
    """The view index of each storage offset (None where the view does not hold it); None for a layout
    whose elements share storage (a broadcast view), where an offset has no single index."""
    if not invertible(info):
        return None
    idx, ok = view_index(info, offsets)
    return [row if good else None for row, good in zip(idx.tolist(), ok.tolist())]


def block_payload(ti: TraceIndex, i: int, pid: tuple, seq: int) -> BlockPayload:
    ix = ti.launch(i)
    lc, o = ix.launch, ix.launch.ops
    r = op_row(ix, pid, seq)
    kind = KINDS[int(o["kind"][r])]
    t = int(o["tensor"][r])
    ndim = int(o["ndim"][r])
    shape = [int(s) for s in o["shape"][r][:ndim]]
    base = {"program": list(pid), "seq": int(seq), "kind": kind, "tensor": clip(lc.tensors[t].name) if t >= 0 else None,
            "shape": shape}
    if int(o["kind"][r]) >= len(MEMORY_KINDS) or int(o["lane_count"][r]) == 0:
        return {**base, "grid": [0, 0], "lanes": 0, "active": 0, "oob": 0, "truncated": False, "offset": [], "mask": [],
                "out": [], "index": None, "value": None}
    n = int(o["lane_count"][r])
    drawn = min(n, MAX_BLOCK_LANES)
    offsets, mask = lc.lanes.take(int(o["lane_start"][r]), n)
    offsets, mask = offsets[:drawn], mask[:drawn]
    info = lc.tensors[t] if t >= 0 else None
    out = (offsets < 0) | (offsets >= info.storage_size) if info is not None else np.zeros(drawn, bool)
    _, values, has = ix.lane_values(np.array([r]))
    cols = shape[-1] if shape else 1
    rows = -(-drawn // max(cols, 1))
    index = _view_index(info, offsets) if info is not None else None
    return {**base, "grid": [rows, cols], "lanes": n, "active": int(mask.sum()), "oob": int((mask & out).sum()),
            "truncated": drawn < n, "offset": offsets.tolist(), "mask": mask.astype(int).tolist(),
            "out": out.astype(int).tolist(), "index": index,
            "value": [v if h else None for v, h in zip(json_values(values[:drawn]), has[:drawn].tolist())] if has.any() else None}
