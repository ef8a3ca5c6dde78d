"""Coalescing: the 32-byte sectors and 128-byte lines each memory op touches, grouped as a warp issues them.

The model, and what it assumes:

1. Element order. Triton's coalescing pass (lib/Dialect/TritonGPU/Transforms/Coalesce.cpp) orders an
   access's dims by the contiguity its axis analysis proves for the pointer, most contiguous first, ties
   to the later dim (a stable sort of the reversed dims), and gives each thread ``vec`` consecutive
   elements along the first. We measure contiguity on the recorded offsets: along dim d it is the
   largest power of two c such that every aligned run of c elements along d has consecutive offsets.
   The compiler can only prove as much or less; for ``tl.arange``-based pointers the two agree.
2. Vector width. ``vec = min(vector_bytes / elem_bytes, contiguity, alignment, numel / threads)``, a
   power of two. Alignment is the largest power of two dividing the offset at every run start; storages
   are assumed 256-byte aligned (cudaMalloc's guarantee) and offsets are relative to the storage start.
   Triton caps a thread's elements at ``numel / (num_warps * warp_size)``.
3. Requests. Ordered this way, the block is cut into consecutive chunks of ``warp_size * vec``
   elements; one chunk is what one warp-wide instruction touches. When a stored value's layout differs
   from the pointer's, the compiler converts it through shared memory first, so global traffic follows
   the pointer's order (a transposed store costs the ideal number of sectors, not 8x).
4. Counting. A request touches the distinct sectors and lines of its active lanes; its useful bytes are
   its distinct elements times the element size. Masked-off lanes issue nothing. A request repeated
   across a broadcast dim is counted each time (what reaches L2 when L1 does not absorb it).

Out-of-bounds lanes count here (a GPU would issue them) but are left out of the cache stream.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .context import LaunchContext, unique_rows

PATTERNS = ("", "scalar", "contiguous", "strided", "broadcast", "gather")
SCALAR, CONTIGUOUS, STRIDED, BROADCAST, GATHER = 1, 2, 3, 4, 5
SECTOR_BYTES = 32
LINE_BYTES = 128
CHUNK_LANES = 1 << 20            # lanes gathered at once: bounds the temporaries, keeps them in cache
_EMPTY = np.iinfo(np.int64).max   # masked-off lanes sort after every real offset


@dataclass(frozen=True)
class Coalescing:
    """Per-row arrays (length n_rows; zero for non-memory rows) and the L2 request stream."""
    requests: np.ndarray
    sectors: np.ndarray
    lines: np.ndarray
    used_bytes: np.ndarray
    pattern: np.ndarray       # index into PATTERNS
    stride: np.ndarray        # elements, for "strided"
    vector: np.ndarray        # elements per thread
    fast_dim: np.ndarray      # the block dim lanes are ordered along
    stream_row: np.ndarray    # one entry per (request, 128-byte line): the row that issued it,
    stream_line: np.ndarray   # the line (relative to the tensor's storage start),
    stream_mask: np.ndarray   # and the 4-bit mask of its 32-byte sectors


def _floor_pow2(a: np.ndarray) -> np.ndarray:
    a = np.maximum(np.asarray(a, dtype=np.int64), 1)
    return (1 << np.floor(np.log2(a)).astype(np.int64)).astype(np.int64)


def coalesce(ctx: LaunchContext, row_order: np.ndarray) -> Coalescing:
    """``row_order`` ranks rows in cache-issue order; the stream comes out sorted by it within a class."""
    n = ctx.n_rows
    out = {k: np.zeros(n, dtype=np.int64) for k in ("requests", "sectors", "lines", "used_bytes", "pattern",
                                                    "stride", "vector", "fast_dim")}
    parts: list = []
    rows = ctx.mem_rows[np.argsort(row_order[ctx.mem_rows], kind="stable")]
    if len(rows):
        ops = ctx.launch.ops
        key = np.column_stack([ops["ndim"][rows], ops["shape"][rows], ctx.eb[rows]]).astype(np.int64)
        classes, inverse = unique_rows(key)
        for c, k in enumerate(classes):
            nd = int(k[0])
            shape = tuple(int(s) for s in k[1:1 + nd]) or (1,)
            members = rows[inverse == c]
            per_chunk = max(1, CHUNK_LANES // int(np.prod(shape)))
            for i in range(0, len(members), per_chunk):
                _chunk(ctx, members[i:i + per_chunk], shape, int(k[-1]), out, parts)
    cat = (lambda j, dt: np.concatenate([p[j] for p in parts]).astype(dt) if parts else np.zeros(0, dt))
    return Coalescing(**out, stream_row=cat(0, np.int64), stream_line=cat(1, np.int64),
                      stream_mask=cat(2, np.uint8))


def _dims(ob: np.ndarray, shape: tuple):
    """Per row and dim: contiguity (aligned power-of-two runs of +1 steps), and the constant step if any."""
    r, nd = ob.shape[0], len(shape)
    contig = np.ones((r, nd), dtype=np.int64)
    const = np.ones((r, nd), dtype=bool)
    step = np.zeros((r, nd), dtype=np.int64)
    for d, size in enumerate(shape):
        if size == 1:
            continue
        diff = np.diff(ob, axis=d + 1)
        pos = np.arange(1, size, dtype=np.int64)
        # A break between positions p and p+1 allows runs of c only if c divides p+1: the lowest set bit.
        low = (pos & -pos).reshape((1,) * (d + 1) + (size - 1,) + (1,) * (nd - d - 1))
        contig[:, d] = np.where(diff != 1, low, size).reshape(r, -1).min(axis=1)
        flat = diff.reshape(r, -1)
        lo, hi = flat.min(axis=1), flat.max(axis=1)
        const[:, d] = lo == hi
        step[:, d] = lo
    return contig, const, step


def _patterns(o: np.ndarray, shape: tuple, contig_fast, const, step) -> tuple:
    r, nd = len(o), len(shape)
    pattern = np.full(r, GATHER, dtype=np.int64)
    sizes = np.asarray(shape, dtype=np.int64)
    strided = const & (step != 0) & (sizes > 1)
    last = nd - 1 - np.argmax(strided[:, ::-1], axis=1)        # the fastest dim with a constant step
    stride = np.where(strided.any(axis=1), step[np.arange(r), last], 0)
    pattern[strided.any(axis=1)] = STRIDED
    pattern[contig_fast >= 2] = CONTIGUOUS
    pattern[o.min(axis=1) == o.max(axis=1)] = BROADCAST
    if o.shape[1] == 1:
        pattern[:] = SCALAR
    stride[pattern != STRIDED] = 0
    return pattern, stride


def _chunk(ctx: LaunchContext, rows: np.ndarray, shape: tuple, eb: int, out: dict, parts: list) -> None:
    p = ctx.params
    r, lanes, nd = len(rows), int(np.prod(shape)), len(shape)
    idx = ctx.lane_pos[rows][:, None] + np.arange(lanes)
    o, m = ctx.offsets[idx], ctx.mask[idx]
    contig, const, step = _dims(o.reshape((r,) + shape), shape)
    order = np.argsort(-(contig * (nd + 1) + np.arange(nd)), axis=1, kind="stable")   # fastest dim first
    fast = order[:, 0]
    c_fast = contig[np.arange(r), fast]
    pattern, stride = _patterns(o, shape, c_fast, const, step)
    threads = ctx.num_warps * p.warp_size
    vmax = int(_floor_pow2(min(max(p.vector_bytes // eb, 1), max(lanes // threads, 1))))
    vec = np.minimum(_floor_pow2(c_fast), vmax)
    out["pattern"][rows], out["stride"][rows], out["fast_dim"][rows] = pattern, stride, fast
    perm_code = (order * (nd ** np.arange(nd))).sum(axis=1)
    for code in np.unique(perm_code):
        sel = np.nonzero(perm_code == code)[0]
        perm = tuple(int(v) for v in order[sel[0]][::-1])      # slowest ... fastest
        axes = (0,) + tuple(1 + d for d in perm)
        ot = o[sel].reshape((len(sel),) + shape).transpose(axes).reshape(len(sel), lanes)
        mt = m[sel].reshape((len(sel),) + shape).transpose(axes).reshape(len(sel), lanes)
        v = _aligned(ot, vec[sel], shape[perm[-1]])
        out["vector"][rows[sel]] = v
        for width in np.unique(v):
            s2 = np.nonzero(v == width)[0]
            _requests(ctx, rows[sel[s2]], ot[s2], mt[s2], eb, p.warp_size * int(width), out, parts)


def _aligned(ot: np.ndarray, vec: np.ndarray, n_fast: int) -> np.ndarray:
    """Halve each row's vector width until every run start is aligned to it."""
    vec = vec.copy()
    runs = ot.reshape(len(ot), -1, n_fast)
    while True:
        bad = np.zeros(len(vec), dtype=bool)
        for width in np.unique(vec[vec > 1]):
            sel = np.nonzero(vec == width)[0]
            starts = runs[sel][:, :, ::int(width)]
            bad[sel] = (starts % width != 0).reshape(len(sel), -1).any(axis=1)
        if not bad.any():
            return vec
        vec[bad] //= 2


def _requests(ctx, rows, ot, mt, eb, group, out, parts) -> None:
    r, lanes = ot.shape
    a = np.where(mt, ot, _EMPTY)
    if lanes > group and lanes % group:
        a = np.concatenate([a, np.full((r, group - lanes % group), _EMPTY)], axis=1)
    a = a.reshape(r, -1, min(group, lanes))
    if not (a[..., 1:] >= a[..., :-1]).all():
        a = np.sort(a, axis=2)
    valid = a != _EMPTY                                 # sorted: the valid lanes come first in each request
    x = np.where(valid, a, 0)
    sec = (x * eb) // SECTOR_BYTES
    line = sec // (LINE_BYTES // SECTOR_BYTES)
    new_e, new_s, new_l = (_first(valid, v) for v in (a, sec, line))
    out["requests"][rows] = valid[:, :, 0].sum(axis=1)
    out["sectors"][rows] = new_s.sum(axis=(1, 2))
    out["lines"][rows] = new_l.sum(axis=(1, 2))
    out["used_bytes"][rows] = new_e.sum(axis=(1, 2)) * eb
    # The L2 stream: in-bounds lanes only (the interpreter skipped the others; a GPU would fault).
    inb = valid & (x >= 0) & (x < ctx.row_limit[rows][:, None, None])
    prev_inb = np.zeros_like(inb)
    prev_inb[..., 1:] = inb[..., :-1]
    start = (inb & (new_l | ~prev_inb)).reshape(-1)
    flat = np.flatnonzero(inb.reshape(-1))
    if not len(flat):
        return
    run = np.flatnonzero(start[flat])
    bits = np.left_shift(1, sec.reshape(-1)[flat] % 4).astype(np.uint8)
    masks = np.bitwise_or.reduceat(bits, run)
    per_row = a.shape[1] * a.shape[2]
    parts.append((rows[flat[run] // per_row], line.reshape(-1)[flat[run]], masks))


def _first(valid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Valid positions holding a value different from the previous position's (sorted within a request)."""
    new = valid.copy()
    new[..., 1:] &= values[..., 1:] != values[..., :-1]
    return new
