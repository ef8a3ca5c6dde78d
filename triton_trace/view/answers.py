"""The answer to each API request, as encoded JSON, without Flask: the web app (app.py) serves these and
the notebook (embed.py) inlines them, so both views read the very same payloads.

Each function takes the TraceIndex and the request's parameters (a mapping of strings, as in a URL query),
checks them and raises ``payload.ApiError`` (a 4xx) for bad ones. Payloads that never change for a trace
are built once (``TraceIndex.memo``); tensor answers go to its byte-bounded LRU.
"""
from __future__ import annotations

import inspect
import re
from typing import Mapping, Optional

import numpy as np

from ..errors import TraceUsageError
from . import payload as P
from .blockview import block_payload
from .compareview import compare_payload
from .download import npy_values
from .compiledview import ACCEPTED, compiled_payload
from .lookup import TraceIndex
from .payload import encode
from .tensorview import tensor_payload

_INT = re.compile(r"-?[0-9]{1,12}")       # ASCII digits only: \d takes "０" (a fullwidth zero) too


# --------------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------------
def _int(text: Optional[str], name: str, default=None, lo: int = 0, hi: int = 1 << 40) -> int:
    if text is None or text == "":
        if default is None:
            raise P.ApiError(f"parameter '{name}' is required")
        return default
    if not _INT.fullmatch(text):
        raise P.ApiError(f"parameter '{name}' must be an integer, got {text[:40]!r}")
    v = int(text)
    if not lo <= v <= hi:
        raise P.ApiError(f"parameter '{name}' must be in {lo}..{hi}, got {v}")
    return v


def _ints(text: str, name: str) -> tuple:
    parts = text.split(",")
    if len(parts) > 8:
        raise P.ApiError(f"parameter '{name}' has too many entries")
    return tuple(_int(p.strip(), name, lo=-(1 << 40)) for p in parts)


def check_launch(ti: TraceIndex, i: int) -> int:
    n = len(ti.trace.launches)
    if not 0 <= i < n:
        raise P.ApiError(f"unknown launch {i}; the trace has {n} launch(es)", 404)
    return i


def program_id(ti: TraceIndex, i: int, text: Optional[str]) -> tuple:
    if not text:
        raise P.ApiError("parameter 'program' is required, as x,y,z")
    pid = _ints(text, "program")
    if len(pid) > 3:
        raise P.ApiError(f"a program id has 1 to 3 coordinates, got {text[:40]!r}")
    pid = pid + (0,) * (3 - len(pid))
    grid = ti.launch(i).grid
    if not all(0 <= v < n for v, n in zip(pid, grid)):
        raise P.ApiError(f"program {pid} is outside the grid {tuple(grid)}", 404)
    return pid


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
# one function per endpoint (the paths are in contract.py)
# --------------------------------------------------------------------------------------------------------
def trace(ti: TraceIndex) -> str:
    return _once(ti, ("trace",), lambda: P.trace_payload(ti))


def launch(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("launch", i), lambda: P.launch_payload(ti, i))


def grid(ti: TraceIndex, i: int, args: Mapping[str, str]) -> str:
    check_launch(ti, i)
    z = _int(args.get("z"), "z", default=0)
    return _once(ti, ("grid", i, z), lambda: P.grid_payload(ti, i, z))


def program(ti: TraceIndex, i: int, pid: str, args: Mapping[str, str]) -> str:
    check_launch(ti, i)
    offset = _int(args.get("offset"), "offset", default=0)
    limit = _int(args.get("limit"), "limit", default=P.MAX_OPS, lo=1, hi=P.MAX_OPS)
    return encode(P.program_payload(ti, i, program_id(ti, i, pid), offset, limit))


def findings(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("findings", i), lambda: P.findings_payload(ti, i))


def charts(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return _once(ti, ("charts", i), lambda: P.charts_payload(ti, i))


def block(ti: TraceIndex, i: int, pid: str, seq: int) -> str:
    check_launch(ti, i)
    return encode(block_payload(ti, i, program_id(ti, i, pid), seq))


def compiled(ti: TraceIndex, i: int, args: Mapping[str, str]) -> str:
    check_launch(ti, i)
    target = args.get("target") or "sm_90"
    if target not in ACCEPTED:
        raise P.ApiError(f"parameter 'target' is one of {sorted(ACCEPTED)}, got {target[:40]!r}")
    return _once(ti, ("compiled", i, target), lambda: compiled_payload(ti, i, target))


def diff(ti: TraceIndex, i: int, t: int) -> str:
    lc = ti.trace.launches[check_launch(ti, i)]
    if not 0 <= t < len(lc.tensors):
        raise P.ApiError(f"launch {i} has {len(lc.tensors)} tensors; there is no tensor {t}", 404)
    return ti.cached(("diff", i, t), lambda: encode(P.diff_payload(ti, i, t)))


def compare(ti: TraceIndex, i: int) -> str:
    check_launch(ti, i)
    return ti.memo(("compare-json", i), lambda: encode(compare_payload(ti, i)))


def touches(ti: TraceIndex, i: int, t: int, args: Mapping[str, str]) -> str:
    lc = ti.trace.launches[check_launch(ti, i)]
    if not 0 <= t < len(lc.tensors):
        raise P.ApiError(f"launch {i} has {len(lc.tensors)} tensors; there is no tensor {t}", 404)
    text = args.get("index")
    index = _ints(text, "index") if text else ()
    return ti.cached(("touches", i, t, index), lambda: encode(P.touches_payload(ti, i, t, index)))


def values_npy(ti: TraceIndex, i: int, t: int, args: Mapping[str, str]) -> bytes:
    rows, key, _ = _selection(ti, i, t, args)
    return npy_values(ti, i, t, rows, key)


def tensor(ti: TraceIndex, i: int, t: int, args: Mapping[str, str]) -> str:
    lc = ti.trace.launches[check_launch(ti, i)]
    rows, key, selection = _selection(ti, i, t, args)
    mode = selection["mode"]
    rank = len(lc.tensors[t].shape)
    rows_dim = _int(args.get("rows"), "rows", default=-1, lo=0, hi=max(rank - 1, 0)) if args.get("rows") else None
    cols_dim = _int(args.get("cols"), "cols", default=-1, lo=0, hi=max(rank - 1, 0)) if args.get("cols") else None
    index = _ints(args["index"], "index") if args.get("index") else None
    wrap = _int(args.get("wrap"), "wrap", lo=1, hi=1 << 31) if args.get("wrap") else None
    window = args.get("window") or None
    if window not in (None, "auto"):
        window = _ints(window, "window")
        if len(window) != 4:
            raise P.ApiError("parameter 'window' is auto or r0,r1,c0,c1")
    request_key = ("tensor-json", i, t, mode, selection["program"] and tuple(selection["program"]), selection["op"],
                   rows_dim, cols_dim, index, wrap, window)
    return ti.cached(request_key, lambda: tensor_payload(ti, i, t, rows, key, selection, rows_dim, cols_dim,
                                                         index, wrap, window))


def _selection(ti: TraceIndex, i: int, t: int, args: Mapping[str, str]) -> tuple:
    """(op rows, element-table cache key or None, selection) of a tensor request's mode, program and op."""
    lc = ti.trace.launches[check_launch(ti, i)]
    if not 0 <= t < len(lc.tensors):
        raise P.ApiError(f"launch {i} has {len(lc.tensors)} tensors; there is no tensor {t}", 404)
    mode = args.get("mode", "all")
    ix = ti.launch(i)
    if mode == "all":
        rows, key, selection = ix.tensor_rows(t), ("elements", i, t), {"mode": "all", "program": None, "op": None}
    elif mode in ("program", "op"):
        pid = program_id(ti, i, args.get("program"))
        if mode == "program":
            rows, key = ix.tensor_rows(t, ix.linear(pid)), None
            selection = {"mode": "program", "program": list(pid), "op": None}
        else:
            seq = _int(args.get("op"), "op")
            row = P.op_row(ix, pid, seq)
            if int(lc.ops["tensor"][row]) != t or not ix.memory[row]:
                raise P.ApiError(f"op {seq} of program {pid} does not access tensor {t} ({lc.tensors[t].name!r})")
            rows, key = np.array([row], dtype=np.int64), None
            selection = {"mode": "op", "program": list(pid), "op": seq}
    else:
        raise P.ApiError(f"parameter 'mode' is one of all, program, op; got {mode[:40]!r}")
    return rows, key, selection
