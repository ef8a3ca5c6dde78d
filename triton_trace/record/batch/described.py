"""What is known about a batched block's values without reading its lanes: broadcast cores, and affine
descriptions of integer and pointer blocks.

A description says that row ``r`` of a handle's data (one program of the chunk) holds
``first[r] + sum_d strides[d] * index_d`` in every lane: ``tl.arange``, a splat program id, ``pid * BLOCK +
tl.arange(0, BLOCK)``, ``offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak`` and the pointers built
from them all have one. The builder methods that make such blocks describe their results (rules below), at
the cost of a few operations per program; a memory op whose pointers are described is attributed and
recorded from the description (record/memory/attribution.py) instead of probing every lane.

Exactness: a description is attached to the data array it describes (a handle whose data is replaced
loses it); integer results are described only when every lane's exact value fits the result's dtype
(so the lanes hold it unwrapped); pointer arithmetic wraps modulo 2**64 in the interpreter and in the
description alike. ``TRITON_TRACE_CHECK_DESCRIPTIONS=1`` compares every description with the lanes as it
is made (tests/record/test_pointers.py turns it on for the batch suite's kernels; Triton's language suite passes
traced with it on: tests/triton_suite/on_gpu_machine.sh).
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ...model.lanes.encoding import core
from ..interp.access import TensorHandle
from .affine import affine_offsets, extent
from ..patching import carried

TAG = "_tt_affine"        # (the data array described, first value per row (int64), strides)
_RANGES = {np.dtype(np.int32): (-(1 << 31), (1 << 31) - 1), np.dtype(np.int64): (-(1 << 63), (1 << 63) - 1),
           np.dtype(np.uint32): (0, (1 << 32) - 1)}
_SAFE = 1 << 62           # magnitudes below this add and multiply in int64 without wrapping
_CHECK = os.environ.get("TRITON_TRACE_CHECK_DESCRIPTIONS") == "1"


def is_pointer(handle) -> bool:
    is_ptr = getattr(getattr(handle, "dtype", None), "is_ptr", None)
    return bool(is_ptr and is_ptr())


class LazyPointers(TensorHandle):
    """A described pointer block whose lanes are computed only when something reads ``data``. A loop's
    ``ptrs += step`` makes one per trip, and a load of it (batch/chunk.py) is served from the description."""

    def __init__(self, dtype, shape: tuple, first: np.ndarray, strides: tuple):
        self.dtype, self.attr = dtype, {}
        self.shape, self._first, self._strides, self._data = tuple(shape), first, tuple(strides), None

    @property
    def data(self):
        if self._data is None:
            first = np.broadcast_to(self._first, self.shape[:1])
            self._data = affine_offsets(first, self._strides, self.shape[1:]).view(np.uint64)
        return self._data

    @data.setter
    def data(self, value):
        self._data, self._first = value, None

    def addresses(self) -> "Addresses":
        return Addresses(self)


class Addresses:
    """What the memory seam gets for a lazy pointer block instead of its addresses: the shape, the
    description, and ``materialise()`` for the paths that need every lane."""
    dtype = np.dtype(np.uint64)

    def __init__(self, handle: LazyPointers):
        self._handle = handle
        self.shape, self.ndim = handle.shape, len(handle.shape)
        self.first, self.strides = np.broadcast_to(handle._first, handle.shape[:1]), handle._strides

    def materialise(self) -> np.ndarray:
        return self._handle.data


def lazy(handle) -> bool:
    """A lazy pointer block whose lanes nothing has read yet."""
    return isinstance(handle, LazyPointers) and handle._data is None and handle._first is not None


def shape_of(handle) -> tuple:
    return handle.shape if lazy(handle) else np.shape(handle.data)


def known(handle) -> Optional[tuple]:
    """(first value of each row as int64 (a pointer's address bits), strides), or None. A per-program
    scalar, or a block that only broadcasts one (a splat), describes itself."""
    if isinstance(handle, LazyPointers) and handle._first is not None:
        return handle._first, handle._strides
    data = getattr(handle, "data", None)
    tag = carried(handle, TAG, None)
    if tag is not None and tag[0] is data:
        return tag[1], tag[2]
    if not isinstance(data, np.ndarray) or not data.ndim:
        return None
    c = core(data)
    if c[:1].size > 1:
        return None
    # a per-program scalar, or one broadcast over the block (every stride 0)
    c = c.reshape(len(c))
    if data.dtype == np.uint64 and is_pointer(handle):
        return c.view(np.int64), (0,) * (data.ndim - 1)
    if data.dtype in _RANGES:
        return c.astype(np.int64), (0,) * (data.ndim - 1)
    return None


def describe(handle, first: np.ndarray, strides: tuple) -> None:
    data = handle.data
    strides = tuple(0 if n == 1 else int(s) for s, n in zip(strides, data.shape[1:]))
    first = np.asarray(first, dtype=np.int64)
    if _CHECK:
        want = affine_offsets(np.broadcast_to(first, data.shape[:1]), strides, data.shape[1:])
        got = data.view(np.int64) if data.dtype == np.uint64 else data.astype(np.int64)
        if not np.array_equal(want, got):
            raise AssertionError(f"a wrong description: first {first[:4]}, strides {strides}, shape {data.shape}")
    setattr(handle, TAG, (data, first, strides))


def _bounds(first: np.ndarray, strides: tuple, shape: tuple) -> tuple:
    """Per row: the smallest and largest value of the described block (int64 arrays)."""
    lo, hi = extent(strides, shape)
    return first + lo, first + hi


def _magnitude(k: tuple, shape: tuple) -> int:
    first, strides = k
    if not len(first):
        return 0
    return max(abs(int(first.min())), abs(int(first.max()))) + sum(abs(s) * (n - 1) for s, n in zip(strides, shape))


def _fits(out, first: np.ndarray, strides: tuple) -> bool:
    rng = _RANGES.get(out.data.dtype)
    if rng is None or not len(first):
        return False
    lo, hi = _bounds(first, strides, out.data.shape[1:])
    return int(lo.min()) >= rng[0] and int(hi.max()) <= rng[1]


# -- the rules -------------------------------------------------------------------------------------------
def make_range(out, start: int) -> None:
    describe(out, np.array([start]), (1,))


def splat(out, arg) -> None:
    """A value repeated over the block: its description is the value (every stride 0)."""
    if out.data.dtype in _RANGES or (out.data.dtype == np.uint64 and is_pointer(out)):
        d = arg.data
        first = d.reshape(d.shape[0], -1)[:, 0]
        describe(out, first.view(np.int64) if first.dtype == np.uint64 else first, (0,) * (out.data.ndim - 1))


def expand_dims(out, arg, axis: int) -> None:
    k = known(arg)
    if k is not None and len(k[1]) == arg.data.ndim - 1:
        strides = list(k[1])
        strides.insert(axis if axis >= 0 else len(strides) + 1 + axis, 0)
        describe(out, k[0], tuple(strides))


def broadcast(out, arg) -> None:
    k = known(arg)
    if k is not None and len(k[1]) == out.data.ndim - 1:
        describe(out, k[0], k[1])


def trans(out, arg, perm) -> None:
    k = known(arg)
    if k is not None and len(k[1]) == len(perm):
        describe(out, k[0], tuple(k[1][p] for p in perm))


def binary(out, lhs, rhs, op) -> None:
    """``+``, ``-``, ``*`` by a constant, and ``%`` that changes nothing, on described integer blocks."""
    if out.data.dtype not in _RANGES or out.data.ndim < 2:     # a per-program scalar describes itself
        return
    kl, kr = known(lhs), known(rhs)
    shape = out.data.shape[1:]
    if kl is None or kr is None or len(kl[1]) != len(shape) or len(kr[1]) != len(shape):
        return
    if _magnitude(kl, shape) >= _SAFE or _magnitude(kr, shape) >= _SAFE:
        return
    (fl, sl), (fr, sr) = kl, kr
    if op is np.add or op is np.subtract:
        sign = 1 if op is np.add else -1
        first = fl + fr if sign > 0 else fl - fr
        strides = tuple(a + sign * b for a, b in zip(sl, sr))
    elif op is np.multiply:
        for (fa, sa), (fb, sb) in ((kl, kr), (kr, kl)):
            if not any(sb) and len(fb) and (fb == fb[0]).all() and abs(int(fb[0])) < (1 << 31) \
                    and _magnitude((fa, sa), shape) < (1 << 31):
                c = int(fb[0])
                first, strides = fa * c, tuple(s * c for s in sa)
                break
        else:
            return
    elif op is np.fmod or op is np.remainder:
        # x % m is x when 0 <= x < m in every lane of a row (m the same over the row)
        if any(sr):
            return
        lo, hi = _bounds(fl, sl, shape)
        if not ((lo >= 0) & (hi < fr)).all():
            return
        first, strides = fl, sl
    else:
        return
    first = np.broadcast_to(first, out.data.shape[:1])
    if _fits(out, first, strides):
        describe(out, first, strides)


def addptr(ptr, offset, element_bytes: int, shape: tuple) -> Optional[tuple]:
    """The description of ``ptr + offset`` (result ``shape``), or None."""
    kp, ko = known(ptr), known(offset)
    block = shape[1:]
    if kp is None or ko is None or len(kp[1]) != len(block) or len(ko[1]) != len(block):
        return None
    if _magnitude(ko, block) * element_bytes >= _SAFE:
        return None
    step = (element_bytes * ko[0].astype(np.uint64)).view(np.int64)
    first = (kp[0].view(np.uint64) + step.view(np.uint64)).view(np.int64)     # wraps as the addresses do
    strides = tuple(0 if n == 1 else a + element_bytes * b for a, b, n in zip(kp[1], ko[1], block))
    return np.broadcast_to(first, shape[:1]), strides


def identity_side(lc: np.ndarray, rc: np.ndarray, op) -> Optional[np.ndarray]:
    """For boolean ``&`` / ``|`` where one side is all true / all false: the other side, which is the
    result (broadcast to the result's shape by the caller); else None."""
    if lc.dtype != np.bool_ or rc.dtype != np.bool_:
        return None
    if op is np.bitwise_and or op is np.logical_and:
        neutral = lambda x: x.all()
    elif op is np.bitwise_or or op is np.logical_or:
        neutral = lambda x: not x.any()
    else:
        return None
    size = int(np.prod(np.broadcast_shapes(lc.shape, rc.shape)))
    for side, other in ((rc, lc), (lc, rc)):      # only sides smaller than the result: cheap to look at
        if side.size < size and neutral(side):
            return other
    return None
