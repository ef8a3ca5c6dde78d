"""The compiler's layouts in the memory model: which thread of which warp touches which element of each
memory op's block, and in which instruction, as Triton lays it out for the analysed GPU.

``analyze(layouts="compiler")`` (the default) compiles the launch for the GPU's architecture on the CPU
(triton_trace.compiled, cached on disk) and, for every traced load, store and atomic whose compiled op has
a blocked layout, replaces the coalescing model's guess (coalescing.py, points 1-3) with the layout:

- A blocked layout (sizePerThread, threadsPerWarp, warpsPerCTA, order) tiles the block; a block dim
  larger than the tile repeats it (more registers per thread), one smaller wraps it, so several threads
  hold the same element (Triton's linear-layout view of a blocked layout: registers, then lanes, then
  warps, each in ``order``, repeats as the highest register bits).
- Each thread issues its registers ``vec`` at a time, ``vec`` = the vector width of the op's PTX
  instructions (ld.global.v4, cp.async 16, ...) over the element size; instruction j of a warp is a
  request of its 32 threads' j-th vectors.
- Loads (and cp.async copies) are issued by every thread that holds an element, duplicates included:
  a layout wider than its block fetches the same sectors once per holder in separate requests. Stores
  and atomics are issued once per element (Triton masks out the redundant holders).

Ops the compiler lays out otherwise (TMA copies, MMA or linear layouts), or that cannot be matched to a
compiled op, keep the model; the report says which layout each op used.

``blocked`` builds the layout the coalescing pass would give a block for another sizePerThread, and ``count``
counts one op's requests and sectors in any issue order: the ``narrow_vector`` hint sets the compiled layout
beside a wider one (advice/vectorize.py), reading what ``match`` found through ``matched``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...model import KINDS
from ..arrays import unique_rows
from .coalescing import SECTOR_BYTES, _requests

DIRECTION = {"load": "load", "store": "store"}
CHUNK_LANES = 1 << 20        # lanes decoded at once when counting an op's irregular rows
_MATCHED = "_compiled_ops"   # where match() leaves its answer on the launch's context (see ``matched``)


def _coords(ids: np.ndarray, sizes: list, order: list) -> np.ndarray:
    """Per id, its coordinate along each dim when ids run through ``sizes`` with ``order[0]`` fastest."""
    out = np.zeros((len(ids), len(sizes)), dtype=np.int64)
    rest = ids.copy()
    for d in order:
        out[:, d] = rest % sizes[d]
        rest //= sizes[d]
    return out


def request_order(layout: dict, shape: tuple, num_warps: int, vec: int, write: bool) -> Optional[np.ndarray]:
    """Flat (row-major) element indices of a block of ``shape`` in issue order, shaped (warps, instructions,
    32, vec): entry [w, j, l, v] is the v-th element of lane l's j-th access in warp w; -1 where the lane
    issues nothing (a redundant holder of a store). None when the layout is not a blocked one of this rank."""
    if not layout or layout.get("kind") != "blocked":
        return None
    spt, tpw, wpc, order = (list(layout.get(k, [])) for k in ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"))
    nd = len(shape)
    if not all(len(x) == nd for x in (spt, tpw, wpc, order)) or int(np.prod(tpw)) != 32 or \
            int(np.prod(wpc)) != num_warps or sorted(order) != list(range(nd)):
        return None
    tile = [spt[d] * tpw[d] * wpc[d] for d in range(nd)]
    reps = [max(1, -(-int(shape[d]) // tile[d])) for d in range(nd)]
    n_elem, n_rep = int(np.prod(spt)), int(np.prod(reps))
    if vec < 1 or spt[order[0]] % vec:
        return None
    regs = np.arange(n_elem * n_rep, dtype=np.int64)
    e = _coords(regs % n_elem, spt, order)
    r = _coords(regs // n_elem, reps, order)
    lanes = _coords(np.arange(32, dtype=np.int64), tpw, order)
    warps = _coords(np.arange(num_warps, dtype=np.int64), wpc, order)
    # index along d = rep * tile + warp * (spt*tpw) + lane * spt + e, wrapped into the block
    idx = np.zeros((num_warps, 32, len(regs), nd), dtype=np.int64)
    for d in range(nd):
        v = (r[None, None, :, d] * tile[d] + warps[:, None, None, d] * spt[d] * tpw[d]
             + lanes[None, :, None, d] * spt[d] + e[None, None, :, d])
        idx[..., d] = v % int(shape[d])
    flat = np.ravel_multi_index(tuple(idx[..., d] for d in range(nd)), tuple(int(s) for s in shape))
    # (warps, lanes, regs) -> (warps, instructions, lanes, vec)
    out = flat.reshape(num_warps, 32, -1, vec).transpose(0, 2, 1, 3).copy()
    if write:
        order_flat = out.reshape(-1)
        first = np.zeros(len(order_flat), dtype=bool)
        first[np.unique(order_flat, return_index=True)[1]] = True
        order_flat[~first] = -1
        out = order_flat.reshape(out.shape)
    return out


def blocked(shape: tuple, per_thread: int, order: list, num_warps: int, warp: int = 32) -> dict:
    """The blocked layout Triton's coalescing pass gives a block of ``shape`` whose threads hold ``per_thread``
    consecutive elements along ``order[0]`` (BlockedEncodingAttr::get: from the fastest dim on, each dim takes
    as many threads as it has rows of ``per_thread``, lanes before warps; the slowest dim takes the rest)."""
    nd = len(shape)
    spt = [1] * nd
    spt[order[0]] = int(per_thread)
    tpw, wpc = [1] * nd, [1] * nd
    lanes, threads, warps = warp, num_warps * warp, num_warps
    prev_lanes = prev_warps = 1
    for i in order[:-1]:
        per_cta = min(max(threads, 1), max(1, int(shape[i]) // spt[i]))
        tpw[i] = min(max(per_cta, 1), lanes)
        wpc[i] = min(max(per_cta // tpw[i], 1), warps)
        warps, lanes, threads = warps // wpc[i], lanes // tpw[i], threads // per_cta
        prev_lanes, prev_warps = prev_lanes * tpw[i], prev_warps * wpc[i]
    tpw[order[-1]], wpc[order[-1]] = warp // prev_lanes, num_warps // prev_warps
    return {"kind": "blocked", "sizePerThread": spt, "threadsPerWarp": tpw, "warpsPerCTA": wpc, "order": list(order)}


def count(ctx, rows: np.ndarray, issue: np.ndarray, vec: int) -> tuple:
    """(requests, sectors) of ``rows`` (executions of one static op) issued in ``issue`` order (``request_order``)
    ``vec`` elements at a time, counted as the analysis counts a compiled layout (coalescing.py). Regular rows
    (``ctx.regular``) of one pattern, active lanes and base within a sector count alike: one of each is counted."""
    if not len(rows):
        return 0, 0
    flat = issue.reshape(-1)
    idx, live = np.where(flat >= 0, flat, 0), flat >= 0
    lanes, eb, warp = int(ctx.lane_count[rows[0]]), int(ctx.eb[rows[0]]), ctx.params.warp_size
    out = {k: np.zeros(ctx.n_rows, dtype=np.int64) for k in ("requests", "sectors", "lines", "used_bytes")}
    ok = ctx.regular(rows)
    reg, irr, weight = rows[ok], rows[~ok], np.zeros(0, dtype=np.int64)
    if len(reg):
        phase = (ctx.row_base[reg] * eb) % SECTOR_BYTES
        _, inverse = unique_rows(np.column_stack([ctx.row_sig[reg], ctx.active_lanes[reg], phase]))
        first = np.unique(inverse, return_index=True)[1]
        weight = np.bincount(inverse)
        reg = reg[first]
    per_chunk = max(1, CHUNK_LANES // max(lanes, 1))
    for part in (reg, irr):
        for i in range(0, len(part), per_chunk):
            chunk = part[i:i + per_chunk]
            o, m = ctx.block(chunk, lanes)
            _requests(ctx, chunk, o[:, idx], m[:, idx] & live[None, :], eb, warp, vec, vec, out, [])
    req = int((out["requests"][reg] * weight).sum()) + int(out["requests"][irr].sum())
    sec = int((out["sectors"][reg] * weight).sum()) + int(out["sectors"][irr].sum())
    return req, sec


def matched(ctx) -> dict:
    """Static op id -> compiled op, as ``match`` last found it for this launch ({} where it was not compiled):
    advice that reads the compiled kernel's view (advice/vectorize.py) takes it from here."""
    return ctx.__dict__.get(_MATCHED, {})


def _key_of(o: dict) -> tuple:
    lay = o["layout"] or {}
    return (o["instruction"], o["vector_bytes"], tuple(sorted((k, str(v)) for k, v in lay.items() if k != "name")))


def match(ctx, compiled) -> dict:
    """Static op id -> the compiled op it became (see the module docstring), for the memory ops that match
    one: the same file, line, direction and block shape; several traced ops on one line take the distinct
    compiled layouts of that line in order."""
    lc = ctx.launch
    ops = lc.ops
    by_key: dict = {}
    for o in compiled.ops:
        if o["file"] is None:
            continue
        key = (o["file"], int(o["line"]), o["direction"], tuple(o["shape"]))
        distinct = by_key.setdefault(key, [])
        if all(_key_of(x) != _key_of(o) for x in distinct):
            distinct.append(o)
    traced: dict = {}
    for sid, row in enumerate(ctx.op_first_row):
        if row >= ctx.n_rows or not ctx.is_mem[row]:
            continue
        kind = KINDS[int(ctx.kind[row])]
        direction = "load" if kind == "load" else "store" if kind == "store" else "atomic"
        f = int(ops["file"][row])
        file = lc.files[f] if 0 <= f < len(lc.files) else None
        nd = int(ops["ndim"][row])
        shape = tuple(int(v) for v in ops["shape"][row][:nd])
        traced.setdefault((file, int(ops["line"][row]), direction, shape), []).append((int(ctx.seq[row]), sid))
    out = {}
    for key, sids in traced.items():
        cands = by_key.get(key, [])
        if not cands:
            continue
        sids = [s for _, s in sorted(sids)]
        if len(cands) == 1:
            out.update({s: cands[0] for s in sids})
        elif len(cands) == len(sids):
            out.update(dict(zip(sids, cands)))
    ctx.__dict__[_MATCHED] = out
    return out


def describe(o: dict) -> str:
    """``cp.async 16 B, blocked sizePerThread=[1, 4] threadsPerWarp=[4, 8] warpsPerCTA=[4, 1] order=[1, 0]``."""
    lay = o.get("layout") or {}
    fields = " ".join(f"{k}={lay[k]}" for k in ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order") if k in lay)
    width = f" {o['vector_bytes']} B" if o.get("vector_bytes") else ""
    return f"{o['instruction']}{width}, {lay.get('kind', 'unknown layout')} {fields}".strip()
