"""Which loaded elements fed one element of a tensor: the recorder's dataflow facts (record/memory/dataflow.py,
``Launch.meta["dataflow"]``) narrowed to the element's lane.

The writes that decide the element's final value are its last plain store and every atomic after it (all of
its atomics when no store wrote it): a split-K sum is fed by every program that added to it. For each, the
facts of its source line name the load lines it depends on, which of their executions in the writing program
(counted before the write) and the lane map: for each dim of the loaded block, the dim of the written block
whose index it shares, or every index. So C[i, j] of a matmul reads back as row i of each A tile and column j
of each B tile, over the loop's trips; a lane map the recorder could not follow is every lane of the tile,
and says so ("how": "untraced").
"""
from __future__ import annotations

import numpy as np

from ..errors import TraceUsageError
from ..model import KINDS, WRITE_KINDS
from ..model.layout import invertible, view_index
from ..model.touches import element_offset
from .contract import FeedsPayload
from .lookup import TraceIndex
from .payload import ApiError, clip

MAX_WRITES = 16           # writes of the element whose feeds are listed (a split-K sum: its first ones)
MAX_INDICES = 4096        # fed elements listed per feed (they are outlined on the tensor view)
MAX_RUNS = 16             # runs of indices listed per dim
_KIND = {k: i for i, k in enumerate(KINDS)}


def final_writes(touches: list) -> list:
    """The writes that decide an element's final value: the last store and the atomics after it."""
    writes = [x for x in touches if x.kind in WRITE_KINDS]
    stores = [k for k, x in enumerate(writes) if x.kind == "store"]
    return writes[stores[-1]:] if stores else writes


def feeds_payload(ti: TraceIndex, i: int, t: int, index: tuple) -> FeedsPayload:
    lc = ti.trace.launches[i]
    try:
        touched = lc.touches(t, index)
        offset = element_offset(lc.tensors[t], index)
    except TraceUsageError as e:
        raise ApiError(str(e)) from None
    facts = (lc.meta or {}).get("dataflow")
    writes = final_writes(touched)
    shown = writes[:MAX_WRITES]
    out = []
    for k, w in enumerate(shown):
        for feed in _feeds_of(ti, i, w, facts or ()):
            out.append({"write": k, **feed})
    return {"tensor": t, "name": clip(lc.tensors[t].name), "index": list(index), "offset": offset,
            "recorded": facts is not None,
            "writes": [{"program": list(w.program), "seq": w.seq, "kind": w.kind, "line": w.line,
                        "tensor": clip(w.tensor), "lane": list(w.lane)} for w in shown],
            "writes_total": len(writes), "feeds": out}


def _feeds_of(ti: TraceIndex, i: int, w, facts) -> list:
    """One entry per (load line, role, how) the write's facts name: its executions and fed elements."""
    lc, ix = ti.trace.launches[i], ti.launch(i)
    names = [x.name for x in lc.tensors]
    groups: dict = {}
    for f in facts:
        if (f.get("file"), f.get("line"), f.get("op"), f.get("tensor")) != (w.file, w.line, w.kind, w.tensor):
            continue
        if "programs" in f and list(w.program) not in f["programs"]:
            continue
        t = names.index(f["load_tensor"]) if f.get("load_tensor") in names else -1
        key = (f.get("load_file"), int(f.get("load_line") or 0), f.get("load_op"), t, f.get("role"), f.get("how"))
        rows = _executions(ix, lc, w, key, f)
        g = groups.setdefault(key, {"rows": set(), "of": 0, "maps": [], "offsets": []})
        g["of"] = max(g["of"], rows[1])
        g["maps"].append(list(f.get("dims") or ()))
        for r in rows[0]:
            g["rows"].add(int(r))
            g["offsets"].append(_fed_offsets(lc, int(r), f.get("dims") or (), w.lane))
    out = []
    for (lfile, line, op, t, role, how), g in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][3], str(kv[0][4]))):
        offs = np.unique(np.concatenate(g["offsets"])) if g["offsets"] else np.zeros(0, np.int64)
        entry = {"tensor": t if t >= 0 else None, "name": clip(names[t]) if t >= 0 else None, "file": clip(lfile),
                 "line": line, "op": op, "role": role, "how": how, "trips": len(g["rows"]), "of": g["of"],
                 "maps": [m for k, m in enumerate(g["maps"]) if m not in g["maps"][:k]], "elements": int(len(offs))}
        entry.update(_placed(lc.tensors[t] if t >= 0 else None, offs))
        out.append(entry)
    return out


def _executions(ix, lc, w, key, f) -> tuple:
    """(the load rows the fact picks in the writing program, how many of that line ran before the write)."""
    lfile, line, op, t = key[:4]
    files = list(lc.files)
    fid = files.index(lfile) if lfile in files else -1
    gx, gy, _ = ix.grid
    lin = w.program[0] + gx * (w.program[1] + gy * w.program[2])
    rows = ix.order[ix.bounds[lin]:ix.bounds[lin + 1]]
    o = lc.ops
    pick = ((o["kind"][rows] == _KIND.get(op, -1)) & (o["line"][rows] == line) & (o["file"][rows] == fid)
            & (o["tensor"][rows] == t) & (o["seq"][rows] < w.seq))
    before = rows[pick]                     # in seq order (the index sorts a program's rows by seq)
    n = len(before)
    first, last, step = int(f.get("first", 0)), int(f.get("last", -1)), max(1, int(f.get("step", 1)))
    first = first if first >= 0 else n + first
    last = n + last
    if n == 0 or first < 0 or last < first:
        return before[:0], n
    return before[first:min(last, n - 1) + 1:step], n


def _fed_offsets(lc, r: int, dims, lane) -> np.ndarray:
    """The active lanes' offsets of load row ``r`` that the written lane ``lane`` reads through ``dims``."""
    acc = lc.access(r)
    if acc.offsets is None:
        return np.zeros(0, np.int64)
    shape = acc.offsets.shape
    sel = [slice(None)] * len(shape)
    if len(dims) == len(shape):
        for d, k in enumerate(dims):
            if 0 <= k < len(lane) and 0 <= lane[k] < shape[d]:
                sel[d] = slice(lane[k], lane[k] + 1)
    picked = tuple(sel)
    return acc.offsets[picked][acc.mask[picked]].astype(np.int64)


def _placed(info, offs: np.ndarray) -> dict:
    """The fed elements as view indices (the first MAX_INDICES), and per dim the runs of indices they span;
    ``box``: they are every combination of those (a row, a column, a tile)."""
    empty = {"indices": [], "truncated": False, "outside": int(len(offs)), "ranges": [], "box": False}
    if info is None or not len(offs) or not invertible(info):
        return empty            # (an overlapping or broadcast view: its elements have no one index)
    idx, ok = view_index(info, offs)
    idx = idx[ok]
    if not len(idx):            # every fed offset is outside the view (a load past the tensor's end)
        return empty
    ranges, box = [], True
    size = 1
    for d in range(idx.shape[1]):
        vals = np.unique(idx[:, d])
        size *= len(vals)
        cut = np.flatnonzero(np.diff(vals) != 1)
        lo, hi = vals[np.r_[0, cut + 1]], vals[np.r_[cut, len(vals) - 1]]
        ranges.append({"runs": [[int(a), int(b)] for a, b in zip(lo[:MAX_RUNS], hi[:MAX_RUNS])], "count": int(len(lo))})
    box = box and size == len(idx)
    return {"indices": idx[:MAX_INDICES].tolist(), "truncated": len(idx) > MAX_INDICES,
            "outside": int((~ok).sum()), "ranges": ranges, "box": bool(box)}

