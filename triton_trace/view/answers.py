"""The answer to each API request, as encoded JSON, without Flask: the web app (app.py) serves these and
the notebook (embed.py) inlines them, so both views read the very same payloads.

routes.py is the table of requests: it parses and bounds each request's parameters and calls the answer
named there with them (typed: ints, tuples of ints, choices), ``answer(ti, *path values, {query})``. An
answer checks what only the trace can tell (a launch that exists, a program inside its grid, a tensor's
rank) and raises ``payload.ApiError`` (a 4xx) where it fails. Payloads that never change for a trace are
built once (``TraceIndex.memo``); tensor answers go to its byte-bounded LRU.
"""
from __future__ import annotations

import inspect
from typing import Mapping, Optional

import numpy as np

from ..errors import TraceUsageError
from . import payload as P
from .blockview import block_payload
from .compareview import compare_payload
from .download import npy_values
from .feeds import feeds_payload
from .compiledview import compiled_payload
from .lookup import TraceIndex
from .payload import encode
from .planesview import planes_payload
from .precisionview import precision_payload
from .storageview import storage_payload
from .tensorview import tensor_payload
from .tilesview import tiles_payload


# --------------------------------------------------------------------------------------------------------
# what only the trace can check
# --------------------------------------------------------------------------------------------------------
def check_launch(ti: TraceIndex, i: int) -> int:
    n = len(ti.trace.launches)
    if not 0 <= i < n:
        raise P.ApiError(f"unknown launch {i}; the trace has {n} launch(es)", 404)
    return i


def in_grid(ti: TraceIndex, i: int, pid: Optional[tuple], name: str = "program") -> tuple:
    """``pid`` (1 to 3 coordinates, parsed by routes.py) as (x, y, z) inside launch ``i``'s grid."""
    if pid is None:
        raise P.ApiError(f"parameter '{name}' is required, as x,y,z")
    pid = tuple(pid) + (0,) * (3 - len(pid))
    grid = ti.launch(i).grid
    if not all(0 <= v < n for v, n in zip(pid, grid)):
        raise P.ApiError(f"program {pid} is outside the grid {tuple(grid)}", 404)
    return pid


def _dim(args: Mapping, name: str, rank: int) -> Optional[int]:
    v = args[name]
    if v is not None and v > max(rank - 1, 0):
        raise P.ApiError(f"parameter '{name}' must be in 0..{max(rank - 1, 0)}, got {v}")
    return v


def analyzer(options: Optional[Mapping] = None):
    """The analysis the views run on their trace (once, on first use), or None when it is not installed.
    ``options``: keyword arguments of ``triton_trace.analyze`` (``l2_bytes``, ``programs_in_flight``,
    ``gpu``, ...), so the served numbers are the ones a script printed with the same options."""
    try:
        from ..analysis import analyze
    except ImportError:
        return None
    opts = {"max_findings": P.MAX_FINDINGS, **dict(options or {})}
    known = set(inspect.signature(analyze).parameters) - {"trace"}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise TraceUsageError(f"analysis options {unknown} are not arguments of triton_trace.analyze; "
                              f"use some of: {', '.join(sorted(known))}")
    return lambda trace: analyze(trace, **opts)


def _once(ti: TraceIndex, key, build) -> str:
    """The encoded JSON of a payload that never changes for this trace, built on first request."""
    return ti.memo(("json",) + key, lambda: encode(build()))


# --------------------------------------------------------------------------------------------------------
# one function per route of routes.py's table
# --------------------------------------------------------------------------------------------------------
def trace(ti: TraceIndex) -> str:
    return _once(ti, ("trace",), lambda: P.trace_payload(ti))


def version(reloader) -> str:
    """Whether the trace file behind the app changed (reload.py); nothing to follow for a trace object."""
    return encode(reloader.check() if reloader is not None else {"watching": False, "version": 0, "error": None})


def launch(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("launch", i), lambda: P.launch_payload(ti, i))


def grid(ti: TraceIndex, i: int, args: Mapping) -> str:
    check_launch(ti, i)
    z = args["z"]
    return _once(ti, ("grid", i, z), lambda: P.grid_payload(ti, i, z))


def program(ti: TraceIndex, i: int, pid: tuple, args: Mapping) -> str:
    check_launch(ti, i)
    return encode(P.program_payload(ti, i, in_grid(ti, i, pid, "pid"), args["offset"], args["limit"]))


def findings(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("findings", i), lambda: P.findings_payload(ti, i))


def charts(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("charts", i), lambda: P.charts_payload(ti, i))


def precision(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("precision", i), lambda: precision_payload(ti, i))


def block(ti: TraceIndex, i: int, pid: tuple, seq: int) -> str:
    check_launch(ti, i)
    return encode(block_payload(ti, i, in_grid(ti, i, pid, "pid"), seq))


def compiled(ti: TraceIndex, i: int, args: Mapping) -> str:
    check_launch(ti, i)
    target = args["target"]
    return _once(ti, ("compiled", i, target), lambda: compiled_payload(ti, i, target))


def _tensor_of(ti: TraceIndex, i: int, t: int):
    lc = ti.trace.launches[check_launch(ti, i)]
    if not 0 <= t < len(lc.tensors):
        raise P.ApiError(f"launch {i} has {len(lc.tensors)} tensors; there is no tensor {t}", 404)
    return lc


def diff(ti: TraceIndex, i: int, t: int) -> str:
    _tensor_of(ti, i, t)
    return ti.cached(("diff", i, t), lambda: encode(P.diff_payload(ti, i, t)))


def compare(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return ti.memo(("compare-json", i), lambda: encode(compare_payload(ti, i)))


def touches(ti: TraceIndex, i: int, t: int, args: Mapping) -> str:
    _tensor_of(ti, i, t)
    index = tuple(args["index"])
    return ti.cached(("touches", i, t, index), lambda: encode(P.touches_payload(ti, i, t, index)))


def feeds(ti: TraceIndex, i: int, t: int, args: Mapping) -> str:
    _tensor_of(ti, i, t)
    index = tuple(args["index"])
    return ti.cached(("feeds", i, t, index), lambda: encode(feeds_payload(ti, i, t, index)))


def values_npy(ti: TraceIndex, i: int, t: int, args: Mapping) -> bytes:
    rows, key, _ = _selection(ti, i, t, args)
    return npy_values(ti, i, t, rows, key)


def tensor(ti: TraceIndex, i: int, t: int, args: Mapping) -> str:
    lc = _tensor_of(ti, i, t)
    rows, key, selection = _selection(ti, i, t, args)
    rank = len(lc.tensors[t].shape)
    rows_dim, cols_dim = _dim(args, "rows", rank), _dim(args, "cols", rank)
    index, wrap, window = args["index"], args["wrap"], args["window"]
    request_key = ("tensor-json", i, t, selection["mode"], selection["program"] and tuple(selection["program"]),
                   selection["op"], rows_dim, cols_dim, index, wrap, window)
    return ti.cached(request_key, lambda: tensor_payload(ti, i, t, rows, key, selection, rows_dim, cols_dim,
                                                         index, wrap, window))


def planes(ti: TraceIndex, i: int, t: int, args: Mapping) -> str:
    lc = _tensor_of(ti, i, t)
    rows, key, selection = _selection(ti, i, t, args)
    rank = len(lc.tensors[t].shape)
    rows_dim, cols_dim, dim = _dim(args, "rows", rank), _dim(args, "cols", rank), _dim(args, "dim", rank)
    index, first = args["index"], args["first"]
    request_key = ("planes-json", i, t, selection["mode"], selection["program"] and tuple(selection["program"]),
                   selection["op"], rows_dim, cols_dim, dim, index, first)
    return ti.cached(request_key, lambda: planes_payload(ti, i, t, rows, key, selection, rows_dim, cols_dim, dim,
                                                         index, first))


def storage(ti: TraceIndex, i: int, t: int, args: Mapping) -> str:
    rows, key, selection = _selection(ti, i, t, args)
    wrap, window = args["wrap"], args["window"]
    request_key = ("storage-json", i, t, selection["mode"], selection["program"] and tuple(selection["program"]),
                   selection["op"], wrap, window)
    return ti.cached(request_key, lambda: storage_payload(ti, i, t, rows, key, selection, wrap, window))


def tiles(ti: TraceIndex, i: int, pid: tuple, args: Mapping) -> str:
    check_launch(ti, i)
    pid = in_grid(ti, i, pid, "pid")
    return ti.cached(("tiles-json", i, pid, args["step"]), lambda: tiles_payload(ti, i, pid, args["step"]))


def _selection(ti: TraceIndex, i: int, t: int, args: Mapping) -> tuple:
    """(op rows, element-table cache key or None, selection) of a tensor request's mode, program and op."""
    lc = _tensor_of(ti, i, t)
    mode = args["mode"]
    ix = ti.launch(i)
    if mode == "all":
        return ix.tensor_rows(t), ("elements", i, t), {"mode": "all", "program": None, "op": None}
    pid = in_grid(ti, i, args["program"])
    if mode == "program":
        return ix.tensor_rows(t, ix.linear(pid)), None, {"mode": "program", "program": list(pid), "op": None}
    seq = args["op"]
    if seq is None:
        raise P.ApiError("parameter 'op' is required with mode=op")
    row = P.op_row(ix, pid, seq)
    if int(lc.ops["tensor"][row]) != t or not ix.memory[row]:
        raise P.ApiError(f"op {seq} of program {pid} does not access tensor {t} ({lc.tensors[t].name!r})")
    return np.array([row], dtype=np.int64), None, {"mode": "op", "program": list(pid), "op": seq}
