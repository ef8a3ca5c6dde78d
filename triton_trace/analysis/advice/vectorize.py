"""The ``narrow_vector`` hint: a load or store whose data is contiguous and aligned at run time, in every
program, while the kernel compiled for the analysed GPU moves it in narrower vectors.

Triton vectorises a global access only as far as its axis analysis proves the pointer contiguous and
divisible (and the mask constant): the coalescing pass gives each thread min(proven alignment, 16 bytes,
numel / threads) consecutive elements (Coalesce.cpp) and the lowering issues them as one ``ld``/``st.v<n>``.
A row pitch that is not a multiple of 16 (so not specialised), an offset loaded from memory, a view shifted
by a few elements: the compiler assumes the worst and issues 4-byte (or 2-byte) accesses, even where every
program's offsets are in fact aligned.

The recorded offsets of every execution of the op decide how wide a vector the data allows: the widest ``v``
(elements; at most 16 bytes, and at most what Triton lets a thread hold) such that, along the compiled
layout's fastest dim, every aligned run of ``v`` elements is masked off entirely or active throughout, with
consecutive offsets from a multiple of ``v``. Offsets count from the storage's first element, and a storage
starts 256-byte aligned on the GPU (cudaMalloc's guarantee; the trace records no device address, and
compiled/__init__.py's stand-ins place storages the same way), so an offset that is a multiple of ``v`` is an
address aligned to ``v`` elements.

Both sides are counted by the memory model, not by a formula: the compiled layout with its own vector width,
and the layout the coalescing pass would build with ``v`` elements per thread (``layouts.blocked``; the
compiled one where its sizePerThread already holds ``v``), each through the request order and the counter the
analysis uses for every compiled op (``layouts.request_order``, ``layouts.count``). A hint is given only where
the wider vector needs fewer instructions; the sectors usually stay the same, and the hint says so.

Cost: ops whose compiled vector is 16 bytes already (every aligned kernel) are skipped before any lane is
read; the others read their rows once per width tried (at most three), regular rows by their pattern.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import LOAD, LaunchContext
from ..memory.layouts import blocked, count, matched, request_order
from ..units import sig

KIND = "narrow_vector"
WIDEST_BYTES = 16                       # ld.global.v4.b32 / st.global.v4.b32 / cp.async 16: a thread's widest access
VECTOR_INSTRUCTIONS = ("ld", "st", "cp.async")
CHUNK_LANES = 1 << 20                   # lanes of irregular rows checked at once


def _floor_pow2(n: int) -> int:
    return 1 << (max(int(n), 1).bit_length() - 1)


def _runs(o: np.ndarray, m: np.ndarray, shape: tuple, fast: int, v: int) -> tuple:
    """For rows of offsets ``o`` and mask ``m`` ((rows, numel), row-major over ``shape``) cut into aligned runs
    of ``v`` along ``fast``: (per row: every run is masked off or active with steps of +1, per run: the
    first offset modulo ``v`` where the run is active, else -1)."""
    r = len(o)
    ot = np.moveaxis(o.reshape((r,) + shape), 1 + fast, -1).reshape(r, -1, v)
    mt = np.moveaxis(m.reshape((r,) + shape), 1 + fast, -1).reshape(r, -1, v)
    on = mt.all(axis=2)
    steps = (np.diff(ot, axis=2) == 1).all(axis=2) | ~on
    return (on | ~mt.any(axis=2)).all(axis=1) & steps.all(axis=1), np.where(on, ot[:, :, 0] % v, -1)


def allowed(ctx: LaunchContext, rows: np.ndarray, shape: tuple, fast: int, v: int) -> bool:
    """Whether ``v``-element vectors along block dim ``fast`` fit every execution in ``rows`` (see the module
    docstring). Regular rows are checked once per pattern, then by their base alone."""
    if v < 2 or int(shape[fast]) % v:
        return v == 1
    n = int(np.prod(shape))
    ok, groups = ctx.regular_groups(rows)
    for pat, members in groups:
        o = np.zeros((1, n), dtype=np.int64)
        o[0, :len(pat)] = pat
        fits, start = _runs(o, (np.arange(n) < len(pat))[None, :], shape, fast, v)
        residues = np.unique(start[start >= 0])
        if not fits[0] or len(residues) > 1:
            return False
        if len(residues) and ((ctx.row_base[members] + residues[0]) % v).any():
            return False
    rest = rows[~ok]
    per_chunk = max(1, CHUNK_LANES // n)
    for i in range(0, len(rest), per_chunk):
        o, m = ctx.block(rest[i:i + per_chunk], n)
        fits, start = _runs(o, m, shape, fast, v)
        if not fits.all() or (start > 0).any():
            return False
    return True


def plan(ctx: LaunchContext, sid: int, compiled_op: dict) -> Optional[dict]:
    """What static op ``sid``, compiled as ``compiled_op``, issues now and would issue with the widest vector
    its recorded data allows: {"vec", "wide", "layout", "layout_wide", "per_warp", "per_warp_wide", "requests",
    "requests_wide", "sectors", "sectors_wide"} (vectors in elements, per_warp in instructions per warp and
    execution); None where the compiled vector is as wide as the data (or the compiler) allows."""
    lay = compiled_op.get("layout") or {}
    row = int(ctx.op_first_row[sid])
    if compiled_op.get("instruction") not in VECTOR_INSTRUCTIONS or not compiled_op.get("vector_bytes") or \
            lay.get("kind") != "blocked" or row >= ctx.n_rows or not ctx.is_mem[row]:
        return None
    eb = int(ctx.eb[row])
    nd = int(ctx.launch.ops["ndim"][row])
    shape = tuple(int(s) for s in ctx.launch.ops["shape"][row][:nd]) or (1,)
    vec = max(int(compiled_op["vector_bytes"]) // max(eb, 1), 1)
    order = list(lay.get("order") or [])
    if vec * eb >= WIDEST_BYTES or sorted(order) != list(range(len(shape))):
        return None
    fast, numel = order[0], int(np.prod(shape))
    spt_fast = int(lay["sizePerThread"][fast])
    # Coalesce.cpp caps a thread's elements at numel / threads; a layout that already holds more keeps them
    cap = _floor_pow2(min(WIDEST_BYTES // eb, max(numel // (ctx.num_warps * ctx.params.warp_size), spt_fast, 1)))
    if cap <= vec:
        return None
    rows = np.flatnonzero(ctx.row_op == sid)
    if (ctx.lane_count[rows] != numel).any():       # one line, one tensor, blocks of two shapes: ambiguous
        return None
    wide = vec
    while wide < cap and allowed(ctx, rows, shape, fast, wide * 2):
        wide *= 2
    if wide == vec:
        return None
    layout_wide = lay if spt_fast % wide == 0 else blocked(shape, wide, order, ctx.num_warps, ctx.params.warp_size)
    write = int(ctx.kind[row]) != LOAD
    issue = request_order(lay, shape, ctx.num_warps, vec, write)
    issue_wide = request_order(layout_wide, shape, ctx.num_warps, wide, write)
    if issue is None or issue_wide is None:
        return None
    req, sec = count(ctx, rows, issue, vec)
    req_wide, sec_wide = count(ctx, rows, issue_wide, wide)
    if req_wide >= req:
        return None
    clean = lambda d: {k: v for k, v in d.items() if k != "name"}
    return {"vec": vec, "wide": wide, "elem_bytes": eb, "layout": clean(lay), "layout_wide": clean(layout_wide),
            "per_warp": int(issue.shape[1]), "per_warp_wide": int(issue_wide.shape[1]), "requests": req,
            "requests_wide": req_wide, "sectors": sec, "sectors_wide": sec_wide}


def _hint(op: dict, instruction: str, p: dict) -> dict:
    eb, vec, wide = p["elem_bytes"], p["vec"], p["wide"]
    where = f"{op['kind']} of '{op['tensor']}'"
    sectors = (f"the same {p['sectors']:,} sectors (the bytes fetched do not change)" if p["sectors_wide"] == p["sectors"]
               else f"{p['sectors_wide']:,} sectors instead of {p['sectors']:,}")
    mask = f", and a mask bound it can see is a multiple of {wide}" if op.get("masked_lanes") else ""
    return {"kind": KIND, "file": op["file"], "line": op["line"], "op": op["kind"], "tensor": op["tensor"],
            "saving": 1.0 - p["requests_wide"] / p["requests"],
            "message": f"line {op['line']}: the {where} is compiled to {vec * eb}-byte accesses ({instruction}, "
                       f"{p['per_warp']} instructions per warp), yet in every program each thread's {wide} elements "
                       f"are consecutive and {wide * eb}-byte aligned",
            "effect": f"{wide * eb}-byte vectors (sizePerThread {wide}) would issue {p['requests_wide']:,} instructions "
                      f"instead of {p['requests']:,} ({p['per_warp_wide']} per warp, "
                      f"{sig(p['requests'] / p['requests_wide'])}x fewer) and fetch {sectors}; the compiler could "
                      f"not prove the alignment: mark the offsets with tl.multiple_of(..., {wide}) (such as "
                      f"tl.multiple_of(row * stride, {wide}); on a bare kernel argument it is lost), with "
                      f"tl.max_contiguous where they are loaded, or pass a row pitch or offset that is a multiple "
                      f"of 16, which Triton specialises{mask}"}


def hints(ctx: LaunchContext, ops: list, min_lanes: int) -> list:
    """``narrow_vector`` hints of one launch's loads and stores (``ops``: metrics.static_ops) that ran at least
    ``min_lanes`` lanes, from the compiled ops ``layouts.match`` found for them."""
    out = []
    for sid, o in sorted(matched(ctx).items()):
        op = ops[sid]
        if op["kind"] not in ("load", "store") or op["lanes"] < min_lanes:
            continue
        p = plan(ctx, sid, o)
        if p is not None:
            instruction = f"{o['instruction']} {o['vector_bytes']} B"
            out.append(_hint(op, instruction, p))
    return out
