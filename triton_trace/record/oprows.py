"""The rows of a launch's ops table, expanded from the collector's events (record/collector.py): one event
per op of a chunk, one row per (event, program that ran it), ordered program by program as a sequential run
records them, so batched and one-at-a-time runs give the same table."""
from __future__ import annotations

import numpy as np


class Event:
    """One op of one chunk: its lanes are one block of (programs kept, lanes per program)."""
    __slots__ = ("chunk", "seq", "kind", "file", "line", "tensor", "elem_bytes", "shape", "lane_start", "lanes",
                 "value_start", "value_dtype", "value_size", "aux", "rows")

    def __init__(self, chunk, seq, kind, file, line, tensor, elem_bytes, shape, lane_start, lanes, aux):
        self.chunk, self.seq, self.kind, self.file, self.line = chunk, seq, kind, file, line
        self.tensor, self.elem_bytes, self.shape, self.lane_start, self.lanes = tensor, elem_bytes, shape, lane_start, lanes
        self.value_start, self.value_dtype, self.value_size, self.aux = -1, -1, 0, aux
        self.rows = None          # which of the chunk's kept programs ran it (bool), None: all of them


def op_rows(events: list, chunk_pids: list) -> np.ndarray:
    """Expand events into one row per (event, kept program), ordered by program, then by seq: the rows of
    ``Launch.ops``. ``chunk_pids``: each chunk's kept program ids, in chunk order."""
    # the table's columns, loaded with the first launch's rows: importing the model (its lanes, values and
    # actions) with this module made every import of the collector one that chain longer
    from ..model.trace import MAX_RANK, OP_COLUMNS, empty_ops
    n_ev = len(events)
    ops = empty_ops(0)
    if not n_ev:
        return ops

    def column(name, dtype=np.int64):
        return np.fromiter((getattr(e, name) for e in events), dtype=dtype, count=n_ev)
    chunk = column("chunk")
    sizes = np.array([len(p) for p in chunk_pids], dtype=np.int64)
    pid_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else np.zeros(0, np.int64)
    all_pids = np.concatenate(chunk_pids) if chunk_pids else np.zeros((0, 3), np.int32)
    subset = np.fromiter((e.rows is not None for e in events), dtype=bool, count=n_ev)
    if not subset.any() and (np.diff(chunk) >= 0).all():
        idx, prog, seq = _blocks(chunk, sizes)
        rank = prog
    else:
        idx, prog, rank, seq = _sorted(events, chunk, sizes, subset)
    total = len(idx)
    ops = empty_ops(total)
    ops["program"] = all_pids[pid_start[chunk[idx]] + prog]
    ops["seq"] = seq.astype(OP_COLUMNS["seq"][0])
    for name, attr in (("kind", "kind"), ("file", "file"), ("line", "line"), ("tensor", "tensor"),
                       ("elem_bytes", "elem_bytes")):
        ops[name] = column(attr, OP_COLUMNS[name][0])[idx]
    shapes = np.zeros((n_ev, MAX_RANK), dtype=np.int64)
    ndim = np.zeros(n_ev, dtype=np.int32)
    for i, e in enumerate(events):
        s = e.shape if len(e.shape) <= MAX_RANK else (int(np.prod(e.shape)),)
        shapes[i, :len(s)] = s
        ndim[i] = len(s)
    ops["shape"], ops["ndim"] = shapes[idx], ndim[idx]
    n = column("lanes")
    ops["lane_count"] = n[idx]
    ops["lane_start"] = column("lane_start")[idx] + rank * n[idx]
    vdt = column("value_dtype", np.int32)
    ops["value_dtype"] = vdt[idx]
    vstart = column("value_start")[idx] + rank * n[idx] * column("value_size")[idx]
    ops["value_start"] = np.where(vdt[idx] >= 0, vstart, -1)
    ops["aux"] = np.array([e.aux for e in events], dtype=np.int64).reshape(n_ev, 3)[idx]
    return ops


def _blocks(chunk: np.ndarray, sizes: np.ndarray) -> tuple:
    """(event, program within its chunk, seq) of every row, where every program of a chunk ran all of the
    chunk's events and the events come chunk after chunk: each chunk's rows are its programs in turn, each
    running the chunk's events in order (what ``_sorted`` finds by sorting, built directly)."""
    present, starts, k = np.unique(chunk, return_index=True, return_counts=True)
    n = sizes[present]
    cnt = k * n
    total = int(cnt.sum())
    slot = np.repeat(np.arange(len(cnt)), cnt)
    j = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    kk = k[slot]
    prog = j // kk
    seq = j - prog * kk
    return starts[slot] + seq, prog, seq


def _sorted(events: list, chunk: np.ndarray, sizes: np.ndarray, subset: np.ndarray) -> tuple:
    """(event, program within its chunk, row within the event's block, seq) of every row, by sorting: for
    chunks whose events some programs sat out (a masked loop's trips)."""
    full = np.flatnonzero(~subset)
    reps = sizes[chunk[full]]
    idx = np.repeat(full, reps)
    first = np.cumsum(reps) - reps                    # (no event for every program: none at all)
    prog = np.arange(len(idx)) - np.repeat(first, reps)          # index of the program within its chunk
    rank = prog                                                  # and its row within the event's block
    if subset.any():
        # events of a masked loop's trips that some programs sat out: only the programs that ran them
        part = [np.flatnonzero(events[i].rows) for i in np.flatnonzero(subset)]
        counts = np.array([len(p) for p in part], dtype=np.int64)
        idx = np.concatenate([idx, np.repeat(np.flatnonzero(subset), counts)])
        prog = np.concatenate([prog] + part)
        rank = np.concatenate([rank] + [np.arange(c) for c in counts])
    # a program's ops in the order it ran them; its seq counts only the ops it ran
    order = np.lexsort((idx, prog, chunk[idx]))
    idx, prog, rank = idx[order], prog[order], rank[order]
    new_group = np.r_[True, (chunk[idx][1:] != chunk[idx][:-1]) | (prog[1:] != prog[:-1])] if len(idx) else \
        np.zeros(0, dtype=bool)
    starts = np.flatnonzero(new_group)
    seq = np.arange(len(idx)) - np.repeat(starts, np.diff(np.r_[starts, len(idx)]))
    return idx, prog, rank, seq
