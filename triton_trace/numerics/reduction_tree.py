"""The order in which a kernel compiled for sm_90 combines the elements of a reduction or scan (``tl.sum``,
``tl.cumsum``, ``tl.cumprod``, or ``tl.reduce``/``tl.associative_scan`` with any combine function, tuple
combines included: ``reduce_with``/``scan_with``), as numpy over the same values, so that a float result has
the GPU's bits. Floating-point adds are commutative but not associative: the order is the whole difference;
a combine that does not commute (a linear recurrence) also needs each call's operands in the lowering's
places, earlier elements on the left.

Where each element sits comes from the operand's distributed layout, as a linear layout (``layout_bases``):
the tensor coordinate each register, lane and warp bit moves to. Along the reduced axis a blocked layout (and
a slice of one) puts ``per_thread`` contiguous elements in a thread's registers, ``lanes`` threads of a warp
side by side, ``warps`` warps side by side, and repeats that tile ``blocks`` times in higher registers:
element ``i = ((c * warps + w) * lanes + l) * per_thread + e`` (``AxisSplit``). Triton 3.6 and 3.9 lower
them so (lib/Conversion/TritonGPUToLLVM/ReduceOpToLLVM.cpp and ScanOpToLLVM.cpp, read from the LLVM IR both
releases emit for sm_90):

- **reduce**: each thread combines its own elements in register order (``c`` then ``e``): Triton 3.6 folds
  them, ``((x0 + x1) + x2) + ...``; Triton 3.9 (its linear-layout lowering) takes a balanced pairwise tree,
  ``(x0 + x1) + (x2 + x3)`` (``thread_order="tree"``). The lanes then combine through ``shfl.sync.bfly`` with
  xor offsets largest first (lanes/2, ..., 1), lane j taking combine(own, lane j ^ N); the warps' partials,
  through shared memory, in the same butterfly; the result is lane 0's.
- **scan**: a thread scans its ``per_thread`` elements sequentially; the chunk totals are scanned over the
  lanes by ``shfl.sync.up`` at distances 1, 2, 4, ... (Kogge-Stone, ``prev + own``); a lane's last element is
  that inclusive value, each other element ``prefix + own`` with the prefix the previous lane's last element.
  Across warps the partials from shared memory are folded left to right (``((p0 + p1) + p2)``) and added in
  front; across blocks the running total is carried. This is the lowering's literal sequence, special cases
  included (a block of one lane carries its own new total, a quirk of AddPartialReduceOneWarp).

Every function takes the values with any leading axes (a program axis among them) and works on ``axis``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .rounding import bf16_to_f32, f32_to_bf16

COMBINES = {"sum": np.add, "prod": np.multiply}


@dataclass(frozen=True)
class AxisSplit:
    """How a layout spreads one axis of ``blocks * warps * lanes * per_thread`` elements (see the module)."""
    blocks: int
    warps: int
    lanes: int
    per_thread: int

    @property
    def size(self) -> int:
        return self.blocks * self.warps * self.lanes * self.per_thread


# ------------------------------------------------------------------------------------------------------------
# layouts
# ------------------------------------------------------------------------------------------------------------
def _unit(rank: int, dim: int, value: int) -> list:
    out = [0] * rank
    out[dim] = value
    return out


def _log2(v: int) -> int:
    if v < 1 or v & (v - 1):
        raise ValueError(f"{v} is not a power of two")
    return v.bit_length() - 1


def blocked_bases(spt, tpw, wpc, order, shape) -> dict:
    """The linear layout of ``#ttg.blocked`` over ``shape``, as Triton builds it: registers, lanes and warps each
    in ``order``; a basis past the shape broadcast (0); the tile repeated in higher register bits."""
    rank = len(shape)
    reg = [_unit(rank, d, 1 << k) for d in order for k in range(_log2(spt[d]))]
    lane = [_unit(rank, d, spt[d] << k) for d in order for k in range(_log2(tpw[d]))]
    warp = [_unit(rank, d, (spt[d] * tpw[d]) << k) for d in order for k in range(_log2(wpc[d]))]
    for bases in (reg, lane, warp):
        for b in bases:
            for d in range(rank):
                if b[d] >= shape[d]:
                    b[d] = 0
    for d in order:
        v = spt[d] * tpw[d] * wpc[d]
        while v < shape[d]:
            reg.append(_unit(rank, d, v))
            v *= 2
    return {"register": reg, "lane": lane, "warp": warp, "block": []}


def sliced_bases(parent: dict, dim: int) -> dict:
    """A ``#ttg.slice`` layout: the parent's (over the shape with a 1 at ``dim``) without that coordinate."""
    return {k: [b[:dim] + b[dim + 1:] for b in v] for k, v in parent.items()}


def layout_bases(layout: dict, shape) -> Optional[dict]:
    """Linear-layout bases of a parsed TTGIR layout (``{"kind": "blocked", ...}``, ``"slice"`` with its
    ``parent`` and ``dim``, ``"linear"`` with its bases) over ``shape``; None for any other kind."""
    shape = [int(s) for s in shape]
    kind = layout.get("kind")
    try:
        if kind == "blocked":
            keys = ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order")
            spt, tpw, wpc, order = (list(layout[k]) for k in keys)
            if any(len(v) != len(shape) for v in (spt, tpw, wpc, order)) or any(
                    c != 1 for c in layout.get("CTAsPerCGA", [1])):
                return None
            return blocked_bases(spt, tpw, wpc, order, shape)
        if kind == "slice":
            dim = int(layout["dim"])
            parent = layout_bases(layout["parent"], shape[:dim] + [1] + shape[dim:])
            return None if parent is None else sliced_bases(parent, dim)
        if kind == "linear":
            bases = {k: [list(b) for b in layout.get(k, [])] for k in ("register", "lane", "warp", "block")}
            if any(len(b) != len(shape) for v in bases.values() for b in v):
                return None
            return bases
    except (KeyError, TypeError, ValueError):
        return None
    return None


def axis_split(bases: dict, shape, axis: int) -> Optional[AxisSplit]:
    """The ``AxisSplit`` of ``axis`` under ``bases``, or None where the layout does not nest the axis as a
    blocked layout does (a basis that moves along it and another dim at once, lanes or warps out of order,
    elements spread over CTAs)."""
    if any(b[axis] for b in bases.get("block", [])):
        return None

    def along(kind):
        vals = []
        for b in bases.get(kind, []):
            if b[axis]:
                if any(v for d, v in enumerate(b) if d != axis):
                    return None
                vals.append(b[axis])
        return vals
    reg, lane, warp = along("register"), along("lane"), along("warp")
    if reg is None or lane is None or warp is None:
        return None
    per_thread, i = 1, 0
    while i < len(reg) and reg[i] == per_thread:
        per_thread, i = per_thread * 2, i + 1
    lanes = warps = blocks = 1
    for v in lane:
        if v != per_thread * lanes:
            return None
        lanes *= 2
    for v in warp:
        if v != per_thread * lanes * warps:
            return None
        warps *= 2
    for v in reg[i:]:
        if v != per_thread * lanes * warps * blocks:
            return None
        blocks *= 2
    split = AxisSplit(blocks, warps, lanes, per_thread)
    return split if split.size == int(shape[axis]) else None


# ------------------------------------------------------------------------------------------------------------
# the combine trees
# ------------------------------------------------------------------------------------------------------------
# The trees run on tuples of arrays of one shape: a combine's operands, one for tl.sum, several for a tuple
# combine (tl.reduce((mean, m2, weight), 0, welford)). ``op(left, right)`` takes two such tuples and returns
# one; ``left`` always holds the earlier elements of the axis, as the lowering's combine calls do (the
# order matters for a combine that does not commute, such as a linear recurrence).
Combine = Callable[[tuple, tuple], tuple]


def bf16_rounded(x) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest-even) and widened back: a bf16 combine's result."""
    return bf16_to_f32(f32_to_bf16(np.asarray(x, dtype=np.float32)))


def _combiner(kind: str, rounding: Optional[Callable]):
    op = COMBINES[kind]
    if rounding is None:
        return op
    return lambda a, b: rounding(op(a, b))


def _lifted(kind: str, rounding: Optional[Callable]) -> Combine:
    f = _combiner(kind, rounding)
    return lambda a, b: (f(a[0], b[0]),)


def _at(v: tuple, index) -> tuple:
    return tuple(a[index] for a in v)


def _where(cond, a: tuple, b: tuple) -> tuple:
    return tuple(np.where(cond, x, y) for x, y in zip(a, b))


def _spread(v: tuple, shape: tuple) -> tuple:
    return tuple(np.broadcast_to(a, shape).copy() for a in v)


def _split_axis(xs: tuple, axis: int, split: AxisSplit) -> tuple:
    """Each of ``xs`` with ``axis`` moved last and cut into (blocks, warps, lanes, per_thread)."""
    out = []
    for x in xs:
        y = np.moveaxis(np.asarray(x), axis, -1)
        if y.shape[-1] != split.size:
            raise ValueError(f"axis of {y.shape[-1]} elements, layout of {split.size}")
        out.append(y.reshape(y.shape[:-1] + (split.blocks, split.warps, split.lanes, split.per_thread)))
    return tuple(out)


def _fold(seq: tuple, op: Combine, fast) -> tuple:
    """Left fold along the last axis, strictly in order (``fast.accumulate`` is sequential; reduce is not)."""
    if fast is not None:
        return (fast.accumulate(seq[0], axis=-1)[..., -1],)
    acc = _at(seq, (..., 0))
    for i in range(1, seq[0].shape[-1]):
        acc = op(acc, _at(seq, (..., i)))
    return acc


def _butterfly(acc: tuple, op: Combine) -> tuple:
    """``shfl.sync.bfly`` rounds over the last axis, xor offset largest first: lane j takes op(own, lane j^N).
    Lane 0, whose value the result is (it stores the warp's partial and the scalar result), only ever
    combines lanes of the lower half with the upper: those are kept."""
    n = acc[0].shape[-1]
    while n > 1:
        n //= 2
        acc = op(_at(acc, (..., slice(0, n))), _at(acc, (..., slice(n, 2 * n))))
    return _at(acc, (..., 0))


def _pairwise(seq: tuple, op: Combine) -> tuple:
    """A balanced binary tree over the last axis (a power of two): neighbours first, (0+1), (2+3), ..."""
    while seq[0].shape[-1] > 1:
        seq = op(_at(seq, (..., slice(0, None, 2))), _at(seq, (..., slice(1, None, 2))))
    return _at(seq, (..., 0))


THREAD_ORDERS = ("sequential", "tree")


def reduce(x, axis: int, split: AxisSplit, kind: str = "sum", rounding: Optional[Callable] = None,
           thread_order: str = "sequential") -> np.ndarray:
    """``x`` reduced over ``axis`` (kept, of size 1) in the compiled kernel's order. ``rounding`` rounds each
    combine's result to the reduction's type where the values are held wider (bf16 in float32);
    ``thread_order`` is how a thread combines its own elements (see the module)."""
    fast = COMBINES[kind] if rounding is None else None
    return _reduce((np.asarray(x),), axis, split, _lifted(kind, rounding), thread_order, fast)[0]


def reduce_with(xs: tuple, axis: int, split: AxisSplit, op: Combine, thread_order: str = "sequential") -> tuple:
    """The operands ``xs`` (arrays of one shape) reduced together over ``axis`` (kept, of size 1) by ``op``
    in the compiled kernel's order."""
    return _reduce(tuple(np.asarray(x) for x in xs), axis, split, op, thread_order, None)


def _registers(xs: tuple, axis: int, split: AxisSplit) -> tuple:
    """Each of ``xs`` as (..., warps, lanes, blocks * per_thread): a thread's registers, block c then e."""
    per_thread = split.blocks * split.per_thread
    return tuple(np.moveaxis(y, -4, -2).reshape(y.shape[:-4] + (split.warps, split.lanes, per_thread))
                 for y in _split_axis(xs, axis, split))


def _reduce(xs: tuple, axis: int, split: AxisSplit, op: Combine, thread_order: str, fast) -> tuple:
    if thread_order not in THREAD_ORDERS:
        raise ValueError(f"thread_order {thread_order!r}: one of {THREAD_ORDERS}")
    seq = _registers(xs, axis, split)
    acc = _fold(seq, op, fast) if thread_order == "sequential" else _pairwise(seq, op)   # (..., warps, lanes)
    acc = _butterfly(acc, op)                               # lanes: (..., warps)
    acc = _butterfly(acc, op)                               # warps, through shared memory
    return tuple(np.expand_dims(a.astype(x.dtype, copy=False), axis) for a, x in zip(acc, xs))


def reduce_contracted(p, a, b, axis: int, split: AxisSplit, thread_order: str, fma: Callable) -> np.ndarray:
    """The sum over ``axis`` (kept, of size 1) of products ``p`` (``a * b`` rounded, fp32 or fp64) where LLVM
    contracts each add that takes a product into ``fma.rn`` (of two products, the left one). In a thread,
    Triton 3.6 folds ``fma(a2, b2, fma(a0, b0, p1))``, ...; 3.9's tree has leaves ``fma(a_2k, b_2k, p_2k+1)``.
    One element a thread: the first butterfly step is lane 0's ``fma(a_own, b_own, p_partner)``. Every later
    step adds sums: plain adds (read from the PTX of both releases for sm_90). ``fma``: the single-rounded
    fma of the operands' type (numerics/compiled.py's, passed in to keep this module below it)."""
    if thread_order not in THREAD_ORDERS:
        raise ValueError(f"thread_order {thread_order!r}: one of {THREAD_ORDERS}")
    p, a, b = _registers((p, a, b), axis, split)            # (..., warps, lanes, registers)
    add, n, half = _lifted("sum", None), p.shape[-1], split.lanes // 2
    if n == 1:
        acc = (fma(a[..., :half, 0], b[..., :half, 0], p[..., half:, 0]) if half else p[..., 0],)
    elif thread_order == "sequential":
        acc = fma(a[..., 0], b[..., 0], p[..., 1])
        for i in range(2, n):
            acc = fma(a[..., i], b[..., i], acc)
        acc = (acc,)
    else:
        acc = _pairwise((fma(a[..., 0::2], b[..., 0::2], p[..., 1::2]),), add)
    acc = _butterfly(_butterfly(acc, add), add)             # the lanes left, then the warps
    return np.expand_dims(acc[0].astype(p.dtype, copy=False), axis)


def _inclusive(y: tuple, op: Combine, fast) -> tuple:
    """Sequential inclusive scan along the last axis."""
    if fast is not None:
        return (fast.accumulate(y[0], axis=-1),)
    out = tuple(a.copy() for a in y)
    for i in range(1, y[0].shape[-1]):
        for o, v in zip(out, op(_at(out, (..., i - 1)), _at(y, (..., i)))):
            o[..., i] = v
    return out


def _kogge_stone(t: tuple, op: Combine) -> tuple:
    """``shfl.sync.up`` rounds at distances 1, 2, 4, ... over the last axis: lane l >= d takes op(lane l-d, own)."""
    n = t[0].shape[-1]
    d = 1
    while d < n:
        nxt = tuple(a.copy() for a in t)
        for o, v in zip(nxt, op(_at(t, (..., slice(None, -d))), _at(t, (..., slice(d, None))))):
            o[..., d:] = v
        t, d = nxt, d * 2
    return t


def scan(x, axis: int, split: AxisSplit, kind: str = "sum", rounding: Optional[Callable] = None) -> np.ndarray:
    """The inclusive scan of ``x`` along ``axis`` (forward) in the compiled kernel's order."""
    fast = COMBINES[kind] if rounding is None else None
    return _scan((np.asarray(x),), axis, split, _lifted(kind, rounding), fast)[0]


def scan_with(xs: tuple, axis: int, split: AxisSplit, op: Combine) -> tuple:
    """The inclusive scan of the operands ``xs`` (arrays of one shape) along ``axis`` (forward) by ``op`` in
    the compiled kernel's order."""
    return _scan(tuple(np.asarray(x) for x in xs), axis, split, op, None)


def _scan(xs: tuple, axis: int, split: AxisSplit, op: Combine, fast) -> tuple:
    s = _inclusive(_split_axis(xs, axis, split), op, fast)  # (..., blocks, warps, lanes, per_thread)
    k = _kogge_stone(_at(s, (..., -1)), op)                 # (..., blocks, warps, lanes)
    out = (_one_warp if split.warps == 1 else _across_warps)(s, k, op, split)
    return tuple(np.moveaxis(o.reshape(o.shape[:-4] + (split.size,)), -1, axis).astype(x.dtype, copy=False)
                 for o, x in zip(out, xs))


def _finish_chunk(out: tuple, s: tuple, c: int, last: tuple, prev: tuple, op: Combine, first_lane_keeps) -> None:
    """Block ``c``: each lane's last element is ``last``; its others ``prev + own``, or ``own`` where
    ``first_lane_keeps`` (..., warps, lanes) says the thread is the first of the scan."""
    for o, v in zip(out, last):
        o[..., c, :, :, -1] = v
    if s[0].shape[-1] > 1:
        own = _at(s, (..., c, slice(None), slice(None), slice(None, -1)))
        summed = op(_at(prev, (..., None)), own)
        keep = first_lane_keeps[..., None]
        for o, a, b in zip(out, own, summed):
            o[..., c, :, :, :-1] = np.where(keep, a, b)


def _one_warp(s: tuple, k: tuple, op: Combine, split: AxisSplit) -> tuple:
    """AddPartialReduceOneWarp: the axis inside one warp; a block's carry is the previous block's last lane."""
    out = tuple(np.empty_like(a) for a in s)
    lanes = split.lanes
    first = np.zeros((1, lanes), dtype=bool)
    first[0, 0] = True
    acc = None
    for c in range(split.blocks):
        kc = _at(k, (..., c, slice(None), slice(None)))     # (..., 1, lanes)
        last = kc if c == 0 else op(acc, kc)
        if lanes > 1:
            carry_in = _at(kc, (..., slice(0, 1))) if c == 0 else acc   # what lane 0 adds (none in block 0)
            head = _spread(carry_in, last[0][..., :1].shape)
            prev = tuple(np.concatenate([h, a[..., :-1]], axis=-1) for h, a in zip(head, last))
            acc = _at(last, (..., slice(-1, None)))
        else:
            prev = acc = last
        _finish_chunk(out, s, c, last, prev, op, first if c == 0 else np.zeros_like(first))
    return out


def _across_warps(s: tuple, k: tuple, op: Combine, split: AxisSplit) -> tuple:
    """AddPartialReduce: each warp's chunk total through shared memory, folded left to right; warp w adds the
    fold of the warps before it (and of every earlier block)."""
    out = tuple(np.empty_like(a) for a in s)
    warps = split.warps
    lead = s[0].shape[:-4]
    first = np.zeros((warps, split.lanes), dtype=bool)
    first[0, 0] = True
    total = masked = None
    w_idx = np.arange(warps)
    for c in range(split.blocks):
        part = _at(k, (..., c, slice(None), -1))            # (..., warps): each warp's chunk total
        for i in range(warps):
            if total is None:
                total = _at(part, (..., 0))
                masked = _spread(_at(total, (..., None)), lead + (warps,))
                continue
            total = op(total, _at(part, (..., i)))
            masked = _where(w_idx >= i + 1, _at(total, (..., None)), masked)
        kc = _at(k, (..., c, slice(None), slice(None)))     # (..., warps, lanes)
        last = op(_at(masked, (..., None)), kc)
        if c == 0:
            last = _where((w_idx == 0)[:, None], kc, last)
        prev = tuple(np.concatenate([m[..., None], a[..., :-1]], axis=-1) for m, a in zip(masked, last))
        _finish_chunk(out, s, c, last, prev, op, first if c == 0 else np.zeros_like(first))
        masked = _spread(_at(total, (..., None)), lead + (warps,))
    return out
