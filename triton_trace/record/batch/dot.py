"""``tl.dot`` for a chunk of programs: one stacked matmul where it gives every program's product bit for bit.

A program alone computes its tile's product with one ``np.matmul`` of two 2-D blocks (Triton's interpreter,
``create_dot``). numpy runs a stacked matmul as the same BLAS call on each 2-D slice in turn, so stacking
the chunk's blocks changes no product, provided every slice looks to BLAS as the block alone does:
C-contiguous at a 64-byte boundary (``aligned_items``; lowp.py places a lone block the same way). That is
how numpy is written, not a promise it makes, so the first product of each kind of operands (block shapes,
element types, which operands differ between programs) in a process is computed both ways and compared
byte for byte; a kind whose stacked product differs anywhere is done one program at a time from then on.
``tests/record/test_batch_dot.py`` compares the stacked product with per-block products over many shapes and types.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import triton.language as tl

from ..interp.access import TensorHandle

ALIGN = 64                       # lowp._aligned's boundary
_stacked_ok: dict = {}           # kind of operands -> the stacked product equalled the per-program ones


def aligned_buffer(shape: tuple, dtype) -> np.ndarray:
    """An array of ``shape`` whose blocks along the first axis are each C-contiguous at a 64-byte boundary."""
    dtype = np.dtype(dtype)
    item = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    step = max(-(-item // ALIGN) * ALIGN, ALIGN)
    raw = np.empty(step * shape[0] + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    inner = [dtype.itemsize]
    for size in reversed(shape[2:]):
        inner.append(inner[-1] * size)
    strides = (step,) + tuple(reversed(inner))[: len(shape) - 1]
    return np.lib.stride_tricks.as_strided(raw[start:start + step * shape[0]].view(dtype), shape=shape,
                                           strides=strides, writeable=True)


def items_placed(x: np.ndarray) -> bool:
    """Whether every block along the first axis is C-contiguous at a 64-byte boundary."""
    if x.ctypes.data % ALIGN:
        return False
    if x.ndim < 3 or len(x) == 1:
        return x.flags.c_contiguous
    return x.strides[0] % ALIGN == 0 and x[0].flags.c_contiguous


def aligned_items(h) -> TensorHandle:
    x = h.data
    if x.ndim < 3 or x.size == 0 or items_placed(x):
        return h
    out = aligned_buffer(x.shape, x.dtype)
    out[...] = x
    return TensorHandle(out, h.dtype)


def _stack_aligned(outs: list) -> TensorHandle:
    first = outs[0].data
    out = aligned_buffer((len(outs),) + first.shape, first.dtype)
    for p, o in enumerate(outs):
        out[p] = o.data
    return TensorHandle(out, outs[0].dtype)


def _slice(h, p: int) -> TensorHandle:
    return TensorHandle(h.data[p if h.data.shape[0] > 1 else 0], h.dtype)


def _rows(h, rows: np.ndarray) -> TensorHandle:
    return h if h.data.shape[0] == 1 else TensorHandle(h.data[rows], h.dtype)


def _kind(a, b, d) -> tuple:
    return tuple((h.data.shape[0] == 1, h.data.shape[1:], h.data.dtype.str, str(h.dtype)) for h in (a, b, d))


def _scratch_buffer(scratch: Optional[dict], role: str, shape: tuple) -> np.ndarray:
    """A placed float32 buffer for a widened operand, reused by the chunk's next products (each product
    only reads it while it runs): memory the process already touched, not fresh pages every trip."""
    if scratch is None:
        return aligned_buffer(shape, np.float32)
    key = (role, shape)
    out = scratch.get(key)
    if out is None:
        if len(scratch) >= 8:        # masked loops cut the active rows differently on each trip
            scratch.clear()
        out = scratch[key] = aligned_buffer(shape, np.float32)
    return out


def _as_f32(h, scratch: Optional[dict] = None, role: str = "") -> TensorHandle:
    """A float16 operand as the float32 values numpy's matmul casts it to (exact). numpy's own cast is the
    larger part of a stacked fp16 product here; torch's (vectorised) gives the same bits except that it
    quiets signalling NaNs, so an operand holding any NaN takes numpy's."""
    x = h.data
    out = _scratch_buffer(scratch, role, x.shape)
    if x.size and int((x.view(np.uint16) & 0x7FFF).max()) > 0x7C00:      # a NaN's bits
        out[...] = x
    elif x.ndim and x.shape[0] > 1 and x.strides[0] == 0:
        out[...] = x[:1].astype(np.float32)      # one block every program loaded (affine.gather): widened once
    elif not x.flags.writeable:
        np.copyto(out, x)                         # (torch will not wrap a read-only array without a warning)
    else:
        # on one thread: torch's OpenMP workers spin after a parallel copy and take the core numpy's BLAS
        # needs for the product that follows (on two cores: the copy 5x and the matmul 2x slower)
        threads = torch.get_num_threads()
        if threads > 1:
            torch.set_num_threads(1)
        try:
            torch.from_numpy(out).copy_(torch.from_numpy(x))
        finally:
            if threads > 1:
                torch.set_num_threads(threads)
    return TensorHandle(out, tl.float32)


def _stacked_operands(a, b, d, scratch: Optional[dict] = None) -> tuple:
    """The operands of a stacked product: ``a`` and ``b`` placed as a lone program's blocks are (``d`` is
    only added, element by element); float16 ones widened up front where the product is float32
    (``np.matmul(a, b, dtype=float32)`` casts them to float32 and multiplies those)."""
    if d.data.dtype == np.float32 and a.data.dtype == np.float16 and b.data.dtype == np.float16 and \
            str(a.dtype) == str(b.dtype) == "fp16":
        return _as_f32(a, scratch, "a"), _as_f32(b, scratch, "b"), d
    return aligned_items(a), aligned_items(b), d


def _words(x: np.ndarray, rows: int) -> np.ndarray:
    """The blocks of ``x`` (C-contiguous, one per program) as ``rows`` rows of the widest unsigned words that
    divide a block: compared byte for byte, whatever the element type (NaN bits included)."""
    word = next(w for w in (8, 4, 2, 1) if x[0].nbytes % w == 0)
    return x.reshape(rows, -1).view(np.dtype(f"u{word}"))


def b_runs(b: np.ndarray) -> int:
    """The length of the runs of programs (in chunk order) that hold one and the same ``b`` block, when every
    run has it (grouped ordering: GROUP_M programs in a row take one column of tiles, so the same block of B;
    or the whole chunk reads one block); else 1. Compared byte for byte: equal blocks give equal products,
    wherever they were loaded from."""
    n = b.shape[0]
    if b.ndim != 3 or n < 4 or not b.flags.c_contiguous or not b[0].nbytes:
        return 1
    v = _words(b, n)
    head = 32 // v.itemsize                                     # the first 32 bytes of each block
    ends = np.flatnonzero((v[1:, :head] != v[:-1, :head]).any(axis=1)) + 1     # where a run may end
    g = int(ends[0]) if len(ends) else n
    if g < 2 or n % g or len(ends) != n // g - 1 or (ends != np.arange(g, n, g)).any():
        return 1
    w = v.reshape(n // g, g, -1)
    return g if bool((w == w[:, :1]).all()) else 1


def a_repeats(a: np.ndarray, g: int) -> bool:
    """Whether every run of ``g`` programs holds the first run's ``a`` blocks, in the same order (grouped
    ordering: the programs of a column of tiles take the same rows of A as the column beside it)."""
    n = a.shape[0]
    if a.ndim != 3 or g >= n or n % g or not a.flags.c_contiguous or not a[0].nbytes:
        return False
    v = _words(a, n // g)
    head = 32 // v.itemsize
    return bool((v[1:, :head] == v[:1, :head]).all()) and bool((v[1:] == v[:1]).all())


GROUP_WORK = 1 << 19      # multiply-adds per program's product from which finding runs repays itself


def _big(a, b) -> bool:
    """Whether each program's product is large enough that multiplying a run at a time repays looking for
    runs (a 128x64x128 product: 3 ms a step of 256 programs saved for 0.5 ms of comparing; a 64x32x64 one:
    0.1 ms saved, about what the comparison costs)."""
    return a.data.shape[-2] * a.data.shape[-1] * b.data.shape[-1] >= GROUP_WORK


def _grouped(builder, base, a, b, d, g: int, shared_a: bool, args, scratch: Optional[dict]) -> TensorHandle:
    """The products of programs that share their ``b`` block ``g`` at a time: their ``a`` blocks stacked row
    under row make one matrix, times the block they share (one BLAS call per run instead of ``g``). With
    ``shared_a`` every run stacks the same ``a`` blocks: only the first run's are read (and widened)."""
    n, m, nn = a.data.shape[0], a.data.shape[1], b.data.shape[2]
    a_used = TensorHandle(a.data[:g], a.dtype) if shared_a else a
    a2, b2, d2 = _stacked_operands(a_used, TensorHandle(b.data[::g], b.dtype), d, scratch)
    ag = TensorHandle(a2.data.reshape(-1, g * m, a2.data.shape[2]), a2.dtype)
    dd = d2.data
    dd = np.tile(dd, (1, g, 1)) if dd.shape[0] == 1 else dd.reshape(n // g, g * m, nn)
    out = _fused(builder, base, ag, b2, TensorHandle(dd, d2.dtype), *args)
    return TensorHandle(out.data.reshape(n, m, nn), out.dtype)


_NATIVE = {"fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32), "fp64": np.dtype(np.float64),
           "int8": np.dtype(np.int8), "int32": np.dtype(np.int32)}


def _fused(builder, base, a, b, d, *args) -> TensorHandle:
    """``base`` (Triton's create_dot: ``np.matmul(a, b, dtype=d's) + d``) for stacked blocks, the sum written
    over the product instead of into a third array of the chunk's size (a quarter of a 4096^3 fp16 matmul's
    products). Only for element types numpy holds as they are (fp8 operands, which base converts first, and
    bf16 ones, held as their bits and decoded by lowp.py's base, take base itself, as do accumulators that
    would widen the result). Stacked products are compared with base's per-program ones before use
    (``_stacked_ok``)."""
    x, y, acc = a.data, b.data, d.data
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])   # the product's
    if any(_NATIVE.get(str(h.dtype)) != h.data.dtype for h in (a, b, d)) or acc.ndim > len(shape) or \
            any(e not in (1, o) for e, o in zip(acc.shape[::-1], shape[::-1])):
        return base(builder, a, b, d, *args)
    out = np.matmul(x, y, dtype=acc.dtype)
    np.add(out, acc, out=out)
    return TensorHandle(out, d.dtype.scalar)


def _product(builder, base, a, b, d, args, scratch: Optional[dict] = None) -> TensorHandle:
    n = max(h.data.shape[0] for h in (a, b, d))
    if n == 1:        # a lone program's blocks: lowp.py places them
        return _stack_aligned([base(builder, _slice(a, 0), _slice(b, 0), _slice(d, 0), *args)])
    kind = _kind(a, b, d)
    ok = _stacked_ok.get(kind)
    if ok:
        g = b_runs(b.data) if a.data.shape[0] == n and a.data.ndim == 3 and _big(a, b) else 1
        if g > 1:
            shared_a = a_repeats(a.data, g)
            grouped = kind + (g, shared_a)
            if _stacked_ok.get(grouped):
                return _grouped(builder, base, a, b, d, g, shared_a, args, scratch)
            if grouped not in _stacked_ok:       # the first time: checked against the stacked product
                want = _fused(builder, base, *_stacked_operands(a, b, d), *args)
                got = _grouped(builder, base, a, b, d, g, shared_a, args, None)
                _stacked_ok[grouped] = _same_bytes(got.data, want.data)
                return want
        return _fused(builder, base, *_stacked_operands(a, b, d, scratch), *args)
    a, b, d = aligned_items(a), aligned_items(b), aligned_items(d)
    one_by_one = _stack_aligned([base(builder, _slice(a, p), _slice(b, p), _slice(d, p), *args) for p in range(n)])
    if ok is None:
        _stacked_ok[kind] = _same_bytes(_fused(builder, base, *_stacked_operands(a, b, d), *args).data,
                                        one_by_one.data)
    return one_by_one


def _same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and \
        bool(np.array_equal(np.ascontiguousarray(x).view(np.uint8), np.ascontiguousarray(y).view(np.uint8)))


def chunk_dot(builder, base, a, b, d, args, active: Optional[np.ndarray], scratch: Optional[dict] = None) -> TensorHandle:
    """The chunk's products ``a @ b + d``, each as its program alone computes it (``base`` is the builder's
    own ``create_dot``). Programs sitting out a masked loop's trip (``active`` false) keep their old values
    (divergence/loops.py), so their product is never used: they get zeros instead of a matmul."""
    n = max(h.data.shape[0] for h in (a, b, d))
    if active is None or n == 1 or active.all():
        return _product(builder, base, a, b, d, args, scratch)
    rows = np.flatnonzero(active)
    if not len(rows):
        rows = np.zeros(1, dtype=np.int64)
    some = _product(builder, base, _rows(a, rows), _rows(b, rows), _rows(d, rows), args, scratch)
    out = aligned_buffer((n,) + some.data.shape[1:], some.data.dtype)
    out[...] = 0
    out[rows] = some.data
    return TensorHandle(out, some.dtype)
