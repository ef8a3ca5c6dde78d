"""``GET /api/launch/<i>/tiles/<x>,<y>,<z>?step=`` -> ``TilesPayload``: one program's tiles in every tensor it
accessed, side by side (a matmul's A panel, B panel and C tile), one step of its loop at a time.

The trace records ops, not loop trips: Triton's interpreter runs a kernel's loop as plain Python, and
nothing marks where an iteration starts. The trips are read back from the program's op sequence. A load or
store of one line and tensor that runs n > 1 times is in a loop and its k-th run is in trip k; a loop of T
trips (T: the commonest run count among the repeated ones, the smaller on a tie, so an outer loop) runs
such a line a multiple of T times, and every n // T runs make one trip (two loads on one line, or an inner
loop). Ops that run once are outside the loop, as are lines whose count is no multiple of T (a second loop
of another length): those are drawn as context, not stepped. A program with no repeated line is stepped
through its memory ops one at a time, in op order (``by: "op"``).

Each tensor is drawn on its own plane (tensormap), the whole tensor when it fits in MAX_TILE_CELLS cells,
else a window around everything the program touched in it, so the frame stays put while the steps change.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .cellvalues import cell_values
from .evidence import halo
from .limits import MAX_OPS, MAX_TENSOR_BYTES, MAX_TILE_CELLS, MAX_TILE_TENSORS
from .lookup import LaunchIndex, TraceIndex
from .payload import ApiError, clip, encode
from .tensormap import auto_window, cells, locate, make_plane
from .tensorview import block_width, cell_runs, elements, plane_cells, runs, slice_of


def infer_trips(ops: dict, rows: np.ndarray) -> tuple:
    """(the loop trip of each of a program's memory-op ``rows``, in execution order, -1 outside the loop;
    the loop's trip count T, 0 without a repeated line). See the module's note."""
    n = len(rows)
    if n == 0:
        return np.zeros(0, np.int64), 0
    key = np.stack([ops[c][rows].astype(np.int64) for c in ("file", "line", "kind", "tensor")], axis=1)
    _, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    first = np.searchsorted(inv[order], np.arange(len(counts)))
    occ = np.empty(n, np.int64)
    occ[order] = np.arange(n) - first[inv[order]]
    repeated = counts[counts > 1]
    if not len(repeated):
        return np.full(n, -1, np.int64), 0
    values, freq = np.unique(repeated, return_counts=True)
    T = int(values[freq == freq.max()].min())
    cnt = counts[inv]
    stepped = (cnt > 1) & (cnt % T == 0)
    return np.where(stepped, occ // np.maximum(cnt // T, 1), -1), T


def _tile(ix: LaunchIndex, t: int, trows: np.ndarray, chosen: np.ndarray) -> dict:
    """One tensor's tile: the plane framing everything the program touched in it, the cells the chosen
    rows touched (kinds: 1 read, 2 written), the rest of the program's cells as context."""
    lc = ix.launch
    info = lc.tensors[t]
    whole = elements(ix, trows, t)
    step = elements(ix, trows[chosen], t) if not chosen.all() else whole
    index = slice_of(info, whole)
    wrap = block_width(ix, trows, int(info.shape[0])) if len(info.shape) == 1 else None
    plane = make_plane(info, None, None, index, wrap, None, MAX_TILE_CELLS)
    pos, _, _, r, c = locate(info, plane, whole.offsets)
    zoom = auto_window(plane, r, c)
    if zoom is not None:
        plane = make_plane(info, None, None, index, wrap, zoom, MAX_TILE_CELLS)
        pos, _, _, r, c = locate(info, plane, whole.offsets)
    spos, sentry, splaced, sr, sc = locate(info, plane, step.offsets)
    drawn = plane_cells(plane, step, spos, sentry)
    context = np.setdiff1d(np.unique(cells(plane, pos)), np.asarray(drawn["cell"], np.int64))
    box = [int(sr.min()), int(sr.max()), int(sc.min()), int(sc.max())] if len(sr) else None
    first = last = None
    if plane.wrap and len(sr):
        flat = sr * plane.wrap + sc
        first, last = int(flat.min()), int(flat.max())
    return {"tensor": t, "name": clip(info.name), "dtype": clip(info.dtype), "shape": list(info.shape),
            "strides": list(info.strides), "plane": plane.to_dict(),
            "cells": cell_runs(drawn), "values": cell_values(plane, step, spos, sentry), "context": runs(context),
            "box": box, "first": first, "last": last,
            "elements": int(len(step.offsets)), "elements_hidden": int((~splaced).sum()),
            "ops": int(chosen.sum()), "oob_lanes": step.oob_lanes, "halo": halo(info, plane, step.oob_offsets)}


def tiles_payload(ti: TraceIndex, i: int, pid: tuple, step: Optional[int]) -> str:
    """The JSON text of ``GET /api/launch/<i>/tiles/<pid>?step=`` (see contract.py); ``step`` None: every step."""
    ix = ti.launch(i)
    o = ix.launch.ops
    rows = ix.program_rows(ix.linear(pid))
    rows = rows[ix.memory[rows] & (o["tensor"][rows] >= 0)]
    trip, T = infer_trips(o, rows)
    by, steps = ("trip", T) if T >= 2 else ("op", len(rows))
    at = trip if by == "trip" else np.arange(len(rows))
    if step is not None and not 0 <= step < steps:
        raise ApiError(f"program {tuple(pid)} has {steps} {by}s to step through; there is no step {step}", 404)
    chosen = np.ones(len(rows), bool) if step is None else at == step
    order = list(dict.fromkeys(int(t) for t in o["tensor"][rows]))       # tensors in order of first access
    tiles = []
    for t in order[:MAX_TILE_TENSORS]:
        mine = o["tensor"][rows] == t
        tiles.append(_tile(ix, t, rows[mine], chosen[mine]))
    shown = rows[chosen][:MAX_OPS]
    return bounded({
        "launch": i, "program": list(pid), "by": by, "steps": int(steps), "step": step, "trips": T,
        "ops": {"seq": o["seq"][shown].tolist(), "kind": o["kind"][shown].tolist(), "tensor": o["tensor"][shown].tolist(),
                "line": o["line"][shown].tolist(), "trip": trip[chosen][:MAX_OPS].tolist()},
        "total_ops": int(chosen.sum()), "outside": int((trip < 0).sum()) if by == "trip" else 0,
        "tensors": tiles, "tensors_total": len(order), "dropped": []})


def bounded(payload: dict, limit: int = MAX_TENSOR_BYTES) -> str:
    """``encode``, kept under ``limit`` bytes: a tile is a few runs a row, but scattered accesses over many
    tensors past it lose their context runs, then their values, then the last tensors (named in ``dropped``)."""
    body = encode(payload)
    for key, empty in (("context", []), ("values", None)):
        if len(body) <= limit:
            break
        for tile in payload["tensors"]:
            tile[key] = empty
        payload["dropped"].append(key)
        body = encode(payload)
    while len(body) > limit and payload["tensors"]:
        payload["dropped"].append(payload["tensors"].pop()["name"])
        body = encode(payload)
    return body
