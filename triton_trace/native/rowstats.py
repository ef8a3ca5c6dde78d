"""The math values' per-program statistics in one C pass (rowstats.c), for record/checks/mathvalues_ops.py.

Built by native/cbuild.py once per machine and source and loaded through ctypes, as loops.c is. Where no
compiler works (or ``TRITON_TRACE_NO_JIT=1``), ``library()`` is None, ``failure()`` says why, and the monitor
keeps its numpy reductions: the same numbers, about two passes more per float op. Nothing is said about it
when recording: the values are exact either way.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from typing import Optional

import numpy as np

from . import cbuild

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rowstats.c")
DISABLED = cbuild.DISABLED
FORMATS = {np.dtype(np.float16): 0, np.dtype(np.float32): 2, np.dtype(np.float64): 3}
BF16 = 1                          # bfloat16's uint16 bit patterns, as Triton's interpreter holds them
NCOL = 7
MAXDIM = 32

_lock = threading.Lock()
_fn = None
_failed: Optional[str] = None

_P, _I = ctypes.c_void_p, ctypes.c_int64


def _load():
    lib = cbuild.load(SOURCE, "rowstats")
    fn = lib.tt_row_stats
    fn.argtypes, fn.restype = (_P, _I, _I, _I, _I, _P, _P, _P, _P, _P), _I
    return fn


def library():
    """The compiled routine, built first where needed; None where it cannot be (``failure`` says why), or
    while ``DISABLED`` (read at each call: tests turn it off and on)."""
    global _fn, _failed
    if DISABLED:
        return None
    if _fn is not None or _failed is not None:
        return _fn
    with _lock:
        if _fn is None and _failed is None:
            try:
                _fn = _load()
            except (OSError, subprocess.SubprocessError, AttributeError) as exc:
                _failed = f"{type(exc).__name__}: {exc}"
    return _fn


def failure() -> Optional[str]:
    """Why the compiled routine is not in use (None: it is, or was never asked for)."""
    return "TRITON_TRACE_NO_JIT is set or rowstats.DISABLED" if DISABLED else _failed


def row_stats(fn, d: np.ndarray, fmt: int) -> tuple:
    """Per row of ``d`` (its first axis; a stride-0 first axis is one row that every program shares): int64
    columns COUNT, NAN, PINF, NINF, LANE (the first non-finite element's index in the row-major order of the
    row's distinct values: its unbroadcast core), KIND, FIRST; the finite minimum and maximum as float64
    (+inf / -inf for none). ``fmt``: FORMATS' code of ``d``'s dtype, or BF16. Returns (ints, lo, hi, bad):
    ``bad`` the number of rows holding a non-finite value."""
    rows = d.shape[0]
    if d.strides[0] == 0 and rows > 1:
        rows = 1
    if d.ndim - 1 > MAXDIM:
        d = np.ascontiguousarray(d)
    nd = d.ndim - 1
    # one buffer for what goes in and comes out (one allocation, one address: the call is most of a small op's
    # cost): the dimensions, then the rows' int columns, then their minima and maxima as float64
    buf = np.empty(2 * nd + rows * (NCOL + 2), np.int64)
    buf[:2 * nd] = d.shape[1:] + d.strides[1:]
    at = buf.ctypes.data
    out = at + 16 * nd
    bad = fn(d.ctypes.data, fmt, rows, d.strides[0], nd, at, at + 8 * nd, out, out + 8 * NCOL * rows,
             out + 8 * (NCOL + 1) * rows)
    if bad < 0:
        raise ValueError(f"tt_row_stats refused an array of shape {d.shape}, strides {d.strides}")
    ints = buf[2 * nd:2 * nd + NCOL * rows].reshape(rows, NCOL)
    fl = buf[2 * nd + NCOL * rows:].view(np.float64)
    return ints, fl[:rows], fl[rows:], bad
