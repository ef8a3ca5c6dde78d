"""The L1 filter (cache.py's, see L1 in its docstring) in compiled loops (loops.c, native/cacheloops.py): the window's
entries gathered in one pass, then taken L1 by L1 through a table of the window's lines. cache.py's numpy
filter stays the path where the loops cannot be built, and tests/analysis/test_cache_jit.py runs both on random
streams and real kernels."""
from __future__ import annotations

import numpy as np

from . import jitsteps
from ...native import cacheloops as native
from .jitsteps import _as, _lib


def _table(line, lo: int, hi: int) -> tuple:
    """Each line's place in the L1 loop's table, and the table's size: the line less the lowest, or where the
    lines lie far apart, its rank among the distinct ones."""
    if hi - lo + 1 > max(4 * len(line), 1 << 22):
        uniq, at = np.unique(line, return_inverse=True)
        return jitsteps._ints(at), len(uniq)
    return jitsteps._ints(line - lo), hi - lo + 1      # (int32 lines stay int32: fewer than 2^31 apart)


def _l1(row, at, n_lines: int, owner, n_owners: int, mask, wr, load, line_bytes: int, l1_bytes: int, res) -> int:
    """loops.c's tt_l1 (``row``: each entry's row; ``at``: its line's place in a table of ``n_lines``;
    ``owner``, ``wr``, ``load`` per row): fills ``res``, the sectors sent on; returns the load sectors L1
    served."""
    keep = (_as(row, np.int64), at, _as(owner, np.int64), native.as_bytes(mask), native.as_bytes(wr),
            native.as_bytes(load))
    fn = getattr(_lib(), "tt_l1_" + native.suffix(at.dtype))
    served = int(fn(native.ptr(keep[0]), native.ptr(keep[1]), len(keep[0]), n_lines, native.ptr(keep[2]),
                    n_owners, *(native.ptr(a) for a in keep[3:]), line_bytes, l1_bytes, native.ptr(res)))
    if served < 0:
        raise MemoryError(f"the L1 filter could not allocate its table of {n_lines} lines")
    return served


def l1_sent(owner, line, mask, wr, load, line_bytes: int, l1_bytes: int) -> np.ndarray:
    """cache._l1_filter's result in compiled loops, an entry per row."""
    _lib()
    res = np.empty(len(owner), dtype=np.uint8)
    if len(owner):
        o_lo = int(owner.min())
        at, n_lines = _table(line, int(line.min()), int(line.max()))
        _l1(np.arange(len(owner)), at, n_lines, owner - o_lo, int(owner.max()) - o_lo + 1, mask, wr, load,
            line_bytes, l1_bytes, res)
    return res


def l1_window(t, s_row, s_line, s_mask, base, owner, wr, load, line_bytes: int, l1_bytes: int) -> tuple:
    """cache._l1_stage in compiled loops: the window's (rows, lines, sectors sent on to L2, load sectors L1
    served); ``s_*``: the stream's rows, lines and masks; ``base``, ``owner``, ``wr``, ``load``: per row.
    Lines come out in ``base``'s type (int32 where every line of the launch fits: cache.simulate)."""
    lib = _lib()
    n = len(t)
    ltype = np.int32 if base.dtype == np.int32 else np.int64
    row = np.empty(n, dtype=np.int64)
    line = np.empty(n, dtype=ltype)
    mask = np.empty(n, dtype=np.uint8)
    sent = np.empty(n, dtype=np.uint8)
    if not n:
        return row, line, sent, 0
    name, keep = jitsteps.stream_args(t, s_row, s_line, s_mask, base)
    lo_hi = np.empty(2, dtype=np.int64)
    getattr(lib, "tt_gather_" + name)(
        native.ptr(keep[0]), n, *(native.ptr(a) for a in keep[1:]), native.ptr(row), native.ptr(line),
        native.ptr(mask), native.ptr(lo_hi))
    at, n_lines = _table(line, int(lo_hi[0]), int(lo_hi[1]))
    served = _l1(row, at, n_lines, owner, int(owner.max()) + 1, mask, wr, load, line_bytes, l1_bytes, sent)
    return row, line, sent, served
