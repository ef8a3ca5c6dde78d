"""What-if advice: the trace knows every address each program touches, so the cache model can replay the
same accesses in another order or on another GPU without running the kernel again.

- ``program_order``: a kernel that swizzles its program ids into tiles with a group size (the grouped
  ordering of Triton's matmul tutorial, a ``GROUP_M`` / ``GROUP_SIZE_M`` constexpr) is replayed with other
  group sizes. Each program's tile is read from where it stores its 2-D output block; the replay only runs
  when the traced programs follow the tutorial's mapping exactly for the traced group size, so the other
  sizes are that same mapping, not a guess. The programs are dispatched in the new order (the same accesses,
  other programs resident together) and the L2 model gives the DRAM reads.
- ``other_gpu`` (``what_if=True`` only: one cache simulation per GPU): the same stream through another
  GPU's L2 (size and programs resident at once).
- ``num_warps`` (``what_if=True`` only: each costs a compile): the kernel compiled with other warp counts,
  and the registers, shared memory and occupancy each would have.

Each hint is tied to a source line (the group size's use, or the kernel's first load) and gives the
predicted DRAM reads both ways. Replays are skipped past ``MAX_STREAM`` cache-stream entries (each costs
as much as the launch's own cache simulation); the report's note says so.
"""
from __future__ import annotations

import copy
import re
from dataclasses import replace

import numpy as np

from ...model.layout import invertible, view_index
from ..memory.cache import issue_order, simulate
from ..context import STORE, LaunchContext
from ..gpus import GPUS
from ..units import change, nbytes, percent

GROUP_NAMES = re.compile(r"^GROUP(_SIZE)?_?M$|^GROUP$", re.IGNORECASE)
GROUP_SIZES = (1, 4, 8, 16)
DEFAULT_GROUP_SIZES = (1, 8)   # analyze(what_if=None): none and the tutorial's 8 (each is a cache simulation)
AUTO_STREAM = 2_000_000      # analyze(what_if=None) replays launches up to this many stream entries
MAX_STREAM = 20_000_000      # analyze(what_if=True) up to this many
MIN_CHANGE = 0.05            # a replay that moves DRAM reads by less than this is not worth a hint


def grouped_tiles(n_m: int, n_n: int, group: int) -> np.ndarray:
    """(pid_m, pid_n) of every program id under the tutorial's grouped ordering."""
    pid = np.arange(n_m * n_n, dtype=np.int64)
    in_group = group * n_n
    first_m = pid // in_group * group
    size_m = np.minimum(n_m - first_m, group)
    return np.stack([first_m + (pid % in_group) % size_m, (pid % in_group) // size_m], axis=1)


def _tiles(ctx: LaunchContext):
    """Per program (ctx.programs order): the (row, col) tile of its first 2-D store, or None."""
    lc = ctx.launch
    ops = lc.ops
    rows = np.flatnonzero((ctx.kind == STORE) & (ops["ndim"] == 2))
    if not len(rows):
        return None
    first = np.full(ctx.n_programs, -1, dtype=np.int64)
    order = np.lexsort((ctx.seq[rows], ctx.row_prog[rows]))
    progs = ctx.row_prog[rows[order]]
    keep = np.r_[True, progs[1:] != progs[:-1]]
    first[progs[keep]] = rows[order][keep]
    if (first < 0).any() or len(set(ctx.tensor[first].tolist())) != 1:
        return None
    info = lc.tensors[int(ctx.tensor[first[0]])]
    if len(info.shape) != 2 or not invertible(info):
        return None
    bm, bn = (int(v) for v in ops["shape"][first[0]][:2])
    if (ops["shape"][first][:, :2] != [bm, bn]).any():
        return None
    o, _ = ctx.block(first, bm * bn)
    idx, ok = view_index(info, o[:, 0])
    if not ok.all() or (idx[:, 0] % bm).any() or (idx[:, 1] % bn).any():
        return None
    return np.stack([idx[:, 0] // bm, idx[:, 1] // bn], axis=1)


def _line_of(ctx: LaunchContext, name: str) -> int:
    lc = ctx.launch
    for k, text in enumerate(lc.source.splitlines()):
        if re.search(rf"\b{re.escape(name)}\b", text) and "def " not in text:
            return lc.source_line + k - _def_offset(lc.source)
    return lc.source_line


def _def_offset(source: str) -> int:
    for k, text in enumerate(source.splitlines()):
        if text.lstrip().startswith("def "):
            return k
    return 0


def _replay(ctx: LaunchContext, co, gpu_rank=None, params=None) -> int:
    """DRAM read bytes of the launch's stream dispatched in ``gpu_rank`` order and/or with ``params``."""
    alt = copy.copy(ctx)
    if gpu_rank is not None:
        alt.gpu_rank = gpu_rank
    if params is not None:
        alt.params = params
    return int(np.sum(simulate(alt, co, issue_order(alt)).read_sectors)) * 32


def _change(new: int, base: int) -> str:
    share = (new - base) / base
    return f"{'cut' if share < 0 else 'raise'} predicted DRAM reads by {percent(abs(share))} ({change(base, new)})"


def what_if(ctx: LaunchContext, co, dram_read: int, enabled=None) -> tuple:
    """(hints, note): the replays above for one launch, and why any were skipped. ``enabled``: None replays
    the group sizes DEFAULT_GROUP_SIZES for launches of at most AUTO_STREAM stream entries; True every size
    of GROUP_SIZES, other GPUs, up to MAX_STREAM; False none."""
    if not dram_read:
        return [], None
    replayed, note = replays(ctx, co, enabled)
    return hints_from(replayed, dram_read), note


def replays(ctx: LaunchContext, co, enabled=None) -> tuple:
    """(replayed, note): every replay's DRAM read bytes, each with the hint it makes (``hints_from``), and why
    any were skipped. Needs no result of the launch's own cache simulation, so it can run beside it."""
    if enabled is False or not len(co.stream_row):
        return [], None
    limit = MAX_STREAM if enabled else AUTO_STREAM
    if len(co.stream_row) > limit:
        more = "" if enabled else "; analyze(what_if=True) replays up to " + f"{MAX_STREAM:,}"
        return [], (f"what-if replays: skipped, {len(co.stream_row):,} cache-stream entries (each replay costs "
                    f"a cache simulation; limit {limit:,}{more})")
    out = _group_replays(ctx, co, GROUP_SIZES if enabled else DEFAULT_GROUP_SIZES)
    if enabled:                 # a replay per other GPU: only when asked (each costs a cache simulation)
        out += _gpu_replays(ctx, co)
    return out, None


def hints_from(replayed: list, dram_read: int) -> list:
    """The hints of the replays that move the launch's DRAM reads (``dram_read`` bytes) by MIN_CHANGE or more."""
    if not dram_read:
        return []
    return [hint(new, dram_read) for new, hint in replayed if abs(new - dram_read) >= MIN_CHANGE * dram_read]


def _group_replays(ctx: LaunchContext, co, sizes: tuple = GROUP_SIZES) -> list:
    lc = ctx.launch
    names = [k for k, v in lc.args.items() if GROUP_NAMES.match(k) and isinstance(v, int) and v >= 1]
    if len(names) != 1 or lc.grid[1] != 1 or lc.grid[2] != 1 or ctx.n_programs != lc.num_programs:
        return []
    name, traced = names[0], int(lc.args[names[0]])
    tiles = _tiles(ctx)
    if tiles is None:
        return []
    n_m, n_n = int(tiles[:, 0].max()) + 1, int(tiles[:, 1].max()) + 1
    if n_m * n_n != ctx.n_programs or not np.array_equal(grouped_tiles(n_m, n_n, traced), tiles[np.argsort(ctx.pids[:, 0])]):
        return []      # not the tutorial's mapping: a replay would be a guess
    program_of = np.empty(n_m * n_n, dtype=np.int64)
    program_of[tiles[:, 0] * n_n + tiles[:, 1]] = np.arange(ctx.n_programs)
    line = _line_of(ctx, name)

    def hint(g):
        return lambda new, dram_read: {
            "kind": "program_order", "file": lc.source_file, "line": line, "op": None, "tensor": None,
            "saving": (dram_read - new) / dram_read,
            "message": f"line {line}: {name}={g} instead of {traced} would {_change(new, dram_read)}",
            "effect": f"the same tiles, dispatched {g} tile rows at a time ({n_m} x {n_n} tiles)"}
    out = []
    for g in sizes:
        if g == traced or g > n_m:
            continue
        t = grouped_tiles(n_m, n_n, g)
        rank = np.empty(ctx.n_programs, dtype=np.int64)
        rank[program_of[t[:, 0] * n_n + t[:, 1]]] = np.arange(ctx.n_programs)
        out.append((_replay(ctx, co, gpu_rank=rank), hint(g)))
    return out


def _gpu_replays(ctx: LaunchContext, co) -> list:
    p = ctx.params
    first = ctx.mem_rows[0] if len(ctx.mem_rows) else None
    line = int(ctx.line[first]) if first is not None else ctx.launch.source_line

    def hint(name, gpu):
        return lambda new, dram_read: {
            "kind": "other_gpu", "file": ctx.launch.source_file, "line": line, "op": None, "tensor": None,
            "saving": 0.0,
            "message": f"on an {name} ({nbytes(gpu.l2_bytes)} L2, {gpu.default_programs_in_flight} "
                       f"programs resident) this launch would {_change(new, dram_read)}",
            "effect": "the same accesses through that GPU's L2 model"}
    out = []
    seen = {p.l2_bytes}
    for name, gpu in GPUS.items():
        if name == p.gpu or gpu.l2_bytes in seen:
            continue
        seen.add(gpu.l2_bytes)
        alt = replace(p, gpu=name, l2_bytes=gpu.l2_bytes, programs_in_flight=gpu.default_programs_in_flight)
        out.append((_replay(ctx, co, params=alt), hint(name, gpu)))
    return out


def warps_hints(ctx: LaunchContext, compiled: dict, compile_with) -> list:
    """The occupancy other num_warps would give (``compile_with(num_warps)`` -> Compiled), when it differs."""
    if compiled.get("layouts") != "compiler" or not compiled.get("occupancy"):
        return []
    now = compiled["occupancy"]
    out = []
    for w in (2, 4, 8):
        if w == compiled["num_warps"]:
            continue
        try:
            other = compile_with(w)
        except Exception as e:   # noqa: the compiler's errors have no common class; the hint is skipped
            out.append({"kind": "num_warps", "file": ctx.launch.source_file, "line": ctx.launch.source_line,
                        "op": None, "tensor": None, "saving": 0.0,
                        "message": f"num_warps={w} did not compile: {type(e).__name__}", "effect": ""})
            continue
        occ = other.occupancy or {}
        spills_change = bool(other.spill_bytes) != bool(compiled.get("spill_bytes"))
        if not occ or (abs(occ["occupancy"] - now["occupancy"]) < 0.1 and not spills_change):
            continue
        out.append({"kind": "num_warps", "file": ctx.launch.source_file, "line": ctx.launch.source_line, "op": None,
                    "tensor": None, "saving": max(0.0, occ["occupancy"] - now["occupancy"]),
                    "message": f"num_warps={w} instead of {compiled['num_warps']}: {other.registers} registers per "
                               f"thread ({compiled['registers']} now), {nbytes(other.shared_bytes)} shared, occupancy "
                               f"{change(now['occupancy'], occ['occupancy'], percent)} "
                               f"({occ['programs_per_sm']} programs per SM, limited by {occ['limited_by']})",
                    "effect": (f"{nbytes(other.spill_bytes)} per thread of spills" if other.spill_bytes else "no spills")
                              + (f" ({nbytes(compiled['spill_bytes'])} now)" if compiled.get("spill_bytes") else "")})
    return out
