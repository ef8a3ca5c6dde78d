"""``numerics="compiled"``: float ``tl.sum`` (and ``tl.reduce`` whose combine is one add or multiply),
``tl.cumsum`` and ``tl.cumprod`` combined in the order the kernel compiled for sm_90 combines them
(numerics/reduction_tree.py), so that the traced values are the GPU's bits rather than numpy's pairwise sums.

The order follows from the layout the compiler gave the op's operand: the launch is compiled for sm_90 on this
machine (gpu/asbuilt.py, once per specialization), and each reduction or scan the interpreter runs is matched
to its TTGIR op by source line, kind, axis and shape. The interpreter (or the batched chunk) computes its
result as before; where the order is known the values are recomputed in it and replace numpy's, so every
recording around the op (its compute row, the checks) sees the same op.

Left in numpy's order, and said so in the launch's ``meta["reduction_order"]`` (one note per source line):
a kernel that does not compile here, an op the TTGIR does not show at that line, a layout this does not
model (an MMA or dot-operand layout, elements spread over CTAs), ``axis=None`` on a block of
rank 2 or more (the compiler flattens it in an order of its choosing), a combine other than one add or
multiply. Max, min and integer reductions are exact in any order and are not touched. A reverse scan is the
forward scan of the reversed axis: the lowering reverses each thread's registers and exchanges lane ``l`` with
``31 - l`` (``shfl.sync.bfly`` 31), reflects the warp index, scans forward and reverses back.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
import triton.language as tl

from ...numerics import reduction_tree as tree
from ..frames import where
from ..interp.access import ReduceOps, ScanOps, TensorHandle, combine_kind
from . import asbuilt

META_KEY = "reduction_order"
MAX_NOTES = 64
_ARITH = {"addf": "sum", "mulf": "prod"}
_EXACT = ("max", "min", "argmax", "argmin")
# TTGIR element type -> (numpy dtype the interpreter holds it in, rounding after each combine)
_ELEMENTS = {"f32": (np.float32, None), "f64": (np.float64, None), "f16": (np.float16, None),
             "bf16": (np.float32, tree.bf16_rounded)}       # gpu/lowp hands bf16 blocks over widened to fp32


def describe() -> str:
    return "float tl.sum/tl.cumsum/tl.cumprod combined in the sm_90 kernel's order (its layout's tree)"


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
            # apply() re-enters itself with a 1-tuple: reorder there, once
            if isinstance(input, tuple) and len(input) == 1 and isinstance(out, tuple) and len(out) == 1:
                new = _reordered(launch, self, _kind, input[0], out[0])
                if new is not None:
                    return (new,)
            return out
        scope.set_attr(ops_cls, "apply", apply)


def _reordered(launch: _Launch, op, kind: str, x, res):
    """``res`` recomputed in the compiled order, or None (numpy's result stands; noted where it matters)."""
    standard = combine_kind(op.combine_fn)
    data = np.asarray(getattr(getattr(x, "handle", None), "data", None))
    if standard in _EXACT or data.dtype.kind != "f" or not x.type.is_block():
        return None
    file, line = where()
    shape = tuple(int(s) for s in x.type.shape)
    why, found = _compiled_op(launch.facts(), kind, file, line, op, shape)
    if found is None:
        launch.note(file, line, kind, f"numpy's order: {why}")
        return None
    cop, axis, split = found
    combine = _ARITH.get(cop.combine)
    if combine is None or (standard is not None and standard != combine):
        launch.note(file, line, kind, f"numpy's order: the compiled combine is {cop.combine or 'not one add'}")
        return None
    held, rounding = _ELEMENTS.get(cop.element, (None, None))
    if held is None or data.dtype != held:
        launch.note(file, line, kind, f"numpy's order: {cop.element} held as {data.dtype}")
        return None
    batched = data.ndim == len(shape) + 1
    if kind == "reduce":
        order = thread_order(launch.facts().triton)
        if order == "tree" and cop.element in ("f16", "bf16"):
            # 3.9 packs 16-bit elements in pairs (f16x2) before its tree: an order not modelled here
            launch.note(file, line, kind, f"numpy's order: {cop.element} in-thread order of Triton {launch.facts().triton}")
            return None
        values = tree.reduce(data, axis + batched, split, combine, rounding, order)
    elif op.reverse:
        ax = axis + batched
        values = np.flip(tree.scan(np.flip(data, ax), ax, split, combine, rounding), ax)
    else:
        values = tree.scan(data, axis + batched, split, combine, rounding)
    out = np.asarray(res.handle.data)
    if values.size != out.size:
        launch.note(file, line, kind, f"numpy's order: {values.size} results where the interpreter has {out.size}")
        return None
    launch.note(file, line, kind, f"sm_90 order: {'reversed, ' if kind == 'scan' and op.reverse else ''}{cop.layout.get('kind')} layout, {split.per_thread} per thread, "
                                  f"{split.lanes} lanes, {split.warps} warps, {split.blocks} blocks")
    return tl.core.tensor(TensorHandle(values.reshape(out.shape).astype(out.dtype, copy=False), res.handle.dtype),
                          res.type)


def thread_order(version: str) -> str:
    """How a thread combines its own elements of a reduction: Triton 3.6 folds them in register order, 3.9's
    linear-layout lowering takes a pairwise tree (both read from their LLVM IR for sm_90); releases between
    are taken to lower as 3.9 does."""
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        return "tree"
    return "sequential" if (major, minor) < (3, 7) else "tree"


def _compiled_op(facts: asbuilt.Facts, kind: str, file, line: int, op, shape: tuple):
    """(why not, None) or (None, (the TTGIR op, its axis, its AxisSplit)) for the running op."""
    if facts.error:
        return facts.error, None
    axis = op.axis
    if axis is None:
        if len(shape) != 1:
            return "axis=None over a block of rank 2 or more (the compiler flattens it in its own order)", None
        axis = 0
    axis = axis % len(shape)
    ops = [c for c in facts.at(kind, file, line) if tuple(c.shape) == shape and c.axis == axis]
    if not ops:
        return f"no compiled {kind} of a {list(shape)} block over axis {axis} at this line", None
    splits = set()
    for c in ops:
        bases = tree.layout_bases(c.layout, c.shape) if c.layout else None
        split = tree.axis_split(bases, c.shape, axis) if bases else None
        if split is None:
            return f"the {(c.layout or {}).get('kind', 'unknown')} layout is not modelled", None
        splits.add(split)
    if len(splits) > 1:
        return "several compiled ops at this line with different layouts", None
    return None, (ops[0], axis, splits.pop())
