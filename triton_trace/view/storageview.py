"""``GET /api/launch/<i>/storage/<t>`` -> ``StoragePayload``: a tensor argument's storage in storage order, which
of its elements the view's logical elements cover, and what a selection of ops read and wrote there.

A view (shape, strides, storage offset) covers some elements of its storage and leaves the rest to padding:
a padded row stride leaves a tail after every row, a slice leaves elements before and after it and between
its rows, a transposed view covers every element in another order, an expanded (stride 0) dimension covers
one element many times. The storage is drawn as a 1-D plane (tensormap) wrapped every ``wrap`` elements, by
default the row pitch (the smallest stride above 1), so a padded row is a row of the drawing and its padding
the row's tail; a transposed view's rows are then its columns.

The accesses are the tensor view's (tensorview.elements): of this argument and of every argument aliasing
its storage with the same element size (``x`` and ``x[1:]`` reach one element at one offset), drawn at their
storage offsets, and out-of-bounds lanes at their would-be offsets past the storage's ends (evidence.halo).
Bounded as the tensor view is: at most MAX_PLANE_CELLS cells, downsampled or windowed; which drawn elements
the view covers is tested element by element, sampled one element per cell past COVER_LIMIT (and said so).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

import numpy as np

from ..model import TensorInfo
from .cellvalues import cell_values
from .evidence import halo
from .limits import MAX_TENSOR_BYTES
from .lookup import LaunchIndex, TraceIndex
from .payload import clip, encode
from .tensormap import auto_window, invertible, locate, make_plane, view_index
from .tensorview import block_width, cell_runs, elements, plane_cells

COVER_LIMIT = 1 << 22      # storage elements of a window tested one by one for coverage (then one per cell)
UNIQUE_LIMIT = 1 << 22     # view elements enumerated for a layout whose elements share storage
MAX_PITCH_WRAP = 1 << 16   # a unit-stride dimension longer than this is not a row of the drawing


def reduced(info: TensorInfo) -> TensorInfo:
    """The view without its size-1 and stride-0 dimensions: it covers the same storage elements (an
    expanded dimension repeats them). A view with an empty dimension covers none: shape (0,)."""
    if any(int(s) == 0 for s in info.shape):
        return replace(info, shape=(0,), strides=(1,))
    keep = [d for d, (s, st) in enumerate(zip(info.shape, info.strides)) if int(s) > 1 and int(st) != 0]
    return replace(info, shape=tuple(int(info.shape[d]) for d in keep), strides=tuple(int(info.strides[d]) for d in keep))


def _member(info: TensorInfo):
    """A function telling which storage offsets (int64 array) a logical element of the view covers, or None
    when that cannot be told within UNIQUE_LIMIT (a huge overlapping layout)."""
    r = reduced(info)
    if r.shape == (0,):
        return lambda off: np.zeros(len(off), dtype=bool)
    if invertible(r):
        return lambda off: view_index(r, off)[1]
    if math.prod(r.shape) > UNIQUE_LIMIT:
        return None
    covered = np.unique(r.view_offsets().reshape(-1))
    return lambda off: covered[np.clip(np.searchsorted(covered, off), 0, len(covered) - 1)] == off


def layout(info: TensorInfo) -> dict:
    """What the view does with its storage, in elements: the span it reaches ([lowest, highest] offset), the
    distinct storage elements its logical elements cover, and the padding (storage elements none covers)
    before the span, in gaps inside it and after it; None where it cannot be told (see ``_member``)."""
    shape, strides = [int(s) for s in info.shape], [int(s) for s in info.strides]
    numel, size = math.prod(shape), int(info.storage_size)
    r = reduced(info)
    if numel == 0:
        covered, span = 0, None
    else:
        lo = int(info.storage_offset) + sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
        hi = int(info.storage_offset) + sum((s - 1) * st for s, st in zip(shape, strides) if st > 0)
        span = [lo, hi]
        if invertible(r):
            covered = math.prod(r.shape)
        elif math.prod(r.shape) <= UNIQUE_LIMIT:
            covered = int(len(np.unique(r.view_offsets())))
        else:
            covered = None
    before = min(max(span[0], 0), size) if span else size
    after = min(max(size - span[1] - 1, 0), size) if span else 0
    gaps = (span[1] - span[0] + 1) - covered if span and covered is not None else (0 if not span else None)
    padding = before + gaps + after if gaps is not None else None
    contiguous_strides, step = [], 1
    for s in reversed(shape):
        contiguous_strides.insert(0, step)
        step *= max(s, 1)
    big = [d for d, s in enumerate(shape) if s > 1]
    return {"elements": numel, "covered": covered, "span": span, "padding": padding,
            "padding_bytes": padding * int(info.elem_bytes) if padding is not None else None,
            "before": before, "gaps": gaps, "after": after,
            "expanded": [d for d in big if strides[d] == 0],
            # the dimensions from the outermost in storage to the innermost (the largest stride first)
            "order": sorted(big, key=lambda d: (-abs(strides[d]), d)),
            "contiguous": all(strides[d] == contiguous_strides[d] for d in big),
            "overlapping": numel > 0 and not invertible(r)}


def default_wrap(info: TensorInfo, ix: LaunchIndex, rows: np.ndarray) -> Optional[int]:
    """Elements per drawn row: the row pitch (the smallest stride above 1 of a dimension longer than 1);
    without one, a matrix's unit-stride row length (an expanded matrix), else the kernel's block size or
    about a square (make_plane's default)."""
    dims = [(int(s), abs(int(st))) for s, st in zip(info.shape, info.strides) if int(s) > 1]
    pitches = [st for _, st in dims if st > 1]
    if pitches:
        return min(pitches)
    unit = [s for s, st in dims if st == 1]
    if len(info.shape) >= 2 and unit and unit[0] <= MAX_PITCH_WRAP:
        return unit[0]
    return block_width(ix, rows, int(info.storage_size))


def cover(info: TensorInfo, plane) -> dict:
    """Which drawn storage elements the view's logical elements cover, as runs of cells in row-major order
    ``[first cell, cells, fill]`` (fill: the share of a downsampled cell's elements covered). Past
    COVER_LIMIT elements one element per cell row (then column) is tested: ``sampled``. ``known`` is false
    when coverage cannot be told (then there are no runs)."""
    member = _member(info)
    out = {"known": member is not None, "sampled": False, "runs": []}
    if member is None or plane.rows == 0 or plane.cols == 0:
        return out
    size, wrap = int(info.storage_size), max(int(plane.wrap), 1)
    step_r = plane.fr if plane.rows * plane.cols > COVER_LIMIT else 1
    step_c = plane.fc if -(-plane.rows // step_r) * plane.cols > COVER_LIMIT else 1
    out["sampled"] = step_r > 1 or step_c > 1
    cols = np.arange(0, plane.cols, step_c, dtype=np.int64)
    n_cells = plane.cell_rows * plane.cell_cols
    hits, seen = np.zeros(n_cells), np.zeros(n_cells)
    chunk = max(1, (1 << 20) // max(len(cols), 1)) * step_r
    for start in range(0, plane.rows, chunk):
        rows = np.arange(start, min(plane.rows, start + chunk), step_r, dtype=np.int64)
        off = (plane.r0 + rows)[:, None] * wrap + plane.c0 + cols[None, :]
        cell = ((rows // plane.fr)[:, None] * plane.cell_cols + (cols // plane.fc)[None, :]).reshape(-1)
        off = off.reshape(-1)
        inside = off < size
        seen += np.bincount(cell[inside], minlength=n_cells)
        hits += np.bincount(cell[inside], weights=member(off[inside]), minlength=n_cells)
    fill = np.round(np.where(seen > 0, hits / np.maximum(seen, 1), 0.0), 3)
    cut = np.flatnonzero(np.diff(fill) != 0) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [n_cells]])
    out["runs"] = [[int(a), int(b - a), float(fill[a])] for a, b in zip(starts, ends) if fill[a] > 0]
    return out


def alias_rows(ix: LaunchIndex, t: int, rows: np.ndarray, selection: dict) -> tuple:
    """(the selection's rows on tensor ``t`` and on every argument aliasing its storage with the same element
    size and extent, in the views' (program, seq) order; the aliases' indices). An op selection is one op."""
    lc = ix.launch
    info = lc.tensors[t]
    aliases = [k for k, o in enumerate(lc.tensors) if k != t and info.storage >= 0 and o.storage == info.storage
               and o.elem_bytes == info.elem_bytes and o.storage_size == info.storage_size]
    if not aliases or selection["mode"] == "op":
        return rows, aliases
    lin = ix.linear(selection["program"]) if selection["mode"] == "program" else None
    more = np.concatenate([rows] + [ix.tensor_rows(k, lin) for k in aliases])
    rank = np.empty(lc.num_ops, dtype=np.int64)
    rank[ix.order] = np.arange(len(ix.order))
    return more[np.argsort(rank[more], kind="stable")], aliases


def storage_payload(ti: TraceIndex, i: int, t: int, rows: np.ndarray, cache_key, selection: dict,
                    wrap: Optional[int] = None, window=None) -> str:
    """The JSON text of ``GET /api/launch/<i>/storage/<t>`` (see contract.py). ``window``: None (the whole
    storage), "auto" (zoom to the selection when the whole storage would be downsampled) or (r0, r1, c0, c1)
    in drawn rows and columns."""
    ix = ti.launch(i)
    info = ix.launch.tensors[t]
    rows, aliases = alias_rows(ix, t, rows, selection)
    if aliases and cache_key is not None:
        cache_key = ("storage-elements", i, t)
    build = lambda: elements(ix, rows, t)
    table = ti.cached(cache_key, build) if cache_key is not None else build()
    size = int(info.storage_size)
    flat = TensorInfo(info.name, info.dtype, (size,), (1,), 0, size, info.elem_bytes)
    if wrap is None:
        wrap = default_wrap(info, ix, rows)
    plane = make_plane(flat, None, None, None, wrap, None if window == "auto" else window)
    pos, entry, placed, r, c = locate(flat, plane, table.offsets)
    if window == "auto":
        zoom = auto_window(plane, r, c)
        if zoom is not None:
            plane = make_plane(flat, None, None, None, wrap, zoom)
            pos, entry, placed, r, c = locate(flat, plane, table.offsets)
    payload = {
        "launch": i, "tensor": t, "name": clip(info.name), "dtype": clip(info.dtype), "shape": list(info.shape),
        "strides": list(info.strides), "storage_offset": info.storage_offset, "storage_size": size,
        "elem_bytes": info.elem_bytes, "aliases": [clip(ix.launch.tensors[k].name) for k in aliases],
        "layout": layout(info), "plane": plane.to_dict(), "selection": selection,
        "elements": int(len(table.offsets)), "elements_hidden": int((~placed).sum()),
        "oob_lanes": table.oob_lanes, "oob_examples": list(table.oob_examples),
        "halo": halo(flat, plane, table.oob_offsets), "cover": cover(info, plane),
        "cells": cell_runs(plane_cells(plane, table, pos, entry)), "values": cell_values(plane, table, pos, entry),
        "dropped": [],
    }
    return bounded(payload)


def bounded(payload: dict, limit: int = MAX_TENSOR_BYTES) -> str:
    """``encode``, kept under ``limit`` bytes: runs are few for any regular layout, but a scattered one past
    it loses its cover runs, then its values, then its access runs (named in ``dropped``)."""
    body = encode(payload)
    for key in ("cover", "values", "cells"):
        if len(body) <= limit:
            break
        if key == "cover":
            payload["cover"]["runs"] = []
        elif key == "values":
            payload["values"] = None
        else:
            payload["cells"] = []
        payload["dropped"].append(key)
        body = encode(payload)
    return body
