"""The evidence of a finding, placed where the views draw it.

A finding names storage offsets: out-of-bounds lanes past a tensor's ends, the racing elements, the
element a non-finite value was stored to. The tensor view draws elements by view index, so the offsets
inside the view are turned into view indices here (the frontend outlines them on whatever plane it
shows), and the offsets outside the storage are placed at their *would-be* position on the plane: where
the element would sit if the tensor were longer. That is the halo the tensor view draws past the
tensor's ends, so a missing mask shows up as red cells just after the last row, not as a count in a note.

The programs a finding involves are placed on the grid the same way: every one of them (for a race, its
writers and its readers apart), as runs of linear program ids, so a finding over a million programs is a few
numbers, not a million.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..model import KIND_CODE
from .lookup import LaunchIndex
from .tensormap import Plane, invertible, view_index

# Cells of halo drawn past each edge of the plane: enough to show a block's overhang of a few rows or
# columns; lanes further out are counted, not drawn.
HALO_CELLS = 8
HALO_MAX = 4096        # distinct out-of-bounds offsets placed per view
# Runs of programs a finding marks on the grid (each [first, last] linear id): at most MARK_RUNS per set, and
# MARK_RUNS_TOTAL over a launch's findings (later findings keep MARK_RUNS_MIN); past them "exact" is false.
MARK_RUNS = 256
MARK_RUNS_MIN = 8
MARK_RUNS_TOTAL = 1 << 14
EXPAND_MAX = 1 << 16   # programs taken from an extent's own ranges when the finding's rows do not name them
STORED_MAX = 4096      # elements of one store outlined for a lock released without a barrier


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


def release_stores(ix: LaunchIndex, f: dict, lin: Optional[int], row: int) -> list:
    """What a ``release_without_barrier`` finding draws: each block store its atomic follows with no barrier
    between (the extent's "stores"), as {tensor_index, name, line, elements (of them other programs access),
    seq (that store in the finding's program, the last before the atomic at op row ``row``; None when that
    program ran none), indices (view indices of the elements to outline: the extent's shared elements where
    the stores write one tensor, else what the program's store wrote; at most STORED_MAX), partial}."""
    lc, o = ix.launch, ix.launch.ops
    names = [t.name for t in lc.tensors]
    extent = f.get("extent") or {}
    shared = extent.get("elements") or {}
    stores = [s for s in extent.get("stores") or () if s.get("tensor") in names]
    mine = ix.program_rows(lin) if lin is not None else np.zeros(0, np.int64)
    before = mine[(o["kind"][mine] == KIND_CODE["store"]) & (o["seq"][mine] < o["seq"][row])] \
        if 0 <= row < lc.num_ops else mine[:0]
    files = list(lc.files)
    out = []
    for s in stores:
        t = names.index(s["tensor"])
        fid = files.index(s.get("file")) if s.get("file") in files else -1
        at = before[(o["line"][before] == int(s.get("line") or 0)) & (o["file"][before] == fid) & (o["tensor"][before] == t)]
        seq = int(o["seq"][at[-1]]) if len(at) else None
        if len(stores) == 1 and shared.get("count"):
            offs = np.concatenate([np.arange(a, b + 1) for a, b in shared.get("ranges") or ()] or [np.zeros(0, np.int64)])
            partial = int(shared.get("runs") or 0) > len(shared.get("ranges") or ())
        else:
            acc = lc.access(int(at[-1])) if len(at) else None
            offs = np.unique(acc.offsets[acc.mask]) if acc is not None and acc.offsets is not None else np.zeros(0, np.int64)
            partial = False
        info = lc.tensors[t]
        indices: list = []
        if invertible(info) and len(offs):
            idx, ok = view_index(info, np.asarray(offs[:STORED_MAX], np.int64))
            indices = idx[ok].tolist()
        out.append({"tensor_index": t, "name": s["tensor"], "line": int(s.get("line") or 0),
                    "elements": int(s.get("elements") or 0), "seq": seq, "indices": indices,
                    "partial": partial or len(offs) > STORED_MAX})
    return out


def grid_marks(ix: LaunchIndex, f: dict, rows, budget: int = MARK_RUNS) -> dict:
    """Every program of finding ``f`` (its report dict) as runs of linear ids (x fastest, as the grid
    numbers them): {"count", "runs", "ranges": [[first, last]] (at most ``budget`` runs), "exact" (the
    ranges hold every program involved), "writers" / "readers": the same for a race's two sides, else None}.
    ``rows``: the op rows the finding counts against, one per program (``Finding.attributed_rows``); where
    they do not name every program of the extent, the extent's own lists fill in."""
    extent = f.get("extent") or {}
    ext = extent.get("programs") or {}
    lin = np.asarray(ix.lin[np.asarray(rows, np.int64)] if len(rows) else [], np.int64)
    want = ext.get("count")
    if want is None or len(np.unique(lin)) != want:      # the rows do not name them all: the extent's lists
        extra = [p for key in ("writers", "readers") for p in (extent.get(key) or {}).get("programs") or ()]
        extra += list(ext.get("first") or ()) + [f.get("program"), (f.get("other") or {}).get("program")]
        lin = np.concatenate([lin, _lins(ix, [p for p in extra if p is not None]), _expand(ix, ext.get("ranges") or ())])
    every = _runs(ix, lin, budget)
    if want is not None:
        every["count"] = max(every["count"], int(want))
        every["exact"] = every["exact"] and every["count"] == int(want)
    every["exact"] = every["exact"] and bool(extent.get("exact", True))
    side = {}
    for key in ("writers", "readers"):
        x = extent.get(key)
        if isinstance(x, dict):
            listed = _lins(ix, x.get("programs") or ())
            side[key] = _runs(ix, listed, budget)
            side[key]["count"] = max(side[key]["count"], int(x.get("count") or 0))
            side[key]["exact"] = side[key]["exact"] and side[key]["count"] == len(np.unique(listed))
        else:
            side[key] = None
    return {**every, **side}


def _lins(ix: LaunchIndex, pids) -> np.ndarray:
    gx, gy, gz = ix.grid
    p = np.asarray([list(q) + [0] * (3 - len(q)) for q in pids], np.int64).reshape(-1, 3)
    ok = np.all((p >= 0) & (p < np.array([gx, gy, gz])), axis=1)
    return p[ok, 0] + gx * (p[ok, 1] + gy * p[ok, 2])


def _expand(ix: LaunchIndex, ranges) -> np.ndarray:
    """The programs of an extent's ranges: runs of consecutive ids in the analysis' order, (x, y, z) with z
    fastest (analysis/checks/extent.py), as the grid's linear ids; at most EXPAND_MAX of them."""
    gx, gy, gz = ix.grid
    out, left = [], EXPAND_MAX
    for a, b in ranges:
        if len(a) != 3 or len(b) != 3 or left <= 0:
            continue
        lo, hi = ((int(q[0]) * gy + int(q[1])) * gz + int(q[2]) for q in (a, b))
        ids = np.arange(lo, min(hi, lo + left - 1) + 1, dtype=np.int64)
        left -= len(ids)
        x, rest = np.divmod(ids, gy * gz)
        y, z = np.divmod(rest, gz)
        out.append(x + gx * (y + gy * z))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _runs(ix: LaunchIndex, lin: np.ndarray, budget: int) -> dict:
    lin = np.unique(lin[(lin >= 0) & (lin < ix.num_programs)])
    if not len(lin):
        return {"count": 0, "runs": 0, "ranges": [], "exact": True}
    cut = np.flatnonzero(np.diff(lin) != 1)
    lo, hi = lin[np.r_[0, cut + 1]], lin[np.r_[cut, len(lin) - 1]]
    return {"count": int(len(lin)), "runs": int(len(lo)),
            "ranges": [[int(a), int(b)] for a, b in zip(lo[:budget], hi[:budget])], "exact": len(lo) <= budget}


def _int_or_none(v) -> Optional[int]:
    return int(v) if isinstance(v, (int, np.integer)) else None
