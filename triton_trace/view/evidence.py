"""The evidence of a finding, placed where the views draw it.

A finding names storage offsets: out-of-bounds lanes past a tensor's ends, the racing elements, the
element a non-finite value was stored to. The tensor view draws elements by view index, so the offsets
inside the view are turned into view indices here (the frontend outlines them on whatever plane it
shows), and the offsets outside the storage are placed at their *would-be* position on the plane: where
the element would sit if the tensor were longer. That is the halo the tensor view draws past the
tensor's ends, so a missing mask shows up as red cells just after the last row, not as a count in a note.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .lookup import LaunchIndex
from .tensormap import Plane, invertible, view_index

# Cells of halo drawn past each edge of the plane: enough to show a block's overhang of a few rows or
# columns; lanes further out are counted, not drawn.
HALO_CELLS = 8
HALO_MAX = 4096        # distinct out-of-bounds offsets placed per view


def halo(info, plane: Plane, offsets: np.ndarray) -> dict:
    """Where out-of-bounds storage ``offsets`` would sit on ``plane``, in cells relative to the window
    (rows and columns may be negative or past ``cell_rows`` / ``cell_cols``): {row, col, offset} per
    distinct cell (the first offset that lands there) and ``hidden``, the offsets not placed (too far out,
    in another slice, or a layout without a would-be position)."""
    offsets = np.unique(np.asarray(offsets, dtype=np.int64))
    empty = {"row": [], "col": [], "offset": [], "hidden": int(len(offsets))}
    if not len(offsets) or not plane.shape or plane.rows == 0 or not invertible(info):
        return empty
    idx, _ = view_index(info, offsets)
    if plane.wrap:
        r, c = np.divmod(idx[:, 0], plane.wrap)
        keep = np.ones(len(offsets), dtype=bool)
    else:
        keep = np.ones(len(offsets), dtype=bool)
        for d, i in enumerate(plane.index):
            if d not in (plane.row_dim, plane.col_dim) and info.shape[d] > 1:
                keep &= idx[:, d] == i
        r = idx[:, plane.row_dim] if plane.row_dim is not None else np.zeros(len(offsets), np.int64)
        c = idx[:, plane.col_dim]
    cr = np.floor_divide(r - plane.r0, plane.fr)
    cc = np.floor_divide(c - plane.c0, plane.fc)
    keep &= (cr >= -HALO_CELLS) & (cr < plane.cell_rows + HALO_CELLS)
    keep &= (cc >= -HALO_CELLS) & (cc < plane.cell_cols + HALO_CELLS)
    cr, cc, off = cr[keep], cc[keep], offsets[keep]
    key = (cr + HALO_CELLS) * (plane.cell_cols + 2 * HALO_CELLS + 1) + (cc + HALO_CELLS)
    _, first = np.unique(key, return_index=True)
    first = np.sort(first)
    return {"row": cr[first].tolist(), "col": cc[first].tolist(), "offset": off[first].tolist(),
            "hidden": int(len(offsets) - keep.sum())}


def finding_evidence(ix: LaunchIndex, f: dict) -> dict:
    """What the finding card needs beyond the finding's text: the programs involved (a race names two),
    the tensor's position among the launch's tensors, and the offending offsets with their view indices
    (None for an offset outside the view: out of bounds, or padding)."""
    tensors = ix.launch.tensors
    t = next((k for k, info in enumerate(tensors) if info.name == f.get("tensor")), None)
    offsets = [int(v) for v in f.get("offsets") or ()]
    indices: list = [None] * len(offsets)
    outside = [False] * len(offsets)
    if t is not None and offsets:
        info = tensors[t]
        arr = np.asarray(offsets, dtype=np.int64)
        outside = ((arr < 0) | (arr >= info.storage_size)).tolist()
        if invertible(info):
            idx, ok = view_index(info, arr)
            indices = [row.tolist() if good else None for row, good in zip(idx, ok)]
    other = f.get("other") or {}
    programs = [p for p in (f.get("program"), other.get("program")) if p is not None]
    return {"programs": [list(p) for p in programs], "tensor_index": t, "offsets": offsets,
            "indices": indices, "outside": outside, "valid_range": f.get("valid_range"),
            "other_line": _int_or_none(other.get("line"))}


def _int_or_none(v) -> Optional[int]:
    return int(v) if isinstance(v, (int, np.integer)) else None
