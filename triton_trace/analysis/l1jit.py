"""The L1 filter (cache.py's, see L1 in its docstring) in compiled loops, where numba is installed: the window's
entries gathered in one pass, then taken L1 by L1 through a table of the window's lines (jitsteps.py loads
and compiles these with the L2's loops; cache.py's numpy filter stays the path without numba, and
tests/test_cache_jit.py runs both on random streams and real kernels). Compiled on first use, after
jitsteps.py has loaded numba (under the fence with a launch's patches of Python's builtins) and its loops."""
from __future__ import annotations

import numpy as np

from .jitsteps import _POP, _as, _ensure, _lock, njit

_compiled = False


def _compile() -> None:
    global _compiled, _l1, _gather
    if _compiled:
        return
    _ensure()                  # numba loaded first (the fence, then the lock: the order jitsteps takes them in)
    with _lock:
        if not _compiled:
            _l1, _gather = njit(_l1), njit(_gather)
            _compiled = True


def _gather(t, s_row, s_line, s_mask, base, row, line, mask) -> tuple:
    """A window's entries (stream indices ``t``) gathered in one pass: each one's row, line in the simulated
    address space (its tensor's ``base`` added) and sector mask; returns the lowest and highest line."""
    lo, hi = np.int64(1) << 62, np.int64(-1)
    for i in range(len(t)):
        j = t[i]
        r = s_row[j]
        ln = np.int64(s_line[j]) + base[r]
        row[i] = r
        line[i] = ln
        mask[i] = s_mask[j]
        lo = min(lo, ln)
        hi = max(hi, ln)
    return lo, hi


def _l1(row, at, n_lines, owner, n_owners, mask, wr, load, line_bytes, l1_bytes, res) -> int:
    """cache._l1_filter for entries in time order (``row``: each one's row; ``at``: its line's place in a table
    of ``n_lines``; ``owner``, ``wr``, ``load`` per row, L1s numbered 0..n_owners-1): a load's sectors that a
    load of the same L1 and line brought in since that line's last write stay in L1; an L1 whose loads in the
    window outgrow it filters nothing. Fills ``res`` (the sectors sent on); returns the load sectors L1 served.
    The entries are taken L1 by L1 (a counting sort: time order kept within each), and each L1's lines keep
    their state in one table stamped with the L1 it belongs to (never cleared between L1s): an entry touches a
    few bytes of a table the size of the window's lines instead of being sorted by (L1, line)."""
    n = len(row)
    start = np.zeros(n_owners + 1, dtype=np.int64)
    for i in range(n):
        start[owner[row[i]] + 1] += 1
    for o in range(n_owners):
        start[o + 1] += start[o]
    nxt = start[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        o = owner[row[i]]
        order[nxt[o]] = i
        nxt[o] += 1
    stamp = np.full(n_lines, -1, dtype=np.int64)     # the L1 whose state the line's entry holds
    state = np.zeros(n_lines, dtype=np.uint8)         # sectors in L1 | the last access wrote << 4
    served = 0
    for o in range(n_owners):
        lines = 0
        for j in range(start[o], start[o + 1]):
            i = order[j]
            r = row[i]
            a = at[i]
            m = np.int64(mask[i])
            first = stamp[a] != o                     # the L1's first access to the line
            if first:
                stamp[a] = o
                acc = np.int64(0)
            else:
                st = np.int64(state[a])
                acc = np.int64(0) if st >> 4 else st & 15   # loaded again after a write: afresh
            if load[r]:
                lines += first
                res[i] = m & ~acc
                acc |= m & 15
            else:
                res[i] = m
            state[a] = acc | (np.int64(wr[r]) << 4)
        outgrown = lines * line_bytes > l1_bytes     # its loads outgrow the L1: nothing filtered
        for j in range(start[o], start[o + 1]):
            i = order[j]
            if outgrown:
                res[i] = mask[i]
            else:
                served += _POP[mask[i] & ~res[i] & 15]
    return served


def _table(line, lo: int, hi: int) -> tuple:
    """Each line's place in _l1's table, and the table's size: the line less the lowest, or where the lines
    lie far apart, its rank among the distinct ones."""
    if hi - lo + 1 > max(4 * len(line), 1 << 22):
        uniq, at = np.unique(line, return_inverse=True)
        return _as(at, np.int64), len(uniq)
    return _as(line - lo, np.int64), hi - lo + 1


def l1_sent(owner, line, mask, wr, load, line_bytes: int, l1_bytes: int) -> np.ndarray:
    """cache._l1_filter's result in compiled loops (see ``_l1``), an entry per row."""
    _compile()
    res = np.empty(len(owner), dtype=np.uint8)
    if len(owner):
        o_lo = int(owner.min())
        at, n_lines = _table(line, int(line.min()), int(line.max()))
        _l1(np.arange(len(owner)), at, n_lines, _as(owner - o_lo, np.int64), int(owner.max()) - o_lo + 1,
            _as(mask, np.uint8), _as(wr, np.bool_), _as(load, np.bool_), line_bytes, l1_bytes, res)
    return res


def l1_window(t, s_row, s_line, s_mask, base, owner, wr, load, line_bytes: int, l1_bytes: int) -> tuple:
    """cache._l1_stage in compiled loops: the window's (rows, lines, sectors sent on to L2, load sectors L1
    served); ``s_*``: the stream's rows, lines and masks; ``base``, ``owner``, ``wr``, ``load``: per row."""
    _compile()
    n = len(t)
    row = np.empty(n, dtype=np.int64)
    line = np.empty(n, dtype=np.result_type(s_line.dtype, base.dtype))
    mask = np.empty(n, dtype=np.uint8)
    sent = np.empty(n, dtype=np.uint8)
    if not n:
        return row, line, sent, 0
    lo, hi = _gather(t, s_row, s_line, s_mask, base, row, line, mask)
    at, n_lines = _table(line, int(lo), int(hi))
    served = _l1(row, at, n_lines, _as(owner, np.int64), int(owner.max()) + 1, mask, _as(wr, np.bool_),
                 _as(load, np.bool_), line_bytes, l1_bytes, sent)
    return row, line, sent, int(served)
