"""Which elements more than one program touches: the one mechanism behind the race detector (analysis,
over a whole launch) and the batched executor's exactness check (recording, over one chunk).

Pure numpy on element offsets and program numbers; nothing here knows about Triton or traces.
"""
from __future__ import annotations

import numpy as np


def ranges_disjoint(lo: np.ndarray, hi: np.ndarray) -> bool:
    """True when the programs' inclusive element ranges [lo, hi] (one per program; lo > hi for a program
    that touched nothing) do not overlap, so no element is shared: the cheap answer for kernels that
    partition memory into rows or blocks."""
    used = lo <= hi
    lo, hi = lo[used], hi[used]
    order = np.argsort(lo, kind="stable")
    return bool((hi[order][:-1] < lo[order][1:]).all())


def programs_meet(starts: np.ndarray, ends: np.ndarray, progs: np.ndarray) -> bool:
    """Whether two inclusive intervals [start, end] of different programs overlap (intervals of one
    program may). One sort and one running maximum: for the earliest-ending offending pair, the interval
    holding the largest end so far when the later one starts belongs to another program."""
    if len(starts) < 2:
        return False
    order = np.argsort(starts, kind="stable")
    s, e, p = starts[order], ends[order], progs[order].astype(np.int64)
    width = int(p.max()) + 1
    lo = int(e.min())
    if (int(e.max()) - lo + 1) * width >= 1 << 62:
        return True                 # the key below would overflow: say they may meet (the lanes decide)
    held = np.maximum.accumulate((e - lo) * width + p)      # largest end so far, and (on ties) a program
    run_end, run_prog = held[:-1] // width + lo, held[:-1] % width
    return bool(((s[1:] <= run_end) & (run_prog != p[1:])).any())


def shared_elements(el: np.ndarray, prog: np.ndarray, size: int, scratch: np.ndarray = None) -> np.ndarray:
    """Per element of a storage of ``size`` elements: touched by two or more programs.

    ``el`` and ``prog`` are parallel arrays of accessed elements and the programs accessing them. One
    scatter and one gather instead of sorting: every element remembers one of its programs, and a lane
    whose program differs from the remembered one proves the element is shared. ``scratch`` (int64 of
    ``size``, any contents) avoids allocating the shadow array."""
    owner = np.empty(size, dtype=np.int64) if scratch is None else scratch
    owner[el] = prog
    shared = np.zeros(size, dtype=bool)
    shared[el[owner[el] != prog]] = True
    return shared
