"""The L2 stepped access by access in one compiled loop (loops.c, built and loaded by native/cacheloops.py).

The lock-step simulation (lockstep.py) runs every set's t-th access at once: numpy passes per step, after
sorting the stream by set, so its cost is a dozen passes over the stream plus two sorts. The same cache
stepped in time order by a compiled loop costs a few nanoseconds an access and sorts nothing. Both apply the
same rules to the same state, so every count is the same (tests/analysis/test_cache_jit.py runs both on streams that
evict, clean dirty lines, drop copies and repeat accesses); lockstep.py stays the path where no C compiler
works and under ``TRITON_TRACE_NO_JIT=1``.

Times differ only in scale: lock-step stamps an access with its set's step, this loop with its place in
the stream. Either way a set's accesses are stamped in time order, and LRU only compares stamps of one set.
"""
from __future__ import annotations

import numpy as np

from ...native import cacheloops as native
from .. import parallel

ENABLED = not native.DISABLED


def available() -> bool:
    """Whether the compiled loops are loaded, or can be (built on first use, once per machine)."""
    return ENABLED and native.library() is not None


def use(entries: int) -> bool:
    """Whether a stream of ``entries`` goes through the compiled loops: any stream, where they load (a call
    costs microseconds; loading them, a millisecond once per process)."""
    return available()


def new_state(n_sets: int, ways: int, dtype) -> np.ndarray:
    """The cache's state, one row per set so that an access touches a few neighbouring memory lines: tags,
    stamps, and valid | dirty << 4 sectors per way, then the set's previous access (line, kind), its dirty
    lines and its next stamp (stamps count a set's own steps: they fit the row's type)."""
    st = np.zeros((n_sets, 3 * ways + 4), dtype=dtype)
    st[:, :2 * ways] = -1                    # no tag, never used
    st[:, 3 * ways] = -1                     # no previous access
    return st


def _lib():
    lib = native.library()
    if lib is None:
        raise RuntimeError(f"the cache simulation's compiled loops are not available: {native.failure()}")
    return lib


def steps(l2, sets, line, kind) -> tuple:
    """lockstep.L2.steps for every access: (their indices, sectors each fetched, made dirty, found valid)."""
    lib = _lib()
    n = len(sets)
    got = np.empty(n, dtype=np.int64)
    made = np.empty(n, dtype=np.int64)
    hit_s = np.empty(n, dtype=np.int64)
    st = l2.state
    t = st.dtype
    sets, line, kind = _as(sets, t), _as(line, t), _as(kind, np.uint8)
    fn = getattr(lib, "tt_steps_" + native.suffix(t))
    l2.evicted += int(fn(native.ptr(st), st.shape[1], native.ptr(sets), native.ptr(line), native.ptr(kind), n,
                         native.ptr(l2.widen), _limit(l2), native.ptr(got), native.ptr(made), native.ptr(hit_s)))
    return np.arange(n), got, made, hit_s


SPLIT_ENTRIES = 1 << 16    # a window of at least this many entries takes the two partitions on two threads


def entries(l2, row, line, mask, near, rw, read_s, write_s, totals) -> None:
    """cache._l2_slice for a window's entries, those L1 serves entirely included (``mask`` 0: skipped), in one
    compiled loop (loops.c's tt_entries); on two cores, one loop per L2 partition, side by side."""
    lib = _lib()
    st = l2.state
    t = st.dtype
    keep = (_as(row, np.int64), _as(line, t), native.as_bytes(mask), _as(near, np.int64), native.as_bytes(rw))
    fn = getattr(lib, "tt_entries_" + native.suffix(t))
    head = (native.ptr(st), st.shape[1], *(native.ptr(a) for a in keep), len(row), l2.per_part,
            native.ptr(l2.widen), _limit(l2))

    def run(part, r, w, tot):
        return int(fn(*head, part, native.ptr(r), native.ptr(w), native.ptr(tot)))
    if len(row) < SPLIT_ENTRIES or parallel.cores() < 2:
        l2.evicted += run(-1, read_s, write_s, totals)
        return
    counts = (np.zeros_like(read_s), np.zeros_like(write_s), np.zeros_like(totals))
    side = parallel.Beside(run, (1,) + counts, True)
    evicted = run(0, read_s, write_s, totals)
    evicted += side.result()
    read_s += counts[0]
    write_s += counts[1]
    totals += counts[2]
    l2.evicted += evicted


def _as(a, dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dtype)


def _limit(l2) -> int:
    return -1 if l2.dirty_ways is None else int(l2.dirty_ways)


def stream_args(t, s_row, s_line, s_mask, base) -> tuple:
    """A window's stream indices and the stream's rows, lines and masks, with each row's base line, as the loops
    over stream indices take them: (name suffix, arrays kept alive for the call)."""
    t, s_row, s_line = (_ints(a) for a in (t, s_row, s_line))
    ltype = np.int32 if base.dtype == np.int32 else np.int64
    keep = (t, s_row, s_line, native.as_bytes(s_mask), _as(base, ltype))
    return "_".join(native.suffix(a.dtype) for a in (t, s_row, s_line, keep[-1])), keep


def _ints(a: np.ndarray) -> np.ndarray:
    """``a`` as C-ordered int32 or int64 (as it is, where it is one: the loops take either)."""
    return np.ascontiguousarray(a) if a.dtype in (np.int32, np.int64) else a.astype(np.int64)


def open_stream(co, t, rows, l2, n_rows: int, lines: int):
    """streaming.plan's closed form in compiled passes (loops.c's tt_open): (read sectors per row, write sectors
    per row, written back, totals); -2 when a line enters L2 twice (the first repeat ends the pass), -3 when a
    line lies outside 0..``lines``."""
    lib = _lib()
    read_s = np.zeros(n_rows, dtype=np.int64)
    write_s = np.zeros(n_rows, dtype=np.int64)
    totals = np.zeros(5, dtype=np.int64)
    name, keep = stream_args(t, co.stream_row, co.stream_line, co.stream_mask, rows.base)
    near, rw = _as(rows.near, np.int64), native.as_bytes(rows.rw)
    limit = 1 << 62 if l2.dirty_ways is None else int(l2.dirty_ways)
    ev = int(getattr(lib, "tt_open_" + name)(native.ptr(keep[0]), len(keep[0]), *(native.ptr(a) for a in keep[1:]),
                                            lines, native.ptr(near), native.ptr(rw), l2.per_part,
                                            native.ptr(l2.widen), l2.ways, limit, l2.n_sets, native.ptr(read_s),
                                            native.ptr(write_s), native.ptr(totals)))
    if ev == -1:
        raise MemoryError("the cache simulation's closed form could not allocate its tables")
    if ev < 0:           # -2: a line repeats; -3: one lies outside the table (numpy's passes then decide)
        return ev
    return read_s, write_s, ev, tuple(int(x) for x in totals)
