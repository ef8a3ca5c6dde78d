"""The order in which a kernel compiled for sm_90 combines the elements of ``tl.sum`` (``tl.reduce`` with an add
combine) and of ``tl.cumsum``/``tl.cumprod``, as numpy over the same values, so that a float result has the
GPU's bits. Floating-point adds are commutative but not associative: the order is the whole difference.

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
  xor offsets largest first (lanes/2, ..., 1), lane j adding lane j ^ N; the warps' partials, through shared
  memory, in the same butterfly.
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
def bf16_rounded(x) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest-even) and widened back: a bf16 combine's result."""
    return bf16_to_f32(f32_to_bf16(np.asarray(x, dtype=np.float32)))


def _combiner(kind: str, rounding: Optional[Callable]):
    op = COMBINES[kind]
    if rounding is None:
        return op
    return lambda a, b: rounding(op(a, b))


def _split_axis(x, axis: int, split: AxisSplit) -> np.ndarray:
    """``x`` with ``axis`` moved last and cut into (blocks, warps, lanes, per_thread)."""
    y = np.moveaxis(np.asarray(x), axis, -1)
    if y.shape[-1] != split.size:
        raise ValueError(f"axis of {y.shape[-1]} elements, layout of {split.size}")
    return y.reshape(y.shape[:-1] + (split.blocks, split.warps, split.lanes, split.per_thread))


def _fold(seq: np.ndarray, kind: str, rounding) -> np.ndarray:
    """Left fold along the last axis, strictly in order (ufunc.accumulate is sequential; reduce is not)."""
    if rounding is None:
        return COMBINES[kind].accumulate(seq, axis=-1)[..., -1]
    op = _combiner(kind, rounding)
    acc = seq[..., 0]
    for i in range(1, seq.shape[-1]):
        acc = op(acc, seq[..., i])
    return acc


def _butterfly(acc: np.ndarray, op) -> np.ndarray:
    """``shfl.sync.bfly`` rounds over the last axis, xor offset largest first: lane j takes op(own, lane j^N);
    afterwards lanes j and j^N agree (add and multiply commute bit for bit), so the first half is kept."""
    n = acc.shape[-1]
    while n > 1:
        n //= 2
        acc = op(acc[..., :n], acc[..., n:2 * n])
    return acc[..., 0]


def _pairwise(seq: np.ndarray, op) -> np.ndarray:
    """A balanced binary tree over the last axis (a power of two): neighbours first, (0+1), (2+3), ..."""
    while seq.shape[-1] > 1:
        seq = op(seq[..., 0::2], seq[..., 1::2])
    return seq[..., 0]


THREAD_ORDERS = ("sequential", "tree")


def reduce(x, axis: int, split: AxisSplit, kind: str = "sum", rounding: Optional[Callable] = None,
           thread_order: str = "sequential") -> np.ndarray:
    """``x`` reduced over ``axis`` (kept, of size 1) in the compiled kernel's order. ``rounding`` rounds each
    combine's result to the reduction's type where the values are held wider (bf16 in float32);
    ``thread_order`` is how a thread combines its own elements (see the module)."""
    y = _split_axis(x, axis, split)
    op = _combiner(kind, rounding)
    # registers in order: block c, then element e  ->  (..., warps, lanes, blocks * per_thread)
    seq = np.moveaxis(y, -4, -2).reshape(y.shape[:-4] + (split.warps, split.lanes, split.blocks * split.per_thread))
    if thread_order not in THREAD_ORDERS:
        raise ValueError(f"thread_order {thread_order!r}: one of {THREAD_ORDERS}")
    acc = _fold(seq, kind, rounding) if thread_order == "sequential" else _pairwise(seq, op)   # (..., warps, lanes)
    acc = _butterfly(acc, op)                               # lanes: (..., warps)
    acc = _butterfly(acc, op)                               # warps, through shared memory
    return np.expand_dims(acc.astype(np.asarray(x).dtype, copy=False), axis)


def _inclusive(y: np.ndarray, kind: str, rounding) -> np.ndarray:
    """Sequential inclusive scan along the last axis."""
    if rounding is None:
        return COMBINES[kind].accumulate(y, axis=-1)
    op = _combiner(kind, rounding)
    out = y.copy()
    for i in range(1, y.shape[-1]):
        out[..., i] = op(out[..., i - 1], y[..., i])
    return out


def _kogge_stone(t: np.ndarray, op) -> np.ndarray:
    """``shfl.sync.up`` rounds at distances 1, 2, 4, ... over the last axis: lane l >= d takes op(lane l-d, own)."""
    n = t.shape[-1]
    d = 1
    while d < n:
        nxt = t.copy()
        nxt[..., d:] = op(t[..., :-d], t[..., d:])
        t, d = nxt, d * 2
    return t


def scan(x, axis: int, split: AxisSplit, kind: str = "sum", rounding: Optional[Callable] = None) -> np.ndarray:
    """The inclusive scan of ``x`` along ``axis`` (forward) in the compiled kernel's order."""
    x = np.asarray(x)
    y = _split_axis(x, axis, split)
    op = _combiner(kind, rounding)
    s = _inclusive(y, kind, rounding)                       # (..., blocks, warps, lanes, per_thread)
    k = _kogge_stone(s[..., -1], op)                        # (..., blocks, warps, lanes)
    out = (_one_warp if split.warps == 1 else _across_warps)(s, k, op, split)
    out = out.reshape(out.shape[:-4] + (split.size,))
    return np.moveaxis(out, -1, axis).astype(x.dtype, copy=False)


def _finish_chunk(out, s, c: int, last, prev, op, first_lane_keeps) -> None:
    """Block ``c``: each lane's last element is ``last``; its others ``prev + own``, or ``own`` where
    ``first_lane_keeps`` (..., warps, lanes) says the thread is the first of the scan."""
    out[..., c, :, :, -1] = last
    if s.shape[-1] > 1:
        summed = op(prev[..., None], s[..., c, :, :, :-1])
        keep = first_lane_keeps[..., None]
        out[..., c, :, :, :-1] = np.where(keep, s[..., c, :, :, :-1], summed)


def _one_warp(s, k, op, split: AxisSplit) -> np.ndarray:
    """AddPartialReduceOneWarp: the axis inside one warp; a block's carry is the previous block's last lane."""
    out = np.empty_like(s)
    lanes = split.lanes
    first = np.zeros((1, lanes), dtype=bool)
    first[0, 0] = True
    acc = None
    for c in range(split.blocks):
        kc = k[..., c, :, :]                                # (..., 1, lanes)
        last = kc if c == 0 else op(acc, kc)
        if lanes > 1:
            carry_in = kc[..., :1] if c == 0 else acc       # what lane 0 adds (lane 0 of block 0 adds nothing)
            prev = np.concatenate([np.broadcast_to(carry_in, last[..., :1].shape), last[..., :-1]], axis=-1)
            acc = last[..., -1:]
        else:
            prev = acc = last
        _finish_chunk(out, s, c, last, prev, op, first if c == 0 else np.zeros_like(first))
    return out


def _across_warps(s, k, op, split: AxisSplit) -> np.ndarray:
    """AddPartialReduce: each warp's chunk total through shared memory, folded left to right; warp w adds the
    fold of the warps before it (and of every earlier block)."""
    out = np.empty_like(s)
    warps, lanes = split.warps, split.lanes
    lead = s.shape[:-4]
    first = np.zeros((warps, lanes), dtype=bool)
    first[0, 0] = True
    total = None
    masked = None
    w_idx = np.arange(warps)
    for c in range(split.blocks):
        part = k[..., c, :, -1]                             # (..., warps): each warp's chunk total
        for i in range(warps):
            if total is None:
                total = part[..., 0]
                masked = np.broadcast_to(total[..., None], lead + (warps,)).copy()
                continue
            total = op(total, part[..., i])
            masked = np.where(w_idx >= i + 1, total[..., None], masked)
        kc = k[..., c, :, :]                                # (..., warps, lanes)
        last = op(masked[..., None], kc)
        if c == 0:
            last = np.where((w_idx == 0)[:, None], kc, last)
        prev = np.concatenate([masked[..., None], last[..., :-1]], axis=-1)
        _finish_chunk(out, s, c, last, prev, op, first if c == 0 else np.zeros_like(first))
        masked = np.broadcast_to(total[..., None], lead + (warps,)).copy()
    return out
