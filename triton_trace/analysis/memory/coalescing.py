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
3. Requests. Ordered this way, each thread holds ``per_thread`` consecutive elements and issues
   ``per_thread / vec`` instructions of ``vec`` elements; instruction j of a warp touches element
   j*vec.. of each of its 32 threads. A store's ``per_thread`` is its own ``vec``. A load's is the
   largest ``vec`` among the memory ops of the same block shape and element order (Coalesce.cpp takes
   the maximum over the memory ops in the load's def-use slice, loads only; the trace has no def-use
   edges, so ops of the launch with the same shape and order stand in for the slice). On an H200 a
   stride-2 fp32 load whose result is stored contiguously touches 32 sectors per request this way, as
   ncu measured, not the 8 that consecutive lanes would. When a stored value's layout differs
   from the pointer's, the compiler converts it through shared memory first, so global traffic follows
   the pointer's order (a transposed store costs the ideal number of sectors, not 8x).
4. Counting. A request touches the distinct sectors and lines of its active lanes; its useful bytes are
   its distinct elements times the element size. Masked-off lanes issue nothing. A request repeated
   across a broadcast dim is counted each time (what reaches L2 when L1 does not absorb it).

Out-of-bounds lanes count here (a GPU would issue them) but are left out of the cache stream.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from .. import context
from ..context import LOAD as LOAD_CODE, LaunchContext, unique_rows

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


def _layout(o: np.ndarray, shape: tuple, eb: int, threads: int, p):
    """Per row: element order (fastest dim first), contiguity along it, and the vector width before
    alignment. ``o`` is (rows, lanes)."""
    r, lanes, nd = len(o), int(np.prod(shape)), len(shape)
    contig, const, step = _dims(o.reshape((r,) + shape), shape)
    order = np.argsort(-(contig * (nd + 1) + np.arange(nd)), axis=1, kind="stable")   # fastest dim first
    c_fast = contig[np.arange(r), order[:, 0]]
    vmax = int(_floor_pow2(min(max(p.vector_bytes // eb, 1), max(lanes // threads, 1))))
    return order, c_fast, const, step, np.minimum(_floor_pow2(c_fast), vmax)


def _ordered(o: np.ndarray, shape: tuple, perm: tuple) -> np.ndarray:
    axes = (0,) + tuple(1 + d for d in perm)
    return o.reshape((len(o),) + shape).transpose(axes).reshape(len(o), -1)


def _slice_widths(ctx: LaunchContext) -> np.ndarray:
    """Per static op: the elements per thread its layout gets (see point 3 of the module docstring),
    from one representative row each."""
    p = ctx.params
    threads = ctx.num_warps * p.warp_size
    ops = ctx.launch.ops
    own = np.ones(ctx.n_static, dtype=np.int64)
    keys = [None] * ctx.n_static
    for sid, row in enumerate(ctx.op_first_row):
        if row >= ctx.n_rows or not ctx.is_mem[row] or ctx.lane_count[row] == 0:
            continue
        nd = int(ops["ndim"][row])
        shape = tuple(int(v) for v in ops["shape"][row][:nd]) or (1,)
        eb = int(ctx.eb[row])
        o = ctx.block(np.array([row]), int(np.prod(shape)))[0]
        order, _, _, _, vec = _layout(o, shape, eb, threads, p)
        perm = tuple(int(v) for v in order[0][::-1])
        own[sid] = int(_aligned(_ordered(o, shape, perm), vec, shape[perm[-1]])[0])
        keys[sid] = (shape, perm, eb)
    best: dict = {}
    for sid, k in enumerate(keys):
        if k is not None:
            best[k] = max(best.get(k, 1), own[sid])
    width = own.copy()
    for sid, k in enumerate(keys):
        row = ctx.op_first_row[sid]
        if k is not None and ctx.kind[row] == LOAD_CODE:
            width[sid] = best[k]
    return width


def coalesce(ctx: LaunchContext, row_order: np.ndarray, layouts: Optional[dict] = None) -> Coalescing:
    """``row_order`` ranks rows in cache-issue order; the stream comes out sorted by it within a class.
    ``layouts``: static op id -> (issue order, vec) from the compiler (analysis/memory/layouts.py); those ops
    follow it instead of points 1-3 of the module docstring."""
    layouts = layouts or {}
    n = ctx.n_rows
    per_thread = _slice_widths(ctx)[ctx.row_op] if n else np.zeros(0, dtype=np.int64)
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
            members = _by_pattern(ctx, rows[inverse == c], shape, int(k[-1]), per_thread, out, parts, layouts)
            per_chunk = max(1, CHUNK_LANES // int(np.prod(shape)))
            for i in range(0, len(members), per_chunk):
                _chunk(ctx, members[i:i + per_chunk], shape, int(k[-1]), per_thread, out, parts, layouts)
    return Coalescing(**out, **_stream(parts, n))


class _Kron(NamedTuple):
    """Stream entries of rows that repeat one row's lines shifted by whole lines: for each row of ``rows`` in
    turn, every line of ``line`` plus the row's ``shift``, with ``masks``. Written straight into the stream
    (``_stream``): no per-part copies of the largest arrays of the analysis."""
    rows: np.ndarray
    line: np.ndarray
    shift: np.ndarray
    masks: np.ndarray


def _stream(parts: list, n_rows: int) -> dict:
    """The L2 stream of ``parts`` (explicit (rows, lines, masks) or _Kron) in one array each, rows and lines
    as int32 where they fit."""
    sizes = [len(p.rows) * len(p.line) if isinstance(p, _Kron) else len(p[0]) for p in parts]
    lo = hi = 0
    for p, n in zip(parts, sizes):
        if n:
            a, b = ((int(p.line.min()) + int(p.shift.min()), int(p.line.max()) + int(p.shift.max()))
                    if isinstance(p, _Kron) else (int(p[1].min()), int(p[1].max())))
            lo, hi = min(lo, a), max(hi, b)
    narrow = lambda fits: np.int32 if fits else np.int64
    total = sum(sizes)
    row = np.empty(total, narrow(n_rows < 1 << 31))
    line = np.empty(total, narrow(-(1 << 31) <= lo and hi < 1 << 31))
    mask = np.empty(total, np.uint8)
    at = 0
    for p, n in zip(parts, sizes):
        if not n:
            continue
        if isinstance(p, _Kron):
            shape = (len(p.rows), len(p.line))
            row[at:at + n].reshape(shape)[...] = p.rows[:, None]
            np.add(p.line[None, :], p.shift[:, None], out=line[at:at + n].reshape(shape), casting="unsafe")
            mask[at:at + n].reshape(shape)[...] = p.masks[None, :]
        else:
            row[at:at + n], line[at:at + n], mask[at:at + n] = p
        at += n
    return {"stream_row": row, "stream_line": line, "stream_mask": mask}


def _by_pattern(ctx: LaunchContext, rows: np.ndarray, shape: tuple, eb: int, per_thread: np.ndarray, out: dict,
                parts: list, layouts: dict) -> np.ndarray:
    """Rows of one block shape whose lanes are a known pattern with their active lanes in bounds
    (``ctx.regular``): rows sharing the pattern, the active lanes, the elements per thread, the base's
    position within a cache line and its alignment to the widest vector are that pattern shifted by whole
    lines, so everything here is the same for them but the lines of the L2 stream, which shift. One row of
    each such group is computed; the rows left (irregular ones, groups of one) are returned, in order."""
    if not context.SHORTCUTS or len(rows) < 2:
        return rows
    ok = ctx.regular(rows)
    if np.count_nonzero(ok) < 2:
        return rows
    reg = rows[ok]
    base = ctx.row_base[reg]
    widest = int(_floor_pow2(max(ctx.params.vector_bytes // eb, 1)))
    ops = ctx.row_op[reg].astype(np.int64)
    compiled = np.where(np.isin(ops, np.fromiter(layouts, dtype=np.int64, count=len(layouts))), ops, -1)
    _, inverse = unique_rows(np.column_stack([ctx.row_sig[reg], ctx.active_lanes[reg], per_thread[reg],
                                              (base * eb) % LINE_BYTES, base % widest, compiled]))
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.r_[True, inverse[order][1:] != inverse[order][:-1], True])
    done = np.zeros(len(rows), dtype=bool)
    at = np.flatnonzero(ok)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi - lo < 2:
            continue
        pick = order[lo:hi]
        members, rep = reg[pick], reg[pick[0]]
        sub: list = []
        _chunk(ctx, members[:1], shape, eb, per_thread, out, sub, layouts)
        for key in ("requests", "sectors", "lines", "used_bytes", "pattern", "stride", "vector", "fast_dim"):
            out[key][members] = out[key][rep]
        shift = (base[pick] - base[pick[0]]) * eb // LINE_BYTES
        for _, line, masks in sub:
            parts.append(_Kron(members, line, shift, masks))
        done[at[pick]] = True
    return rows[~done]


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


def _chunk(ctx: LaunchContext, rows: np.ndarray, shape: tuple, eb: int, per_thread: np.ndarray, out: dict,
           parts: list, layouts: dict) -> None:
    p = ctx.params
    lanes, nd = int(np.prod(shape)), len(shape)
    o, m = ctx.block(rows, lanes)
    threads = ctx.num_warps * p.warp_size
    order, c_fast, const, step, vec = _layout(o, shape, eb, threads, p)
    fast = order[:, 0]
    pattern, stride = _patterns(o, shape, c_fast, const, step)
    out["pattern"][rows], out["stride"][rows], out["fast_dim"][rows] = pattern, stride, fast
    ops = ctx.row_op[rows]
    compiled = np.array([int(op) in layouts for op in ops], dtype=bool)
    for op in np.unique(ops[compiled]):
        sel = np.flatnonzero(ops == op)
        issue, width = layouts[int(op)]
        flat = issue.reshape(-1)
        idx = np.where(flat >= 0, flat, 0)
        out["vector"][rows[sel]] = width
        _requests(ctx, rows[sel], o[sel][:, idx], m[sel][:, idx] & (flat >= 0)[None, :], eb, p.warp_size,
                  int(width), int(width), out, parts)
    if compiled.all():
        return
    keep = np.flatnonzero(~compiled)
    rows, o, m, order, vec = rows[keep], o[keep], m[keep], order[keep], vec[keep]
    perm_code = (order * (nd ** np.arange(nd))).sum(axis=1)
    for code in np.unique(perm_code):
        sel = np.nonzero(perm_code == code)[0]
        perm = tuple(int(v) for v in order[sel[0]][::-1])      # slowest ... fastest
        ot, mt = _ordered(o[sel], shape, perm), _ordered(m[sel], shape, perm)
        v = _aligned(ot, vec[sel], shape[perm[-1]])
        out["vector"][rows[sel]] = v
        pt = np.maximum(per_thread[rows[sel]], v)
        for width, each in np.unique(np.column_stack([v, pt]), axis=0):
            s2 = np.nonzero((v == width) & (pt == each))[0]
            _requests(ctx, rows[sel[s2]], ot[s2], mt[s2], eb, p.warp_size, int(width), int(each), out, parts)


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


def _warp_order(a: np.ndarray, warp: int, vec: int, per_thread: int) -> np.ndarray:
    """Reorder a row's lanes (consecutive per thread) so that each instruction's lanes are consecutive:
    instruction j of a warp takes elements j*vec.. of each of its threads."""
    r, lanes = a.shape
    span = warp * per_thread
    if per_thread <= vec or lanes < span:
        return a
    if lanes % span:
        a = np.concatenate([a, np.full((r, span - lanes % span), _EMPTY)], axis=1)
    return (a.reshape(r, -1, warp, per_thread // vec, vec).transpose(0, 1, 3, 2, 4)
            .reshape(r, -1))


def _requests(ctx, rows, ot, mt, eb, warp, vec, per_thread, out, parts) -> None:
    """Requests, sectors, lines and the L2 stream of rows that share one layout.

    Rows whose lanes are all active and in bounds and whose offsets are one row's shifted by whole cache
    lines (every tile of a tiled kernel, every block of a stream) have the same counts and the same line
    pattern, shifted: those are computed once per distinct pattern."""
    r = len(rows)
    if context.SHORTCUTS and r > 4:
        base = ot[:, 0]
        ok = mt.all(axis=1) & (ot.min(axis=1) >= 0) & (ot.max(axis=1) < ctx.row_limit[rows])
        cand = np.flatnonzero(ok)
        done = np.zeros(r, dtype=bool)
        phase = (base[cand] * eb) % LINE_BYTES
        for ph in np.unique(phase):
            members = cand[phase == ph]
            rep = members[0]
            members = members[((ot[members] - base[members, None]) == (ot[rep] - base[rep])).all(axis=1)]
            if len(members) < 2:
                continue
            sub: list = []
            _requests_rows(ctx, rows[rep:rep + 1], ot[rep:rep + 1], mt[rep:rep + 1], eb, warp, vec, per_thread,
                           out, sub)
            for key in ("requests", "sectors", "lines", "used_bytes"):
                out[key][rows[members]] = out[key][rows[rep]]
            if sub:
                _, line, masks = sub[0]
                shift = (base[members] - base[rep]) * eb // LINE_BYTES
                parts.append(_Kron(rows[members], line, shift, masks))
            done[members] = True
        if done.any():
            rest = np.flatnonzero(~done)
            if not len(rest):
                return
            rows, ot, mt = rows[rest], ot[rest], mt[rest]
    _requests_rows(ctx, rows, ot, mt, eb, warp, vec, per_thread, out, parts)


def _requests_rows(ctx, rows, ot, mt, eb, warp, vec, per_thread, out, parts) -> None:
    group = warp * vec
    a = _warp_order(np.where(mt, ot, _EMPTY), warp, vec, per_thread)
    r, lanes = a.shape
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
