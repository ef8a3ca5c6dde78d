"""Batched memory ops whose lanes are plain pointer arithmetic: every program's addresses are its first
address plus one pattern of strides. Recognising that once per op lets the recorder skip the scans it
would otherwise make over every lane (bounds, alignment, the lane encoding's pattern test, the chunk
check's per-program ranges).
"""
from __future__ import annotations

import functools
import math
import operator
from typing import NamedTuple, Optional

import numpy as np

from ...model.lanes.encoding import pattern

AFFINE_MIN_LANES = 64         # fewer lanes per program: probing costs more than it saves


class AffineRows(NamedTuple):
    addrs: np.ndarray      # a fresh copy of the addresses (callers may overwrite it)
    strides: tuple         # bytes per step along each block dimension (0 for dimensions of size 1)
    lo: int                # the smallest and largest address of any lane
    hi: int
    bits: int              # the bitwise or of every program's first address and the strides
    first: np.ndarray      # every program's first address


def affine_rows(a: np.ndarray) -> Optional[AffineRows]:
    """The addresses of a batched op, (programs, *block shape), when every program's are its first address
    plus one pattern (the same strides in every program: plain pointer arithmetic), else None. Two passes
    over the lanes (build and compare) stand in for the min, max, alignment and pattern scans."""
    shape = a.shape[1:]
    if a.ndim < 2 or not a.size or math.prod(shape) < AFFINE_MIN_LANES:
        return None
    first = a.reshape(a.shape[0], -1)[:, 0]
    row0 = a[0].reshape(-1)
    strides, inner = [], 1
    for size in reversed(shape):
        strides.append(int(row0[inner]) - int(row0[0]) if size > 1 else 0)
        inner *= size
    strides = tuple(reversed(strides))
    pat = _pattern(shape, strides)
    built = first.reshape((-1,) + (1,) * len(shape)) + pat.reshape(shape)
    if not np.array_equal(built, a):
        return None
    p_lo, p_hi = int(pat.min()), int(pat.max())
    bits = int(np.bitwise_or.reduce(first)) | functools.reduce(operator.or_, (abs(v) for v in strides), 0)
    return AffineRows(built, strides, int(first.min()) + p_lo, int(first.max()) + p_hi, bits, first.copy())


def described(first: np.ndarray, strides: tuple, shape: tuple) -> Optional[AffineRows]:
    """What ``affine_rows`` finds for addresses already known to be ``first`` plus the pattern of ``strides``
    over ``shape`` (batch/pointers.py passes it on through pointer arithmetic), without reading a lane;
    ``addrs`` is None: the caller has the addresses."""
    if len(strides) != len(shape) or not len(first) or math.prod(shape) < AFFINE_MIN_LANES:
        return None
    strides = tuple(0 if n == 1 else int(s) for s, n in zip(strides, shape))
    p_lo, p_hi = extent(strides, shape)
    bits = int(np.bitwise_or.reduce(first)) | functools.reduce(operator.or_, (abs(v) for v in strides), 0)
    return AffineRows(None, strides, int(first.min()) + p_lo, int(first.max()) + p_hi, bits, first)


@functools.lru_cache(maxsize=64)
def _pattern(shape: tuple, strides: tuple) -> np.ndarray:
    out = pattern(shape, strides)
    out.setflags(write=False)
    return out


def extent(strides: tuple, shape: tuple) -> tuple:
    """The smallest and largest value of the pattern of ``strides`` over ``shape`` (Python ints)."""
    return (sum(min(0, s * (n - 1)) for s, n in zip(strides, shape)),
            sum(max(0, s * (n - 1)) for s, n in zip(strides, shape)))


def affine_offsets(first: np.ndarray, strides: tuple, shape: tuple) -> np.ndarray:
    """Every program's offsets, (programs, *shape): its first offset plus the pattern of ``strides``."""
    return first.reshape((-1,) + (1,) * len(shape)) + _pattern(shape, strides).reshape(shape)


class LazyOffsets:
    """Every program's element offsets of an affine access, (programs, *shape), built only when something
    reads them as an array (a store's scatter, a lane check): loads of described pointers are recorded,
    checked and gathered from ``first`` and ``strides`` alone."""
    __slots__ = ("first", "strides", "shape", "_data")
    dtype = np.dtype(np.int64)

    def __init__(self, first: np.ndarray, strides: tuple, block: tuple):
        self.first, self.strides = first, tuple(strides)
        self.shape = (len(first),) + tuple(block)
        self._data = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def materialise(self) -> np.ndarray:
        if self._data is None:
            self._data = affine_offsets(self.first, self.strides, self.shape[1:])
        return self._data

    def rows(self, sel) -> "LazyOffsets":
        """The rows of the programs ``sel`` picks, still lazy."""
        return LazyOffsets(self.first[sel], self.strides, self.shape[1:])

    def __array__(self, dtype=None, copy=None):
        return self.materialise() if dtype is None else self.materialise().astype(dtype, copy=False)

    def reshape(self, *shape):
        return self.materialise().reshape(*shape)

    def __getitem__(self, key):
        return self.materialise()[key]

    def __len__(self) -> int:
        return self.shape[0]


def affine_runs(first: np.ndarray, strides: tuple, shape: tuple) -> Optional[tuple]:
    """The elements of an affine access as runs of consecutive elements: (starts, ends), inclusive, each
    (programs, runs per program), along a dimension of stride +-1; None when no dimension has one."""
    run = next((d for d, (s, n) in enumerate(zip(strides, shape)) if n > 1 and abs(s) == 1), None)
    if run is None:
        return None if math.prod(shape) > 1 else (first.reshape(-1, 1), first.reshape(-1, 1))
    n = shape[run]
    others = tuple(1 if d == run else size for d, size in enumerate(shape))
    starts = first.reshape(-1, 1) + _pattern(others, tuple(0 if d == run else s for d, s in enumerate(strides)))
    starts = starts + min(0, strides[run] * (n - 1))
    return starts, starts + (n - 1)


@functools.lru_cache(maxsize=64)
def _injective(shape: tuple, strides: tuple) -> bool:
    """Whether no two lanes of one program's pattern meet."""
    pat = _pattern(shape, strides)
    return len(np.unique(pat)) == pat.size


def _run_axis(strides: tuple, shape: tuple) -> Optional[int]:
    """The dimension moved a run at a time: the last when its stride is 1, else one of stride 1 when no two
    lanes of a program meet (runs then go in another order than lane by lane, which only matters for lanes
    that meet: programs stay in order, so a later program's write still wins). None: none worth it."""
    if not shape:
        return None
    if strides[-1] == 1 and shape[-1] >= 8:
        return len(shape) - 1
    axis = next((d for d, (s, n) in enumerate(zip(strides, shape)) if s == 1 and n >= 8), None)
    return axis if axis is not None and _injective(tuple(shape), tuple(strides)) else None


def _runs(view: np.ndarray, first: np.ndarray, strides: tuple, shape: tuple, writeable: bool) -> Optional[tuple]:
    """(every window of n consecutive elements of ``view``, the window each run starts at, the run
    dimension, of size n) when a dimension of stride 1 is worth moving whole (see _run_axis), else None."""
    axis = _run_axis(tuple(strides), tuple(shape))
    if axis is None or view.ndim != 1 or not view.flags.c_contiguous:
        return None
    n = shape[axis]
    rest = tuple(v for d, v in enumerate(shape) if d != axis)
    starts = first.reshape(-1, 1) + _pattern(rest, tuple(v for d, v in enumerate(strides) if d != axis)).reshape(1, -1)
    item = view.itemsize
    runs = np.lib.stride_tricks.as_strided(view, shape=(len(view) - n + 1, n), strides=(item, item),
                                           writeable=writeable)
    return runs, starts.reshape(-1), axis


def _strided(view: np.ndarray, first: np.ndarray, strides: tuple, shape: tuple, writeable: bool
             ) -> Optional[np.ndarray]:
    """Every program's block as one strided view of ``view``, (programs, *shape), when the programs' first
    offsets step evenly (a grid walking a tensor block after block) and no stride is negative, else None.
    Writing needs more: that no two lanes of the chunk meet (see _disjoint), since numpy may copy in any
    order. A contiguous chunk (a vector add's) is then one slice: copied at memory speed, where a run at a
    time indexes a row per run."""
    if view.ndim != 1 or not view.flags.c_contiguous or min(strides, default=0) < 0 or not len(first):
        return None
    step = int(first[1]) - int(first[0]) if len(first) > 1 else 0
    if step < 0 or (len(first) > 2 and not (np.diff(first) == step).all()):
        return None
    full, full_strides = (len(first),) + tuple(shape), (step,) + tuple(strides)
    if writeable and not _disjoint(full, full_strides):
        return None
    item = view.itemsize
    return np.lib.stride_tricks.as_strided(view[int(first[0]):], shape=full,
                                           strides=tuple(s * item for s in full_strides), writeable=writeable)


def _disjoint(shape: tuple, strides: tuple) -> bool:
    """Whether no two lanes of a strided layout meet, by the nesting test: taken by increasing stride, each
    stride steps past everything the smaller ones reach (sufficient, and what a grid of tiles gives)."""
    reach = 0
    for s, n in sorted((s, n) for s, n in zip(strides, shape) if n > 1):
        if s <= reach:
            return False
        reach += s * (n - 1)
    return True


def gather(view: np.ndarray, first: np.ndarray, strides: tuple, shape: tuple, copy: bool = True
           ) -> Optional[np.ndarray]:
    """``view[first[p] + pattern]`` for every program ``p`` (element ``first`` offsets and ``strides``, every
    lane inside ``view``): as one strided block where the programs step evenly (see _strided), else a run of
    consecutive elements at a time along a dimension of stride 1 (the last, or another for a transposed
    block): one row copy per run instead of one gather per lane. None when
    no dimension is such a run (the caller gathers lane by lane). Programs that all read the same block
    (layer norm's weights) get one copy, broadcast: later ops compute on it once (``core``). With ``copy``
    false, a strided block that is C-contiguous comes back as a read-only view of ``view`` (the caller makes
    sure nothing writes there while it is in use)."""
    if len(first) > 1 and first[0] == first[-1] and (first == first[0]).all():
        one = gather(view, first[:1], strides, shape, copy)
        return None if one is None else np.broadcast_to(one, (len(first),) + one.shape[1:])
    block = _strided(view, first, strides, shape, False)
    if block is not None:
        return block if not copy and block.flags.c_contiguous else np.array(block, order="C")
    found = _runs(view, first, strides, shape, False)
    if found is None:
        return None
    runs, starts, axis = found
    rest = tuple(v for d, v in enumerate(shape) if d != axis)
    out = runs[starts].reshape((len(first),) + rest + (shape[axis],))
    return out if axis == len(shape) - 1 else np.ascontiguousarray(np.moveaxis(out, -1, axis + 1))


def scatter(view: np.ndarray, first: np.ndarray, strides: tuple, shape: tuple, values: np.ndarray) -> bool:
    """``view[first[p] + pattern] = values[p]`` for every program ``p`` (every lane inside ``view``), a run at
    a time as ``gather`` reads; lanes that meet are written in the same order as lane by lane (programs in
    order; within one, runs in C order, each left to right: the last write wins). False, writing nothing,
    when ``gather`` would give None or ``view`` is read-only."""
    plan = scatter_plan(view, first, strides, shape)
    if plan is None:
        return False
    write(plan, values)
    return True


def scatter_plan(view: np.ndarray, first: np.ndarray, strides: tuple, shape: tuple) -> Optional[tuple]:
    """Where ``scatter`` would write, for ``write`` (now or later: the plan holds views of ``view``'s
    memory); None where it would not."""
    if not view.flags.writeable:
        return None
    block = _strided(view, first, strides, shape, True)
    if block is not None:
        return (block,)
    found = _runs(view, first, strides, shape, True)
    return None if found is None else found + (len(first), tuple(shape))


def write(plan: tuple, values: np.ndarray) -> None:
    """Write ``values`` (programs, *shape) where ``plan`` (scatter_plan) says."""
    if len(plan) == 1:
        np.copyto(plan[0], values)
        return
    runs, starts, axis, programs, shape = plan
    values = np.broadcast_to(values, (programs,) + shape)
    if axis != len(shape) - 1:
        values = np.moveaxis(values, axis + 1, -1)
    runs[starts] = values.reshape(len(starts), shape[axis])
