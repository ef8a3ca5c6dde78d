"""The tensor view payload: which elements of one tensor a selection of ops touched, as bounded cells.

A selection is one op, every op of one program, or every op of every program on the tensor. Its active
lanes are reduced to a table of distinct storage elements (read/written, lanes, first program, a recorded
value), the table is placed on the requested plane (tensormap.py), and the plane is reduced to sparse
cells. The encoded payload is kept under ``MAX_TENSOR_BYTES``: past it, values and then program ids are
dropped and the payload says so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lookup import LaunchIndex, TraceIndex
from .payload import clip, encode, json_values
from .tensormap import Plane, auto_window, cell_sizes, cells, invertible, locate, make_plane, view_index
from .limits import MAX_TENSOR_BYTES
from .evidence import HALO_MAX, halo

OOB_EXAMPLES = 8


@dataclass(frozen=True)
class Elements:
    """Distinct in-bounds storage elements touched by a selection, sorted by offset."""
    offsets: np.ndarray     # int64
    kinds: np.ndarray       # bit 1: read, bit 2: written
    lanes: np.ndarray       # active lanes that hit the element
    program: np.ndarray     # smallest linear program id that touched it
    programs: np.ndarray    # number of distinct programs that touched it
    value: np.ndarray       # float64: the last recorded value (NaN when none was recorded)
    has_value: np.ndarray   # bool
    writer: np.ndarray      # linear id of the program of the last write (row order), -1 when none wrote it
    writers: np.ndarray     # number of distinct programs that wrote it (2 or more: a race, unless atomic)
    oob_lanes: int          # active lanes outside the tensor's storage (drawn in the halo, evidence.py)
    oob_examples: tuple     # a few of their offsets
    oob_offsets: np.ndarray  # their distinct offsets, the first HALO_MAX

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.offsets, self.kinds, self.lanes, self.program, self.programs,
                                      self.value, self.has_value, self.writer, self.writers, self.oob_offsets))


def group(keys: np.ndarray, bound: int) -> tuple:
    """(sorted distinct keys, index of each key among them) for non-negative keys below ``bound``. A
    presence table when the bound is small enough, else a sort (np.unique hashes, and is slower here)."""
    keys = np.asarray(keys, dtype=np.int64)
    if bound <= 8 * len(keys) + 4096:
        present = np.zeros(bound, dtype=bool)
        present[keys] = True
        return np.flatnonzero(present), (np.cumsum(present) - 1)[keys]
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    first = np.ones(len(s), dtype=bool)
    first[1:] = s[1:] != s[:-1]
    inv = np.empty(len(keys), dtype=np.int64)
    inv[order] = np.cumsum(first) - 1
    return s[first], inv


def elements(ix: LaunchIndex, rows: np.ndarray, tensor: int) -> Elements:
    lc, o = ix.launch, ix.launch.ops
    rows = np.asarray(rows, dtype=np.int64)
    counts = o["lane_count"][rows].astype(np.int64)
    _, values, has = ix.lane_values(rows)
    lane_row = np.repeat(rows, counts)
    off, active = lc.lanes.gather(o["lane_start"][rows], counts)     # decodes only these rows' lanes
    size = lc.tensors[tensor].storage_size
    inside = (off >= 0) & (off < size)
    bad = active & ~inside
    oob_offsets = np.unique(off[bad])[:HALO_MAX]
    oob_examples = tuple(int(v) for v in oob_offsets[:OOB_EXAMPLES])
    keep = active & inside
    off, lane_row, values, has = off[keep], lane_row[keep], values[keep], has[keep]
    lin = ix.lin[lane_row]
    uniq, inv = group(off, size)
    n = len(uniq)
    read_lane, write_lane = ix.read[lane_row].astype(bool), ix.write[lane_row].astype(bool)
    if len(inv) == n:
        # every element was touched by one lane (a copy, an elementwise kernel): scatter, no grouping
        read, write, nlanes = np.zeros(n, bool), np.zeros(n, bool), np.ones(n, np.int64)
        read[inv], write[inv] = read_lane, write_lane
        program = np.empty(n, np.int64)
        program[inv] = lin
        nprog = np.ones(n, np.int64)
        nwriters = np.zeros(n, np.int64)
        nwriters[inv] = write_lane
        has_value = np.zeros(n, bool)
        has_value[inv] = has
        value = np.full(n, np.nan)
        value[inv[has]] = values[has]
        writer = np.full(n, -1, np.int64)
        writer[inv[write_lane]] = lin[write_lane]
    else:
        read = np.bincount(inv, weights=read_lane, minlength=n) > 0
        write = np.bincount(inv, weights=write_lane, minlength=n) > 0
        nlanes = np.bincount(inv, minlength=n)
        program, nprog, nwriters = _programs(inv, lin, write_lane, n, ix.num_programs)
        # the value of the last lane (in row order) that recorded one
        last = np.full(n, -1, dtype=np.int64)
        rec = np.nonzero(has)[0]
        np.maximum.at(last, inv[rec], rec)
        has_value = last >= 0
        value = np.where(has_value, values[np.maximum(last, 0)] if len(values) else np.nan, np.nan)
        last_write = np.full(n, -1, dtype=np.int64)
        wrote = np.flatnonzero(write_lane)
        np.maximum.at(last_write, inv[wrote], wrote)
        writer = np.where(last_write >= 0, lin[np.maximum(last_write, 0)] if len(lin) else -1, -1)
    return Elements(uniq, (read.astype(np.int8) | (write.astype(np.int8) << 1)).astype(np.int8),
                    nlanes.astype(np.int32), program,
                    nprog.astype(np.int32), value, has_value, writer.astype(np.int64), nwriters.astype(np.int32),
                    int(bad.sum()), oob_examples, oob_offsets)


def _programs(inv: np.ndarray, lin: np.ndarray, wrote: np.ndarray, n: int, num_programs: int) -> tuple:
    """Per element (lane i: element inv[i], program lin[i], a write when wrote[i]): the smallest program
    that touched it, how many distinct programs touched it, how many wrote it. One sort of
    (element, program, wrote) keys answers all three."""
    p = max(num_programs, 1)
    key = np.sort((inv * p + lin) * 2 + wrote)
    if len(key):
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]      # distinct (element, program, wrote)
    pair = key >> 1
    elem = pair // p
    first = np.ones(len(pair), dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    program = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    starts = np.ones(len(elem), dtype=bool)
    starts[1:] = elem[1:] != elem[:-1]
    program[elem[starts]] = pair[starts] % p          # keys sort by program within an element
    return program, np.bincount(elem[first], minlength=n), np.bincount(elem[(key & 1) == 1], minlength=n)


def plane_cells(plane: Plane, table: Elements, pos: np.ndarray, entry: np.ndarray) -> dict:
    """Reduce placed elements to sparse cells: columns parallel to ``cell``, sorted by cell index."""
    cell = cells(plane, pos)
    uc, inv = group(cell, plane.cell_rows * plane.cell_cols)
    n = len(uc)
    kinds = np.zeros(n, dtype=np.int8)
    np.bitwise_or.at(kinds, inv, table.kinds[entry])
    program = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(program, inv, table.program[entry])
    programs = np.zeros(n, dtype=np.int32)
    np.maximum.at(programs, inv, table.programs[entry])
    writers = np.zeros(n, dtype=np.int32)
    np.maximum.at(writers, inv, table.writers[entry])
    out = {"cell": uc.tolist(), "kinds": kinds.tolist(), "program": program.tolist(),
           "programs": programs.tolist(), "writers": writers.tolist(),
           "lanes": np.bincount(inv, weights=table.lanes[entry], minlength=n).astype(np.int64).tolist()}
    if plane.fr == 1 and plane.fc == 1:
        first = np.full(n, len(entry), dtype=np.int64)
        np.minimum.at(first, inv, np.arange(len(entry)))
        e = entry[first] if n else entry[:0]
        out["value"] = [v if h else None for v, h in zip(json_values(table.value[e], 6), table.has_value[e].tolist())]
        out["writer"] = table.writer[e].tolist()
    else:
        touched = np.bincount(inv, minlength=n)
        out["fill"] = np.round(touched / np.maximum(cell_sizes(plane, uc), 1), 4).tolist()
    return out


def runs(cell, *columns) -> list:
    """Sorted cells as runs ``[first, count, *values]`` of consecutive cells whose ``columns`` agree: a tile's
    rows are a few runs where its cells would be thousands of numbers."""
    cell = np.asarray(cell, np.int64)
    if not len(cell):
        return []
    cols = [np.asarray(c) for c in columns]
    cut = np.diff(cell) != 1
    for c in cols:
        cut |= c[1:] != c[:-1]
    starts = np.concatenate([[0], np.flatnonzero(cut) + 1])
    ends = np.concatenate([starts[1:], [len(cell)]])
    return [[int(cell[a]), int(b - a), *(c[a].item() for c in cols)] for a, b in zip(starts, ends)]


def cell_runs(drawn: dict) -> list:
    """``plane_cells``' cells as runs ``[first, count, kinds, fill]`` (fill 1 element by element): what the
    storage and tiles views draw, without per-element values or programs."""
    return runs(drawn["cell"], drawn["kinds"], drawn.get("fill") or [1.0] * len(drawn["cell"]))


def tensor_payload(ti: TraceIndex, launch: int, tensor: int, rows: np.ndarray, cache_key, selection: dict,
                   row_dim=None, col_dim=None, index=None, wrap=None, window=None) -> str:
    """The JSON text of ``GET /api/launch/<i>/tensor/<t>`` (see contract.py). ``window`` is None (the whole plane), "auto"
    (zoom to the selection when the whole plane would be downsampled) or (r0, r1, c0, c1)."""
    ix = ti.launch(launch)
    info = ix.launch.tensors[tensor]
    if wrap is None and len(info.shape) == 1:
        wrap = block_width(ix, rows, info.shape[0])
    build = lambda: elements(ix, rows, tensor)
    table = ti.cached(cache_key, build) if cache_key is not None else build()
    if index is None:
        index = slice_of(info, table)
    plane = make_plane(info, row_dim, col_dim, index, wrap, None if window == "auto" else window)
    pos, entry, placed, r, c = locate(info, plane, table.offsets)
    if window == "auto":
        zoom = auto_window(plane, r, c)
        if zoom is not None:
            plane = make_plane(info, row_dim, col_dim, index, wrap, zoom)
            pos, entry, placed, r, c = locate(info, plane, table.offsets)
    payload = {
        "launch": launch, "tensor": tensor, "name": clip(info.name), "dtype": clip(info.dtype),
        "shape": list(info.shape), "strides": list(info.strides), "storage_offset": info.storage_offset,
        "storage_size": info.storage_size, "plane": plane.to_dict(), "selection": selection,
        "elements": int(len(table.offsets)), "elements_hidden": int((~placed).sum()),
        "oob_lanes": table.oob_lanes, "oob_examples": list(table.oob_examples),
        "halo": halo(info, plane, table.oob_offsets),
        "cells": plane_cells(plane, table, pos, entry), "dropped": [],
    }
    return encode_bounded(payload)


def slice_of(info, table: Elements):
    """For a tensor of rank 3 or more shown without an explicit index: the slice that holds the first
    touched element, so the view opens where the selection is."""
    rank = len(info.shape)
    if rank < 3 or not len(table.offsets) or not invertible(info):
        return None
    idx, ok = view_index(info, table.offsets[:4096])
    hit = np.nonzero(ok)[0]
    return tuple(int(v) for v in idx[hit[0]]) if len(hit) else None


def block_width(ix: LaunchIndex, rows: np.ndarray, n: int) -> int | None:
    """Wrap a 1-D tensor at the kernel's block size when that gives a sensible picture (one row per block)."""
    o = ix.launch.ops
    sel = rows[o["ndim"][rows] == 1] if len(rows) else rows
    if not len(sel):
        return None
    block = int(np.bincount(o["lane_count"][sel].astype(np.int64)).argmax())
    if 8 <= block <= 1024 and n // max(block, 1) <= 4096:
        return block
    return None


def encode_bounded(payload: dict, limit: int = MAX_TENSOR_BYTES) -> str:
    """``encode``, kept under ``limit`` bytes by dropping the least essential columns (named in
    ``dropped``)."""
    body = encode(payload)
    for column in ("value", "writer", "writers", "programs", "program", "lanes"):
        if len(body) <= limit:
            break
        if column in payload["cells"]:
            del payload["cells"][column]
            payload["dropped"].append(column)
            body = encode(payload)
    return body
