"""Which element of a block each position of its flattened copy holds, for ``axis=None`` reductions of a
block of rank 2 or more compiled for sm_90 (gpu/reduceorder.py).

``tl.reduce(x, axis=None)`` reshapes ``x`` to one dimension with ``can_reorder=True`` and reduces that. The
TTGIR shows it as ``tt.reshape %x allow_reorder : tensor<16x32xf32, #blocked> -> tensor<512xf32,
#blocked1>`` feeding the ``tt.reduce``; the compiler picked the result's layout, so the flat order is not
the row-major one the interpreter flattens in. The reshape's lowering moves no data (ReshapeOpConversion:
the source's registers unpacked and packed again as the result's, in the same order, in the same thread;
read from the LLVM IR of Triton 3.6 and 3.9 for sm_90, tests/record/test_compiled_own_combine.py):
the register ``r`` of lane ``l`` in warp ``w`` holds the element the source layout puts there, and is the
index the result layout gives ``(r, l, w)``. Both are linear layouts (numerics/reduction_tree.py), so the
map is read off them; a pair whose positions do not name one element per index is not modelled.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ...numerics import reduction_tree as tree
from .asbuilt import parse_layout

_ALIAS = re.compile(r"^#(\w+)\s*=\s*(#\w+\.\w+<.*>)\s*$")
_RESHAPE = re.compile(r"^\s*(%[\w#.]+)\s*=\s*tt\.reshape\s+%[\w#.]+\s+allow_reorder\b[^:]*:\s*(.*)$")
_REDUCE_OPERANDS = re.compile(r"\"tt\.reduce\"\(([^)]*)\)")


def flat_order(ttgir: str, shape: tuple, layout: dict) -> tuple:
    """(why not, None) or (None, ``order``): ``order[j]`` is the row-major index in the block of ``shape``
    that position ``j`` of the flattened operand holds, where the reduction's operand is the 1-D result of
    an ``allow_reorder`` reshape of that block laid out as ``layout`` (parsed, as gpu/asbuilt gives it)."""
    aliases = {m.group(1): m.group(2) for m in map(_ALIAS.match, ttgir.splitlines()) if m}
    reduced = {name.strip() for m in _REDUCE_OPERANDS.finditer(ttgir) for name in m.group(1).split(",")}
    numel = int(np.prod(shape))
    sources = []
    for line in ttgir.splitlines():
        m = _RESHAPE.match(line)
        if not m or m.group(1) not in reduced:
            continue
        types = _tensor_types(m.group(2))
        if len(types) != 2 or types[0][0] != tuple(shape) or types[1][0] != (numel,):
            continue
        src, dst = (parse_layout(t[1], aliases) if t[1] else None for t in types)
        if dst != layout:
            continue
        if src is None:
            return "the flattened block's layout is not read", None
        if src not in sources:
            sources.append(src)
    if len(sources) != 1:
        return ("no allow_reorder reshape of this block into the reduction" if not sources else
                "several reshapes into this layout with different sources"), None
    order = positions(tree.layout_bases(sources[0], shape), tree.layout_bases(layout, (numel,)), shape)
    if order is None:
        return "the flattening's layouts do not name one element per position", None
    return None, order


def positions(src: Optional[dict], dst: Optional[dict], shape: tuple) -> Optional[np.ndarray]:
    """The row-major index of the element each index of the 1-D layout ``dst`` holds, where every hardware
    position (register, lane, warp) holds the element ``src`` (over ``shape``) puts there; None where the
    layouts are not both known, differ in their hardware sizes, or disagree (two elements at one index)."""
    if src is None or dst is None or src.get("block") or dst.get("block"):
        return None
    if any(len(src.get(k, [])) != len(dst.get(k, [])) for k in ("register", "lane", "warp")):
        return None
    rank, numel = len(shape), int(np.prod(shape))
    bits = [b for k in ("register", "lane", "warp") for b in zip(src.get(k, []), dst.get(k, []))]
    hw = np.arange(1 << len(bits))
    coords = np.zeros((hw.size, rank), dtype=np.int64)
    flat = np.zeros(hw.size, dtype=np.int64)
    for i, (s, d) in enumerate(bits):
        on = (hw >> i) & 1
        coords ^= on[:, None] * np.asarray(s, dtype=np.int64)[None, :]
        flat ^= on * int(d[0])
    if (coords >= np.asarray(shape)).any() or (flat >= numel).any():
        return None
    element = np.ravel_multi_index(tuple(coords.T), tuple(shape))
    order = np.full(numel, -1, dtype=np.int64)
    order[flat] = element
    if (order[flat] != element).any() or (order < 0).any() or np.unique(order).size != numel:
        return None
    return order


def _tensor_types(text: str) -> list:
    """[(shape, encoding text)] of each ``tensor<...>`` in ``text``, in order."""
    out = []
    for m in re.finditer(r"tensor<", text):
        depth, i = 0, m.end() - 1
        for i in range(m.end() - 1, len(text)):
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            if depth == 0:
                break
        inner = text[m.end():i]
        dims, _, encoding = inner.partition(", ")
        shape = tuple(int(p) for p in dims.split("x")[:-1] if p.isdigit())
        out.append((shape, encoding.strip()))
    return out
