"""The L2 stepped access by access in one compiled loop, where numba is installed.

The lock-step simulation (lockstep.py) runs every set's t-th access at once: numpy passes per step, after
sorting the stream by set, so its cost is a dozen passes over the stream plus two sorts. The same cache
stepped in time order by a loop numba compiles costs a few nanoseconds an access and sorts nothing. Both
apply the same rules to the same state, so every count is the same (tests/test_cache_jit.py runs both on
streams that evict, clean dirty lines, drop copies and repeat accesses); lockstep.py stays the path where
numba is not installed (the GPU machine has none) and under ``TRITON_TRACE_NO_JIT=1``.

Times differ only in scale: lock-step stamps an access with its set's step, this loop with its place in
the stream. Either way a set's accesses are stamped in time order, and LRU only compares stamps of one set.
"""
from __future__ import annotations

import importlib.util
import os
import threading

import numpy as np

from ..record.patching import BUILTINS_FENCE
from . import parallel

_POP = np.array([bin(i).count("1") for i in range(16)], dtype=np.int64)

ENABLED = importlib.util.find_spec("numba") is not None and not os.environ.get("TRITON_TRACE_NO_JIT")
# Loading the compiled loops from numba's cache costs ~0.3 s, once per process (importing numba, which imports
# scipy where it is installed, then LLVM starting up), and compiling them after an install a few seconds,
# once. Most of it is Python holding the interpreter lock, so loading beside an analysis slows the analysis
# as much: a stream takes the loops when it is long enough to repay loading them (MIN_ENTRIES), or once they
# are loaded (in a notebook, while the shell waits for the next cell: ``prefetch``), when it is long enough
# that the numpy passes cost more than a call (MIN_LOADED).
MIN_ENTRIES = 1 << 22
MIN_LOADED = 1 << 16
_compiled = False
_loaded = False
_failed = None             # why numba could not load the loops (the numpy passes give the same counts)
_lock = threading.RLock()
_loader = None             # the background load, once started


def use(entries: int) -> bool:
    """Whether a stream of ``entries`` goes through the compiled loops."""
    if not ENABLED or _failed is not None:
        return False
    if not _loaded and entries >= MIN_ENTRIES:
        _load()              # (waits for a background load under way)
    return _loaded and entries >= MIN_LOADED


def prefetch() -> None:
    """Load the compiled loops on a background thread, once per process, while it has nothing else to do
    (a notebook between cells: view/notebook.py). Not a daemon: a process that ends
    meanwhile waits for the load rather than tearing LLVM down under it."""
    global _loader
    if not ENABLED or _loaded or _loader is not None:
        return
    with _lock:
        if _loader is None and not _loaded:
            _loader = threading.Thread(target=_load, name="triton_trace jit load")
            _loader.start()


def _load() -> None:
    """Import numba, wrap the loops and load each one's compiled code (a call on a few entries)."""
    global _loaded, _failed
    # The fence first: numba captures Python's builtins when it is imported, and a traced launch patches them.
    with BUILTINS_FENCE, _lock:
        if _loaded or _failed is not None:
            return
        try:
            _compile()
            _exercise()
            _loaded = True
        except Exception as exc:        # a broken numba install: the numpy passes stay
            _failed = exc


def new_state(n_sets: int, ways: int, dtype) -> np.ndarray:
    """The cache's state, one row per set so that an access touches a few neighbouring memory lines: tags,
    stamps, and valid | dirty << 4 sectors per way, then the set's previous access (line, kind), its dirty
    lines and its next stamp (stamps count a set's own steps: they fit the row's type)."""
    st = np.zeros((n_sets, 3 * ways + 4), dtype=dtype)
    st[:, :2 * ways] = -1                    # no tag, never used
    st[:, 3 * ways] = -1                     # no previous access
    return st


def _one(st, s, tg, k, widen, dirty_ways) -> tuple:
    """One access (kind ``k``: sector mask << 3 | read << 2 | write << 1 | copy; see lockstep.L2.run) to set
    ``s``: (sectors fetched, made dirty, found valid, written back). ``dirty_ways`` < 0: no dirty limit."""
    row = st[s]
    ways = (len(row) - 4) // 3
    m8 = k >> 3
    rd = (k >> 2) & 1
    if row[3 * ways] == tg and row[3 * ways + 1] == k:
        return 0, 0, (_POP[m8] if rd else 0), 0   # the set's previous access again: hits all, changes nothing
    row[3 * ways] = tg
    row[3 * ways + 1] = k
    way = -1
    for w in range(ways):
        if row[w] == tg:
            way = w
            break
    hit = way >= 0
    if not hit:                     # an empty way (stamp -1), else the least recently used; ties: the first
        best = row[ways]
        way = 0
        for w in range(1, ways):
            if row[ways + w] < best:
                best = row[ways + w]
                way = w
    cp = k & 1
    wr = (k >> 1) & 1
    drop = wr == 1 and cp == 1
    vd = np.int64(row[2 * ways + way])
    df = vd >> 4
    evicted = 0
    if not hit and not drop:
        evicted += _POP[df]
    v = vd & 15 if hit else np.int64(0)
    d = df if hit else np.int64(0)
    rm = m8 if rd else np.int64(0)
    wm = m8 if (wr and not cp) else np.int64(0)
    fetch = np.int64(widen[rm & ~v & 15]) & ~v & 15
    got = 0 if cp else _POP[fetch]
    made = _POP[wm & ~d & 15]
    found = _POP[rm & v & 15]
    stamp = row[3 * ways + 3]
    row[3 * ways + 3] = stamp + 1
    if drop:
        if hit:                     # a write drops the other partition's copy (where there is none: nothing)
            row[way] = -1
            row[ways + way] = -1
            row[2 * ways + way] = 0
        new_d = np.int64(row[2 * ways + way]) >> 4
    else:
        new_d = d | wm
        row[way] = tg
        row[ways + way] = stamp
        row[2 * ways + way] = (v | fetch | m8) | (new_d << 4)
    if dirty_ways >= 0:
        row[3 * ways + 2] += (1 if new_d != 0 else 0) - (1 if df != 0 else 0)
        if row[3 * ways + 2] > dirty_ways:          # clean the least recently used dirty line (it stays, clean)
            pick = -1
            for w in range(ways):
                if row[2 * ways + w] >> 4 != 0 and (pick < 0 or row[ways + w] < row[ways + pick]):
                    pick = w
            evicted += _POP[row[2 * ways + pick] >> 4]
            row[2 * ways + pick] &= 15
            row[3 * ways + 2] -= 1
    return got, made, found, evicted


def _steps(st, sets, line, kind, widen, dirty_ways, got, made, hit_s):
    """Apply the accesses in order; fills got, made, hit_s per access; returns the sectors written back."""
    evicted = 0
    for i in range(len(sets)):
        # (uint8 mixed with int64 literals would type as float64)
        got[i], made[i], hit_s[i], ev = _one(st, sets[i], line[i], np.int64(kind[i]), widen, dirty_ways)
        evicted += ev
    return evicted


def _entries(st, row, line, home, by_line, mask, near, rw, per_part, widen, dirty_ways, part, read_s, write_s,
             totals):
    """Stream entries in time order (row, line, sectors sent on from L1; ``home``: each entry's home set, or
    with ``by_line`` each line's): each entry that sends a sector looks its line up at home, and a far one then
    in its near partition (a copy); adds DRAM sectors to ``read_s``/``write_s`` per row and (read lookups,
    read hits, write lookups, write hits) to ``totals``; returns the sectors written back. The lookup an SM
    makes first (near) decides a read's hits. ``part`` >= 0: only the lookups in that partition's sets (the
    two partitions share no set, so two threads can take one each: an entry's lookups and hits are counted
    by its near partition's, its DRAM sectors by its home's)."""
    evicted = 0
    for i in range(len(row)):
        if mask[i] == 0:            # served by L1 entirely
            continue
        r = row[i]
        hs = home[line[i]] if by_line else home[i]
        hp = hs // per_part
        far = near[r] != hp
        mine_home = part < 0 or hp == part
        mine_near = part < 0 or near[r] == part
        if not (mine_home or mine_near):
            continue
        m = np.int64(mask[i]) & 15
        k = (m << 3) | np.int64(rw[r])
        found = 0
        if mine_home:
            got, made, found, ev = _one(st, hs, line[i], k, widen, dirty_ways)
            evicted += ev
            read_s[r] += got
            write_s[r] += made
        if not mine_near:
            continue
        if far:
            ps = hs - per_part if hs >= per_part else hs + per_part
            _, _, found, ev = _one(st, ps, line[i], k | 1, widen, dirty_ways)
            evicted += ev
        sec = _POP[m]
        if (k >> 2) & 1:
            totals[0] += sec
            totals[1] += found
        if (k >> 1) & 1:
            totals[2] += sec
            totals[3] += sec
    return evicted


def _open(row, line, home, mask, rw, near, per_part, widen, ways, dirty_ways, n_sets, read_s, write_s, totals):
    """streaming._all_open in two compiled passes (no line enters its set twice: every lookup misses, and a
    dirty line is written back when ``ways`` more lines, or ``dirty_ways`` more dirty ones, enter its set
    after it); returns the sectors written back while the kernel ran."""
    fills = np.zeros(n_sets, dtype=np.int64)
    dirty_fills = np.zeros(n_sets, dtype=np.int64)
    for i in range(len(row)):
        r = row[i]
        m = np.int64(mask[i]) & 15
        k = np.int64(rw[r])
        sec = _POP[m]
        if k & 4:
            read_s[r] += _POP[np.int64(widen[m]) & 15]
            totals[0] += sec
        if k & 2:
            write_s[r] += sec
            totals[2] += sec
            totals[3] += sec
            dirty_fills[home[i]] += 1 if sec else 0
        fills[home[i]] += 1
        if near[r] != home[i] // per_part and not k & 2:     # a far read's copy in the near partition
            h = home[i]
            fills[h - per_part if h >= per_part else h + per_part] += 1
    evicted = 0
    for i in range(len(row)):               # fills counted down: what is left is what enters after
        r = row[i]
        h = home[i]
        k = np.int64(rw[r])
        sec = _POP[np.int64(mask[i]) & 15] if k & 2 else 0
        fills[h] -= 1
        if sec:
            dirty_fills[h] -= 1
            if fills[h] >= ways or dirty_fills[h] >= dirty_ways:
                evicted += sec
        if near[r] != h // per_part and not k & 2:
            fills[h - per_part if h >= per_part else h + per_part] -= 1
    return evicted


def _compile() -> None:
    """Replace the loops above by numba's compiled versions (loaded from its cache after the first time).
    Under ``_load``'s locks: two simulations may run at once (analyze's what-if replays run beside the
    launch's own)."""
    global _compiled, _open, _one, _steps, _entries
    if _compiled:
        return
    import numba
    jit = numba.njit(cache=True, nogil=True)
    _open, _steps, _entries = jit(_open), jit(_steps), jit(_entries)
    _one = numba.njit(cache=True, nogil=True, inline="always")(_one)    # (the others see it when they compile)
    _compiled = True


def _exercise() -> None:
    """Call every loop once on a few entries, with the types a stream of int32 lines passes (int64 lines,
    past 2^31, load when first met). The loops themselves, not the functions around them, which a caller may
    be counting the calls of when the load happens on its thread."""
    st = new_state(4, 2, np.int32)
    widen = np.arange(16, dtype=np.uint8)          # (the type lockstep's sector-pair table has)
    i64, u8, i32 = np.zeros(2, np.int64), np.ones(2, np.uint8), np.zeros(2, np.int32)
    counts = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(5, np.int64))
    _entries(st, i64, i32, i32, True, u8, i64, u8, 2, widen, 1, -1, *counts)
    _steps(st, i32, i32, u8, widen, 1, i64.copy(), i64.copy(), i64.copy())
    _open(i64, i32, i32, u8, u8, i64, 2, widen, 2, 1, 4, *counts)


def njit(fn):
    """``fn`` compiled as these loops are (on disk once, without the interpreter lock while it runs): for
    the loops of the modules that use this one's loading (l1jit.py), which it cannot import."""
    _ensure()
    import numba
    return numba.njit(cache=True, nogil=True)(fn)


def _ensure() -> None:
    if not _compiled:
        _load()
        if _failed is not None:
            raise _failed


def steps(l2, sets, line, kind) -> tuple:
    """lockstep.L2.steps for every access: (their indices, sectors each fetched, made dirty, found valid)."""
    _ensure()
    n = len(sets)
    got = np.empty(n, dtype=np.int64)
    made = np.empty(n, dtype=np.int64)
    hit_s = np.empty(n, dtype=np.int64)
    t = l2.state.dtype                # (fixed types: one compiled version for each width of lines)
    l2.evicted += int(_steps(l2.state, _as(sets, t), _as(line, t), _as(kind, np.uint8), l2.widen, _limit(l2),
                             got, made, hit_s))
    return np.arange(n), got, made, hit_s


SPLIT_ENTRIES = 1 << 16    # a window of at least this many entries takes the two partitions on two threads


def entries(l2, row, line, mask, near, rw, read_s, write_s, totals) -> None:
    """cache._l2_slice for a window's entries, those L1 serves entirely included (``mask`` 0: skipped), in one
    compiled loop (see ``_entries``); on two cores, one loop per L2 partition, side by side."""
    _ensure()
    t = l2.state.dtype
    table = l2.home_table(line)
    home = l2.home_sets(line) if table is None else table
    args = (l2.state, _as(row, np.int64), _as(line, t), _as(home, t), table is not None, _as(mask, np.uint8),
            _as(near, np.int64), _as(rw, np.uint8), l2.per_part, l2.widen, _limit(l2))
    if len(row) < SPLIT_ENTRIES or parallel.cores() < 2:
        l2.evicted += int(_entries(*args, -1, read_s, write_s, totals))
        return
    counts = (np.zeros_like(read_s), np.zeros_like(write_s), np.zeros_like(totals))
    side = parallel.Beside(_entries, args + (1,) + counts, True)
    evicted = int(_entries(*args, 0, read_s, write_s, totals))
    evicted += int(side.result())
    read_s += counts[0]
    write_s += counts[1]
    totals += counts[2]
    l2.evicted += evicted


def _as(a, dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dtype)


def _limit(l2) -> int:
    return -1 if l2.dirty_ways is None else int(l2.dirty_ways)


def open_stream(l2, row, line, mask, near, rw, per_part: int, n_rows: int) -> tuple:
    """streaming._all_open's (read sectors per row, write sectors per row, written back, totals)."""
    _ensure()
    read_s = np.zeros(n_rows, dtype=np.int64)
    write_s = np.zeros(n_rows, dtype=np.int64)
    totals = np.zeros(5, dtype=np.int64)
    t = l2.state.dtype
    limit = 1 << 62 if l2.dirty_ways is None else int(l2.dirty_ways)
    ev = _open(_as(row, np.int64), _as(line, t), _as(l2.home_sets(line), t), _as(mask, np.uint8), _as(rw, np.uint8),
               _as(near, np.int64), per_part, l2.widen, l2.ways, limit, l2.n_sets, read_s, write_s, totals)
    return read_s, write_s, int(ev), tuple(int(x) for x in totals)

