"""Values of a kernel's names cut down to some programs of a chunk, and put back together.

A masked loop (divergence/loops.py) whose programs finish at different trips runs its later trips on a
sub-chunk of the programs still running (``batch.Chunk.sub``): every name the loop's body uses is cut to
those programs' rows (``take``), and after the loop each name the body assigns is put back together from
the rows each program had when it left (``assemble``), so the loop computes nothing for programs that are
done with it. An early exit that many programs take (divergence/exits.py) cuts the names read after it the same
way, for the rest of the kernel. Only plain values, ``tl.constexpr`` and tensors whose handles hold numpy
data can be cut (``can_take``); a block pointer or a tensor descriptor keeps the loop masked instead.
"""
from __future__ import annotations

import types

import numpy as np

import triton.language as tl

from ...errors import BatchFallback, ChunkDiverged
from ..checks import OVERFLOW_TAG
from ..interp.access import TensorHandle
from ..patching import carried
from ..memory import provenance

UNBOUND = object()           # a name not bound (yet) when its programs left the loop
_PLAIN = (bool, int, float, complex, str, bytes, type(None), type, types.ModuleType, types.FunctionType,
          types.BuiltinFunctionType, tl.constexpr, tl.dtype)


def can_take(value) -> bool:
    if isinstance(value, tuple):
        return all(can_take(v) for v in value)
    if isinstance(value, tl.tensor):
        return type(value.handle) is TensorHandle
    return isinstance(value, _PLAIN) or callable(value) and not isinstance(value, tl.base_value)


def take(value, keep: np.ndarray):
    """``value`` with only the programs ``keep`` (bool over the running chunk's programs)."""
    if isinstance(value, tuple):
        return type(value)(*(take(v, keep) for v in value)) if hasattr(value, "_fields") else \
            type(value)(take(v, keep) for v in value)
    if not isinstance(value, tl.tensor):
        return value
    h = value.handle
    data = h.data
    if np.ndim(data) == 0 or data.shape[0] == 1:
        return value                           # the same in every program
    out = TensorHandle(data[keep], h.dtype)
    provenance.tag(out, provenance.origin(h))
    tag = carried(h, OVERFLOW_TAG)
    if tag is not None:
        lanes = np.broadcast_to(tag[1], data.shape)[keep]
        if lanes.any():
            setattr(out, OVERFLOW_TAG, (tag[0], lanes))
    return tl.tensor(out, value.type)


def assemble(name: str, parts: list, size: int, dead: bool = False):
    """One value over all ``size`` programs from ``parts``: (program indexes, value) for every group of
    programs that left the loop together (together they hold every program once). Programs that hold the
    name differently (unbound in some, or a plain value that changed between trips) cannot share one value:
    ChunkDiverged, labelling the groups that agree. ``dead``: the programs where the name is unbound never
    read it, so their rows may hold anything (zeros)."""
    if dead and any(v is UNBOUND for _, v in parts) and not all(v is UNBOUND for _, v in parts):
        parts = [(rows, v) for rows, v in parts if v is not UNBOUND]
        if all(isinstance(v, tl.tensor) and type(v.handle) is TensorHandle for _, v in parts):
            return _tensor(name, parts, size)
    values = [v for _, v in parts]
    first = values[0]
    if all(v is first for v in values):
        return first
    if any(v is UNBOUND for v in values):
        raise ChunkDiverged(f"'{name}' is first set on a trip some programs do not make",
                       _labels(parts, size, lambda v: v is not UNBOUND))
    if isinstance(first, tuple) and not hasattr(first, "_fields") and \
            all(type(v) is type(first) and len(v) == len(first) for v in values):
        return type(first)(assemble(name, [(rows, v[i]) for rows, v in parts], size) for i in range(len(first)))
    if isinstance(first, tl.tensor) and all(isinstance(v, tl.tensor) and type(v.handle) is TensorHandle
                                            for v in values):
        return _tensor(name, parts, size)
    plain = [v.value if isinstance(v, tl.constexpr) else v for v in values]
    if all(type(p) is type(plain[0]) and isinstance(p, _SAME) and p == plain[0] for p in plain):
        return first
    raise ChunkDiverged(f"'{name}' holds a value that differs between trips, which programs that leave the loop "
                   f"earlier keep", _labels(parts, size, lambda v: repr(v)))


_SAME = (bool, int, float, complex, str, bytes, type(None))


def _labels(parts, size: int, key) -> np.ndarray:
    out = np.zeros(size, dtype=np.int64)
    seen: dict = {}
    for rows, v in parts:
        out[rows] = seen.setdefault(key(v), len(seen))
    return out


def _tensor(name: str, parts: list, size: int):
    first = parts[0][1]
    if any(v.type != first.type for _, v in parts):
        raise BatchFallback(f"'{name}' changes type in a loop whose trip count differs between programs")
    ref = np.asarray(first.handle.data)
    covered = sum(len(rows) for rows, _ in parts)
    data = (np.empty if covered == size else np.zeros)((size,) + ref.shape[1:], dtype=ref.dtype)
    origins = {provenance.origin(v.handle) for _, v in parts}
    causes, lanes = [], None
    for rows, v in parts:
        d = np.asarray(v.handle.data)
        data[rows] = d if d.shape[0] == len(rows) else d[:1]
        tag = carried(v.handle, OVERFLOW_TAG)
        if tag is not None:
            bad = np.broadcast_to(tag[1], d.shape)
            if bad.any():
                if lanes is None:
                    lanes = np.zeros(data.shape, dtype=bool)
                lanes[rows] = bad if bad.shape[0] == len(rows) else bad[:1]
                if all(c is not tag[0] for c in causes):
                    causes.append(tag[0])
    if len(causes) > 1:
        # one tag holds one cause: two programs' different overflows cannot both be kept
        raise BatchFallback("integers wrapped differently in programs of a loop whose trip count differs "
                            "between them")
    h = TensorHandle(data, first.handle.dtype)
    if len(origins) == 1:
        provenance.tag(h, next(iter(origins)))
    if causes:
        setattr(h, OVERFLOW_TAG, (causes[0], lanes))
    return tl.tensor(h, first.type)
