"""Which memory ops address memory through int32 offsets, and how large those offsets got.

``x_ptr + offs`` with an int32 ``offs`` is correct until ``offs`` passes 2^31 - 1 at a larger size, where
it wraps (record/checks/overflow.py reports the wraps that happen in the recorded launch). To say *when*
the kernel breaks, the analysis (analysis/advice/predictions.py) needs, per memory op, the largest int32 offset
its pointers were built from: the hooks mark a pointer made from an int32 offset with the largest magnitude
of that offset (read from the operand's unbroadcast core, so a block costs a row and a column), keep the
largest mark through further pointer arithmetic, splats, broadcasts and reshapes (a loop's
``ptrs += BLOCK_K * stride_k`` adds a small int32 step to a 64-bit pointer: only the int32 values
themselves can wrap), and a memory op through a marked
pointer keeps the largest mark seen per (line, op, tensor). A maximum does not change when a chunk runs
again, so nothing is rolled back. Results go to ``Launch.meta["int32_address"]``.
"""
from __future__ import annotations

import numpy as np

from ..frames import where
from ..batch.described import core
from ..gpu.lowp import inner_method
from .monitor import Monitor
from .overflow_ops import _CARRY, _MEMORY
from ..patching import carried

MARK = "_tt_int32_offset"      # the largest |int32 offset| a pointer was built from


class Int32Addresses(Monitor):
    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        self.largest: dict = {}        # (file, line, op, tensor) -> the largest int32 offset behind its pointers

    def reached(self, op: str, tensor: int, file, line, largest: int) -> None:
        key = (file, int(line or 0), op, tensor)
        if largest > self.largest.get(key, -1):
            self.largest[key] = largest

    # (a maximum: a worker's merge in whatever order)
    def fork_point(self):
        return None

    def since(self, point) -> dict:
        return dict(self.largest)

    def mergeable(self, added):
        return None

    def merge(self, added) -> None:
        for key, largest in added.items():
            if largest > self.largest.get(key, -1):
                self.largest[key] = largest

    def records(self) -> dict:
        order = sorted(self.largest.items(), key=lambda kv: (str(kv[0][0]),) + kv[0][1:])
        return {"int32_address": [{"file": f, "line": line, "op": op, "tensor": self.tensor_name(t), "max": m}
                                  for (f, line, op, t), m in order]}


def install(scope, builder, rec) -> None:
    if hasattr(builder, "create_addptr"):
        scope.set_attr(builder, "create_addptr", _addptr(inner_method(builder, "create_addptr")))
    for name in _CARRY:                     # a splat, broadcast, reshape, where of a marked pointer keeps its mark
        if name != "create_addptr" and hasattr(builder, name):
            scope.set_attr(builder, name, _carry(inner_method(builder, name)))
    for name, (ptr_at, _, _) in _MEMORY.items():
        if hasattr(builder, name):
            kind = "load" if "load" in name else "store" if "store" in name else "atomic"
            scope.set_attr(builder, name, _memory(inner_method(builder, name), rec, kind, ptr_at))


def _largest(handle) -> int:
    data = getattr(handle, "data", None)
    if data is None:
        return -1
    data = np.asarray(data)
    if data.dtype != np.int32:
        return -1
    c = core(data)
    if not c.size:
        return -1
    return max(abs(int(c.min())), abs(int(c.max())))


def _addptr(inner):
    def run(ptr, offset, *args, **kwargs):
        out = inner(ptr, offset, *args, **kwargs)
        mark = max(carried(ptr, MARK, -1), _largest(offset))
        if mark >= 0:
            setattr(out, MARK, mark)
        return out
    return run


def _carry(inner):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        mark = -1
        for a in args:                 # (a loop, not a generator: this runs on every broadcast and splat)
            m = carried(a, MARK, -1)
            if m > mark:
                mark = m
        if mark >= 0 and out is not None:
            setattr(out, MARK, mark)
        return out
    return run


def _memory(inner, rec, kind, ptr_at):
    def run(*args, **kwargs):
        mark = carried(args[ptr_at], MARK, -1) if len(args) > ptr_at else -1
        if mark >= 0 and rec.recording:
            file, line = where()
            rec.int32_address.reached(kind, rec.origin if rec.origin is not None else -1, file, line, mark)
        return inner(*args, **kwargs)
    return run
