"""``GET /api/launch/<i>/planes/<t>`` -> ``PlanesPayload``: every plane of a tensor of rank 3 or more along one
outer dim, side by side (small multiples), for the same selection as the tensor view.

A batch of matrices, a stack of attention heads, a (C, H, W) image: a kernel that handles one plane per
program shows its structure only when the planes are seen together. Each panel is the tensor view's plane
(tensormap) with the outer dim ``dim`` fixed at the panel's index and every other dim fixed by ``index``; its
cells are the tensor view's (tensorview.plane_cells), so the frontend colours them by access, program,
writers or value as it colours the single plane, and outlines the same evidence on them.

Bounded as the tensor view is: at most MAX_PANELS panels from ``first`` on (the rest are counted, and the
page steps through them), every panel downsampled to its share of MAX_PLANE_CELLS cells, and the answer
under MAX_TENSOR_BYTES (columns dropped in the tensor view's order past it, named in ``dropped``).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .evidence import halo
from .limits import MAX_PANELS, MAX_PLANE_CELLS, MAX_TENSOR_BYTES
from .lookup import TraceIndex
from .payload import ApiError, clip, encode
from .tensormap import PlaneError, invertible, locate, make_plane, view_index
from .tensorview import elements, plane_cells, slice_of

MIN_PANEL_CELLS = 256       # a panel is never drawn coarser than 16 x 16 cells


def outer_dim(rank: int, row_dim: int, col_dim: int) -> int:
    """The default dim the panels step along: the first dim drawn as neither rows nor columns."""
    return next(d for d in range(rank) if d not in (row_dim, col_dim))


def planes_payload(ti: TraceIndex, i: int, t: int, rows: np.ndarray, cache_key, selection: dict,
                   row_dim: Optional[int] = None, col_dim: Optional[int] = None, dim: Optional[int] = None,
                   index: Optional[tuple] = None, first: int = 0) -> str:
    """The JSON text of the planes route (see contract.py)."""
    ix = ti.launch(i)
    info = ix.launch.tensors[t]
    shape = tuple(int(s) for s in info.shape)
    rank = len(shape)
    if rank < 3:
        raise ApiError(f"tensor {t} ('{info.name}') has rank {rank}: small multiples need rank 3 or more")
    row_dim = rank - 2 if row_dim is None else row_dim
    col_dim = rank - 1 if col_dim is None else col_dim
    dim = outer_dim(rank, row_dim, col_dim) if dim is None else dim
    if dim in (row_dim, col_dim) or not 0 <= dim < rank:
        raise ApiError(f"parameter 'dim' must be a dim of the rank-{rank} tensor drawn as neither rows ({row_dim}) "
                       f"nor columns ({col_dim}); got {dim}")
    build = lambda: elements(ix, rows, t)
    table = ti.cached(cache_key, build) if cache_key is not None else build()
    if index is None:
        index = slice_of(info, table) or (0,) * rank
    if len(index) != rank:
        raise ApiError(f"index has {len(index)} entries; tensor '{info.name}' has rank {rank}")
    total = shape[dim]
    if total and not 0 <= first < total:
        raise ApiError(f"parameter 'first' must be in 0..{total - 1} (dim {dim} has {total} planes), got {first}")
    ks = list(range(first, min(total, first + MAX_PANELS)))
    per = max(MIN_PANEL_CELLS, MAX_PLANE_CELLS // max(len(ks), 1))
    try:
        planes = [make_plane(info, row_dim, col_dim, _at(index, dim, k), None, None, per) for k in ks]
    except PlaneError as e:
        raise ApiError(str(e)) from None
    placed = np.zeros(len(table.offsets), dtype=bool)
    panels = []
    for k, plane, (pos, entry) in zip(ks, planes, _placements(info, planes, dim, table.offsets)):
        placed[entry] = True
        panels.append({"index": k, "plane": plane.to_dict(), "cells": plane_cells(plane, table, pos, entry),
                       "halo": halo(info, plane, table.oob_offsets)})
    payload = {
        "launch": i, "tensor": t, "name": clip(info.name), "dtype": clip(info.dtype), "shape": list(shape),
        "strides": list(info.strides), "storage_offset": info.storage_offset, "storage_size": info.storage_size,
        "selection": selection, "dim": dim, "first": first, "total": total, "panels": panels,
        "elements": int(len(table.offsets)), "elements_hidden": int((~placed).sum()),
        "oob_lanes": table.oob_lanes, "oob_examples": list(table.oob_examples), "dropped": [],
    }
    return bounded(payload)


def _at(index, dim: int, k: int) -> tuple:
    idx = list(index)
    idx[dim] = k
    return tuple(idx)


def _placements(info, planes: list, dim: int, offsets: np.ndarray):
    """(flat plane positions, element entries) per plane. The storage offsets are turned into view indices
    once for all planes where the layout allows (tensormap.locate would do it once per plane)."""
    if not planes or not invertible(info) or not len(offsets):
        for plane in planes:
            pos, entry, *_ = locate(info, plane, offsets)
            yield pos, entry
        return
    idx, ok = view_index(info, np.asarray(offsets, np.int64))
    base = planes[0]
    for d, v in enumerate(base.index):
        if d not in (base.row_dim, base.col_dim, dim) and info.shape[d] > 1:
            ok &= idx[:, d] == v
    r, c = idx[:, base.row_dim], idx[:, base.col_dim]
    for plane in planes:
        entry = np.flatnonzero(ok & (idx[:, dim] == plane.index[dim]))
        yield r[entry] * plane.cols + c[entry], entry.astype(np.int64)


def bounded(payload: dict, limit: int = MAX_TENSOR_BYTES) -> str:
    """``encode``, kept under ``limit`` bytes by dropping the tensor view's least essential columns from
    every panel at once (named in ``dropped``)."""
    body = encode(payload)
    for column in ("value", "writer", "writers", "programs", "program", "lanes"):
        if len(body) <= limit:
            break
        if any(column in p["cells"] for p in payload["panels"]):
            for p in payload["panels"]:
                p["cells"].pop(column, None)
            payload["dropped"].append(column)
            body = encode(payload)
    return body
