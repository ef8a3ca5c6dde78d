"""``numerics="compiled"``: float reductions and scans (``tl.sum``, ``tl.cumsum``, ``tl.cumprod``, and
``tl.reduce``/``tl.associative_scan`` with the kernel's own combine, tuple combines included) combined in the
order the kernel compiled for sm_90 combines them (numerics/reduction_tree.py), so that the traced values are
the GPU's bits rather than numpy's pairwise sums or the interpreter's left-to-right loop.

The order follows from the layout the compiler gave the op's operand: the launch is compiled for sm_90 on this
machine (gpu/asbuilt.py, once per specialization), and each reduction or scan the interpreter runs is matched
to its TTGIR op by source line, kind, axis and shape. The interpreter (or the batched chunk) computes its
result as before; where the order is known the values are recomputed in it and replace the interpreter's, so
every recording around the op (its compute row, the checks) sees the same op. A combine of one add or
multiply is computed here with numpy (rounded to bf16 where gpu/lowp holds bf16 widened); any other combine
function is called on whole blocks at each step of the tree (``own_combine``). ``axis=None`` over a block
of rank 2 or more is reduced in the flat order the compiled reshape gives (gpu/flatorder.py). Two identical
reductions the compiler merged (CSE) leave no op at the second one's line; it takes the kernel's one layout
for such ops where there is one.

A sum of fp32/fp64 products (``tl.sum(x * x, 1)``), where the launch contracts (gpu/ascompiled.py marks
its products), is summed as the PTX sums it: LLVM fuses each add that takes a product into ``fma.rn``, in the
thread's registers or, one element a thread, in the first butterfly step (``reduce_contracted``; verified on
the PTX of Triton 3.6 and 3.9, tests/record/test_reduce_contraction.py). With one element a thread in one
warp, the lanes' results differ (each half fuses its own products); the trace keeps lane 0's, which a store
writes, and says so in the note. Not followed: a product the trace does not see reach the reduction as it is
(through ``tl.trans`` or ``tl.reshape`` it is still fused on the GPU, not here), fp16 products (``fma.rn.f16``
on the GPU), a product from before a loop or branch (not fused on the GPU, fused here).

Left in the interpreter's order, and said so in the launch's ``meta["reduction_order"]`` (one note per source
line): a kernel that does not compile here, an op the TTGIR does not show, a layout this does not model (an
MMA or dot-operand layout, elements spread over CTAs), a flattening not read from the TTGIR, what
``own_combine`` does not model. Max, min and
integer reductions are exact in any order and are not touched. A reverse scan is the forward scan of the
reversed axis: the lowering reverses each thread's registers and exchanges lane ``l`` with ``31 - l``
(``shfl.sync.bfly`` 31), reflects the warp index, scans forward and reverses back.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import triton.language as tl

from ...numerics import compiled, reduction_tree as tree
from ..frames import where
from ..interp.access import ReduceOps, ScanOps, TensorHandle, block_combine, combine_kind
from . import asbuilt, flatorder, products

META_KEY = "reduction_order"
MAX_NOTES = 64
_ARITH = {"addf": "sum", "mulf": "prod"}
_EXACT = ("max", "min", "argmax", "argmin")
_TTGIR_ELEMENTS = {"fp32": "f32", "fp64": "f64", "fp16": "f16", "bf16": "bf16"}
MERGED, FLATTENED = "merged by CSE with the kernel's one such op, ", "flattened as compiled, "
# TTGIR element type -> (numpy dtype the interpreter holds it in, rounding after each combine)
_ELEMENTS = {"f32": (np.float32, None), "f64": (np.float64, None), "f16": (np.float16, None),
             "bf16": (np.float32, tree.bf16_rounded)}       # gpu/lowp hands bf16 blocks over widened to fp32


def describe() -> str:
    return "float reductions and scans (sums, own combines) in the sm_90 kernel's order (its layout's tree)"


class _Launch:
    """What one launch's reductions share: its compiled facts (compiled at the first reduction) and notes."""

    def __init__(self, rec):
        self.rec = rec
        self._facts = None

    def facts(self) -> asbuilt.Facts:
        if self._facts is None:
            self._facts = asbuilt.current()
        return self._facts

    def note(self, file: Optional[str], line: int, kind: str, text: str) -> None:
        notes = self.rec.meta_extra.setdefault(META_KEY, {})
        key = f"{os.path.basename(file or '?')}:{line} {kind}"
        if key in notes or len(notes) < MAX_NOTES:
            notes[key] = text[:200]


def install(scope, rec) -> None:
    """Wrap ``ReduceOps.apply``/``ScanOps.apply`` (inside gpu/lowp's bf16 widening, outside the interpreter's
    and the batched chunk's numpy) for one launch."""
    launch = _Launch(rec)
    for ops_cls, kind in ((ReduceOps, "reduce"), (ScanOps, "scan")):
        inner = ops_cls.apply

        def apply(self, input, _inner=inner, _kind=kind):
            out = _inner(self, input)
            # apply() re-enters itself with a tuple of the operands: reorder there, once
            if isinstance(input, tuple) and input and isinstance(out, tuple) and len(out) == len(input):
                new = _reordered(launch, self, _kind, input, out)
                if new is not None:
                    return new
            return out
        scope.set_attr(ops_cls, "apply", apply)


def _reordered(launch: _Launch, op, kind: str, xs: tuple, outs: tuple) -> Optional[tuple]:
    """``outs`` recomputed in the compiled order, or None (the interpreter's result stands; noted where it
    matters)."""
    standard = combine_kind(op.combine_fn)
    if standard in _EXACT or not all(isinstance(x, tl.core.tensor) and x.type.is_block() for x in xs):
        return None
    if not any(x.type.scalar.is_floating() for x in xs):     # integer combines are exact in any order
        return None
    datas = [np.asarray(x.handle.data) for x in xs]
    file, line = where()
    shape = tuple(int(s) for s in xs[0].type.shape)
    element = _TTGIR_ELEMENTS.get(str(xs[0].type.scalar), "")
    why, found = _compiled_op(launch.facts(), kind, file, line, op, shape, element)
    if found is None:
        launch.note(file, line, kind, f"numpy's order: {why}")
        return None
    cop, axis, split, flat, how = found
    batched = datas[0].ndim == len(shape) + 1
    raw_shape = datas[0].shape
    if flat is not None:        # axis=None over a block of rank >= 2: the compiler's flat order
        datas = [d.reshape(d.shape[:batched] + (-1,))[..., flat] for d in datas]
    merged = how.startswith(MERGED)
    combine = standard if merged and standard in _ARITH.values() else _ARITH.get(cop.combine)
    if standard is None and (len(xs) > 1 or combine is None or merged):
        order = thread_order(launch.facts().triton) if kind == "reduce" else None
        why, values = ("a batched chunk", None) if batched else \
            own_combine(launch.rec, op, kind, xs, datas, axis, split, order)
    elif combine is None or (standard is not None and standard != combine):
        why, values = f"the compiled combine is {cop.combine or 'not one add'}", None
    else:
        # one element a thread and one lane: the products go to shared memory as they are; no add takes one
        fuses = split.blocks * split.per_thread > 1 or split.lanes > 1
        factors = _factors(xs[0], raw_shape, flat, batched) if fuses and kind == "reduce" and combine == "sum" \
            and len(xs) == 1 and cop.element in _FUSED else None
        if factors is not None:
            how += "products fused (fma.rn), " + (_UPPER_LANES if _lanes_differ(split) else "")
        why, values = _arithmetic(launch, op, kind, datas[0], axis + batched, split, cop, combine, factors)
    if values is None:
        launch.note(file, line, kind, f"numpy's order: {why}")
        return None
    results = []
    for value, res in zip(values, outs):
        out = np.asarray(res.handle.data)
        if value.size != out.size:
            launch.note(file, line, kind, f"numpy's order: {value.size} results where the interpreter has {out.size}")
            return None
        results.append(tl.core.tensor(TensorHandle(value.reshape(out.shape).astype(out.dtype, copy=False),
                                                   res.handle.dtype), res.type))
    launch.note(file, line, kind, f"sm_90 order: {how}{'reversed, ' if kind == 'scan' and op.reverse else ''}"
                                  f"{cop.layout.get('kind')} layout, {split.per_thread} per thread, "
                                  f"{split.lanes} lanes, {split.warps} warps, {split.blocks} blocks")
    return tuple(results)


def _arithmetic(launch: _Launch, op, kind: str, data, axis: int, split, cop, combine: str,
                factors: Optional[tuple] = None) -> tuple:
    """(why not, None) or (None, (values,)): a sum or product (one add or multiply) in the compiled order;
    ``factors``, the operands of the products a sum adds, where its adds contract them."""
    held, rounding = _ELEMENTS.get(cop.element, (None, None))
    if held is None or data.dtype != held:
        return f"{cop.element} held as {data.dtype}", None
    if kind == "reduce":
        order = thread_order(launch.facts().triton)
        if factors is not None:
            return None, (tree.reduce_contracted(data, *factors, axis, split, order, compiled.fma),)
        if order == "tree" and cop.element in ("f16", "bf16"):
            # 3.9 packs 16-bit elements in pairs (f16x2) before its tree: an order not modelled here
            return f"{cop.element} in-thread order of Triton {launch.facts().triton}", None
        return None, (tree.reduce(data, axis, split, combine, rounding, order),)
    if op.reverse:
        return None, (np.flip(tree.scan(np.flip(data, axis), axis, split, combine, rounding), axis),)
    return None, (tree.scan(data, axis, split, combine, rounding),)


_FUSED = ("f32", "f64")
_UPPER_LANES = "lane 0's value (upper-half lanes fuse their own product: other bits there), "


def _lanes_differ(split: tree.AxisSplit) -> bool:
    """Whether the lanes end a contracted sum with different values that the kernel goes on using: one
    element per thread, the first butterfly step fused differently in each half of the lanes, and no
    shared-memory stage (several warps) to hand every lane the one value lane 0 stored."""
    return split.blocks * split.per_thread == 1 and split.lanes > 1 and split.warps == 1


def _factors(h, shape: tuple, flat, batched: bool) -> Optional[tuple]:
    """The operands (as the reduced operand is laid out) of the product ``h`` a sum reduces, where LLVM
    contracts the sum's adds with it (gpu/ascompiled.py marks the products of a launch it contracts), or
    None. Taken to reach the reduction in registers in one basic block, as in every TTGIR examined the
    ``arith.mulf`` feeds the ``tt.reduce`` (a product from before a loop or a branch is fused here, not on
    the GPU)."""
    operands = products.reduced_product(h.handle)
    if operands is None:
        return None
    try:
        a, b = (np.broadcast_to(v, shape) for v in operands)
    except ValueError:
        return None
    if flat is not None:
        a, b = (v.reshape(v.shape[:batched] + (-1,))[..., flat] for v in (a, b))
    return a, b


# ------------------------------------------------------------------------------------------------------------
# a kernel's own combine function
# ------------------------------------------------------------------------------------------------------------
_HELD = (np.float16, np.float32, np.float64)


def own_combine(rec, op, kind: str, xs: tuple, datas: list, axis: int, split: tree.AxisSplit,
                order: Optional[str]) -> tuple:
    """(why not, None) or (None, values): the operands ``datas`` of the tensors ``xs`` (flattened for an
    ``axis=None`` reduction) combined by ``op``'s own function over ``axis`` in the compiled order (the
    scan's values, or the reduction's with ``axis`` kept); ``order`` is the in-thread order of a reduction.

    The lowering (ReduceOpToLLVM.cpp, ScanOpToLLVM.cpp) calls the combine region with the operands a sum gets,
    in the same sequence, whatever the region computes, the earlier elements always on the left (read from
    the LLVM IR of Triton 3.6 and 3.9 for sm_90; an H100 agrees, tests/record/test_compiled_own_combine.py).
    Each step of the tree is one call of the function over every pair it combines (interp/access's
    ``block_combine``), through the interpreter's builder as the interpreter's own loop calls it, so each
    combine computes what the trace computes elsewhere (``numerics="compiled"``'s fused multiply-adds and
    MUFU divide among it). These calls are not the kernel's ops: the recording is off while they run; the
    interpreter's loop, which ran first, recorded the op.

    Where the combine does not commute, the lanes of a butterfly end with different values; the tree keeps
    lane 0's: lane 0 stores a warp's partial to shared memory, and its copy is the one a store writes (a
    scalar store is predicated on thread 0, a reduced block's on the lanes at 0 along the reduced axis). A
    reduced value other lanes go on computing with is taken to be lane 0's there too. Not modelled: bf16 and
    fp8 operands (bit patterns under gpu/lowp), fp16 in Triton 3.9's in-thread tree (f16x2 pairs)."""
    for x, d in zip(xs, datas):
        if x.type.scalar.is_floating() and d.dtype.type not in _HELD:
            return f"a {x.type.scalar} operand held as {d.dtype}", None
    if kind == "reduce" and order == "tree" and any(d.dtype == np.float16 for d in datas):
        return "fp16 in the in-thread order of this Triton (f16x2 pairs)", None
    combine = block_combine(op, [x.dtype for x in xs])
    try:
        with _Unrecorded(rec), np.errstate(all="ignore"):
            if kind == "reduce":
                return None, tree.reduce_with(tuple(datas), axis, split, combine, order)
            if op.reverse:
                flipped = tree.scan_with(tuple(np.flip(d, axis) for d in datas), axis, split, combine)
                return None, tuple(np.flip(v, axis) for v in flipped)
            return None, tree.scan_with(tuple(datas), axis, split, combine)
    except (ValueError, TypeError) as e:     # a function that only takes one element pair (it reshapes, ...)
        return f"the combine function did not run on blocks: {type(e).__name__}: {e}", None


class _Unrecorded:
    """The launch's recording off for the block: the tree's combine calls are the tracer's, not the kernel's."""

    def __init__(self, rec):
        self.chunk = rec.chunk

    def __enter__(self):
        self.was, self.chunk.recording = self.chunk.recording, False

    def __exit__(self, *exc):
        self.chunk.recording = self.was
        return False


def thread_order(version: str) -> str:
    """How a thread combines its own elements of a reduction: Triton 3.6 folds them in register order, 3.9's
    linear-layout lowering takes a pairwise tree (both read from their LLVM IR for sm_90); releases between
    are taken to lower as 3.9 does."""
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        return "tree"
    return "sequential" if (major, minor) < (3, 7) else "tree"


def _compiled_op(facts: asbuilt.Facts, kind: str, file, line: int, op, shape: tuple, element: str):
    """(why not, None) or (None, (the TTGIR op, its axis, its AxisSplit, the flat order of an axis=None
    reduction of a block of rank >= 2 or None, what the note says of how the op was found))."""
    if facts.error:
        return facts.error, None
    block, axis, flat, how = shape, op.axis, None, ""
    if axis is None:            # the interpreter reduces the block flattened; so does the compiled kernel
        shape, axis = (int(np.prod(block)),), 0
    axis = axis % len(shape)
    ops = [c for c in facts.at(kind, file, line) if tuple(c.shape) == shape and c.axis == axis]
    if not ops:
        # CSE keeps one of two identical reductions (test_generic_reduction's sum0 and sum1): the one left
        # stands for both. Its layout is known where every such op of the kernel has the same; its combine
        # is not (the caller applies the kernel's own function)
        ops = [c for c in facts.ops if c.kind == kind and tuple(c.shape) == shape and c.axis == axis
               and c.element == element]
        if not ops or len({repr(c.layout) for c in ops}) != 1:
            return f"no compiled {kind} of a {list(shape)} block over axis {axis} at this line", None
        how = MERGED
    splits = set()
    for c in ops:
        bases = tree.layout_bases(c.layout, c.shape) if c.layout else None
        split = tree.axis_split(bases, c.shape, axis) if bases else None
        if split is None:
            return f"the {(c.layout or {}).get('kind', 'unknown')} layout is not modelled", None
        splits.add(split)
    if len(splits) > 1:
        return "several compiled ops at this line with different layouts", None
    if len(block) > 1 and op.axis is None:
        why, flat = flatorder.flat_order(facts.ttgir, block, ops[0].layout)
        if flat is None:
            return f"axis=None over a block of rank {len(block)}: {why}", None
        how += FLATTENED
    return None, (ops[0], axis, splits.pop(), flat, how)
