"""Inline SVG for the notebook: the program grid and the tensor heatmaps, readable without JavaScript.

Each picture is bounded whatever the trace's size: a large grid is drawn in blocks of programs, a large
tensor view downsampled to at most ``NOTEBOOK_TENSOR_CELLS`` x ``NOTEBOOK_TENSOR_CELLS`` cells, and the touched cells of a
view are drawn as runs of one path per colour rather than one element per cell. ``<title>`` tooltips carry
the numbers. Where a lane lands in a tensor's view comes from the web app's tensor tables (tensormap.py,
tensorview.py), which map storage offsets back to view indices through the recorded strides.
"""
from __future__ import annotations

import html
import math
from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import KINDS, Access
from .limits import (NOTEBOOK_CELL_TITLES, NOTEBOOK_GRID_CELLS, NOTEBOOK_TENSOR_CELLS, NOTEBOOK_TENSOR_VIEWS,
                     NOTEBOOK_Z)
from .lookup import LaunchIndex
from .report_view import METRICS  # the one table of metric labels, shared with the web view
from .tensormap import cell_sizes, invertible, locate, make_plane, view_index
from .tensorview import elements, plane_cells

GRID_WRAP = 64             # a 1-D grid wider than this is drawn in rows of this many programs

_VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
            "#b5de2b", "#fde725"]
_KIND_COLOR = {1: ("#4c78a8", "read"), 2: ("#f58518", "written"), 3: ("#9d5fc0", "read and written")}


def esc(s) -> str:
    """Every string from a trace goes through here: a trace file may come from someone else."""
    return html.escape(str(s), quote=True)


def fmt(v, name: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, (bool, str)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    v = float(v)
    if "bytes" in name:
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or unit == "GiB":
                return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
            v /= 1024
    if name.endswith(("share", "efficiency", "rate")):
        return f"{100 * v:.1f}%"
    return f"{int(v)}" if v == int(v) and abs(v) < 1e15 else f"{v:.4g}"


def color(t: float) -> str:
    """Viridis at t in [0, 1]."""
    x = min(max(t, 0.0), 1.0) * (len(_VIRIDIS) - 1)
    i = min(int(x), len(_VIRIDIS) - 2)
    a, b = _VIRIDIS[i], _VIRIDIS[i + 1]
    mix = [round(int(a[k:k + 2], 16) + (x - i) * (int(b[k:k + 2], 16) - int(a[k:k + 2], 16))) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def label(name: str) -> tuple:
    return METRICS.get(name, (name, "mean"))


# --------------------------------------------------------------------------------------------------------
# the program grid
# --------------------------------------------------------------------------------------------------------
def _layout(v: np.ndarray, grid: tuple, z: int, wrap: bool) -> np.ndarray:
    """Per-program values of one z slice as a (rows, cols) array, NaN padded."""
    gx, gy, _ = grid
    if wrap:
        out = np.full(-(-gx // GRID_WRAP) * GRID_WRAP, np.nan)
        out[:gx] = v[:gx]
        return out.reshape(-1, GRID_WRAP)
    return v[z * gx * gy:(z + 1) * gx * gy].reshape(gy, gx)


def _blocks(a: np.ndarray, b: int, how: str) -> np.ndarray:
    if b == 1:
        return a
    h, w = a.shape
    pad = np.full((-(-h // b) * b, -(-w // b) * b), np.nan)
    pad[:h, :w] = a
    blk = pad.reshape(pad.shape[0] // b, b, pad.shape[1] // b, b)
    known = np.isfinite(blk).sum(axis=(1, 3))
    total = np.nansum(blk, axis=(1, 3))
    return np.where(known > 0, total / np.maximum(known, 1) if how == "mean" else total, np.nan)


def grid_svg(grid: tuple, metrics: dict, metric: str = "load_bytes", recorded: Optional[np.ndarray] = None,
             max_cells: int = NOTEBOOK_GRID_CELLS) -> str:
    """One rect per program at (x, y), z slices side by side, coloured by ``metric`` with a legend.

    ``metrics`` maps names to arrays over the linear program id (x fastest), NaN where unknown;
    ``recorded`` marks the programs that recorded ops (default: those with a finite ``metric``)."""
    gx, gy, gz = (int(g) for g in grid)
    if metric not in metrics:
        raise TraceUsageError(f"grid metric '{metric}' is unknown; choose one of {sorted(metrics)}")
    title, how = label(metric)
    values = metrics[metric]
    recorded = np.isfinite(values) if recorded is None else recorded
    wrap = gy == 1 and gz == 1 and gx > GRID_WRAP
    rows, cols = (-(-gx // GRID_WRAP), GRID_WRAP) if wrap else (gy, gx)
    nz = min(gz, NOTEBOOK_Z)
    b = max(1, math.isqrt(nz * rows * cols // max_cells))
    while nz * -(-rows // b) * -(-cols // b) > max_cells:
        b += 1
    crows, ccols = -(-rows // b), -(-cols // b)
    s = max(3, min(24, 640 // max(1, nz * ccols), 420 // max(1, crows)))
    gap = 18 if nz > 1 else 0
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
    names = [n for n in METRICS if n in metrics]
    stroke = ' stroke="#fff" stroke-width="0.5"' if s >= 6 else ""
    out, top = [], 14
    for z in range(nz):
        x0 = z * (ccols * s + gap)
        if nz > 1:
            out.append(f'<text x="{x0}" y="10" font-size="10">z = {z}</text>')
        cell_v = _blocks(_layout(values, (gx, gy, gz), z, wrap), b, how)
        for r in range(crows):
            for c in range(ccols):
                v = cell_v[r, c]
                if b == 1:
                    lin = r * GRID_WRAP + c if wrap else z * gx * gy + r * gx + c
                    if wrap and lin >= gx:
                        continue
                    pid = (lin % gx, (lin // gx) % gy, lin // (gx * gy))
                    tip = f"program {pid}" + "".join(
                        f"\n{label(n)[0]}: {fmt(float(metrics[n][lin]), n)}" for n in names
                    ) if recorded[lin] else f"program {pid}: not recorded"
                    attrs = f'class="tt-prog" data-pid="{pid[0]},{pid[1]},{pid[2]}"'
                else:
                    span = (f"programs {r * b * GRID_WRAP + c * b}.., a {b}x{b} block of the wrapped grid" if wrap
                            else f"programs x {c * b}-{min(gx, c * b + b) - 1}, y {r * b}-{min(gy, r * b + b) - 1}, z {z}")
                    tip = f"{span}\n{title} ({how}): {fmt(float(v), metric)}"
                    attrs = 'class="tt-progs"'
                fill = color((v - lo) / (hi - lo) if hi > lo else 0.5) if np.isfinite(v) else "#e6e6e6"
                out.append(f'<rect {attrs} x="{x0 + c * s}" y="{top + r * s}" width="{s}" height="{s}" '
                           f'fill="{fill}"{stroke}><title>{esc(tip)}</title></rect>')
    width = nz * (ccols * s + gap)
    ly = top + crows * s + 14
    legend = [f'<text x="0" y="{ly}" font-size="11">{esc(title)}: {esc(fmt(lo, metric))}</text>']
    for k in range(10):
        legend.append(f'<rect x="{150 + 14 * k}" y="{ly - 10}" width="14" height="12" fill="{color(k / 9)}"/>')
    legend.append(f'<text x="{296}" y="{ly}" font-size="11">{esc(fmt(hi, metric))}</text>'
                  f'<rect x="370" y="{ly - 10}" width="12" height="12" fill="#e6e6e6"/>'
                  f'<text x="386" y="{ly}" font-size="11">not recorded</text>')
    note = [f"1-D grid of {gx} programs drawn in rows of {GRID_WRAP}" if wrap else "x across, y down"]
    if b > 1:
        note.append(f"each cell is a block of {b}x{b} programs ({how} of {title.lower()})")
    if gz > nz:
        note.append(f"showing z slices 0-{nz - 1} of {gz}")
    svg = (f'<svg class="tt-grid" xmlns="http://www.w3.org/2000/svg" width="{max(width, 460)}" '
           f'height="{ly + 6}" font-family="sans-serif">{"".join(out)}{"".join(legend)}</svg>')
    return svg + (f'<div class="tt-note">{esc("; ".join(note))}</div>' if note else "")


# --------------------------------------------------------------------------------------------------------
# tensor view
# --------------------------------------------------------------------------------------------------------
def program_id(program, grid: tuple) -> tuple:
    """``program`` (an int or 1 to 3 coordinates) as an (x, y, z) id inside ``grid``."""
    p = (int(program),) if isinstance(program, (int, np.integer)) else tuple(int(v) for v in program)
    p = p + (0,) * (3 - len(p))
    if len(p) != 3 or not all(0 <= v < g for v, g in zip(p, grid)):
        raise TraceUsageError(f"program {program!r} is not in the grid {tuple(grid)}")
    return p


def tensor_views(ix: LaunchIndex, program, op=None, max_cells: int = NOTEBOOK_TENSOR_CELLS) -> str:
    """A heatmap per tensor that one program touched (``op`` None) or of the one tensor of op ``op`` (an
    Access of that program, or its ``seq``)."""
    lc = ix.launch
    pid = program_id(program, lc.grid)
    rows = ix.program_rows(ix.linear(pid))
    if isinstance(op, Access):
        op = op.seq
    if op is not None:
        if not 0 <= int(op) < len(rows) or not ix.memory[rows[int(op)]]:
            raise TraceUsageError(f"program {pid} has no memory op with seq {op}; its memory ops are "
                                  f"{[int(s) for s in np.nonzero(ix.memory[rows])[0]]}")
        rows = rows[int(op):int(op) + 1]
    rows = rows[ix.memory[rows] & (lc.ops["tensor"][rows] >= 0)]
    if not len(rows):
        return f'<div class="tt-note">program {pid} recorded no memory ops</div>'
    tensors = list(dict.fromkeys(int(t) for t in lc.ops["tensor"][rows]))
    what = ""
    if op is not None:
        what = f", op {int(op)} ({KINDS[int(lc.ops['kind'][rows[0]])]} at line {int(lc.ops['line'][rows[0]])})"
    parts = [f"<h4>{esc(lc.kernel_name)}: program {pid}{what}</h4>"]
    for t in tensors[:NOTEBOOK_TENSOR_VIEWS]:
        parts.append(_tensor_svg(ix, rows[lc.ops["tensor"][rows] == t], t, max_cells))
    if len(tensors) > NOTEBOOK_TENSOR_VIEWS:
        parts.append(f'<div class="tt-note">{len(tensors) - NOTEBOOK_TENSOR_VIEWS} more tensors not drawn</div>')
    return "".join(parts)


def _plane_for(ix: LaunchIndex, rows: np.ndarray, t: int, table, max_cells: int):
    info = ix.launch.tensors[t]
    wrap = None
    if len(info.shape) == 1:     # wrap at the op's block size when that gives one row per block
        block = int(ix.launch.ops["lane_count"][rows].max())
        if int(ix.launch.ops["ndim"][rows[0]]) == 1 and 8 <= block <= 1024 and info.shape[0] // block <= max_cells:
            wrap = block
    index = None
    if len(info.shape) > 2 and len(table.offsets) and invertible(info):
        index = view_index(info, table.offsets[:1])[0][0].tolist()   # the slice of the first touched element
    return make_plane(info, index=index, wrap=wrap, max_cells=max_cells * max_cells)


def _tensor_svg(ix: LaunchIndex, rows: np.ndarray, t: int, max_cells: int) -> str:
    info = ix.launch.tensors[t]
    table = elements(ix, rows, t)
    plane = _plane_for(ix, rows, t, table, max_cells)
    pos, entry, placed, *_ = locate(info, plane, table.offsets)
    cl = plane_cells(plane, table, pos, entry)
    R, C = plane.cell_rows, plane.cell_cols
    px = py = max(2, min(16, 640 // max(C, 1), 420 // max(R, 1)))
    values = cl.get("value")
    finite = [v for v in values or [] if isinstance(v, (int, float))]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    groups: dict = {}
    for k, cell in enumerate(cl["cell"]):
        v = values[k] if values else None
        if isinstance(v, (int, float)):
            key = (color((v - lo) / (hi - lo) if hi > lo else 0.5), 1.0)
        else:
            share = cl["fill"][k] if "fill" in cl else 1.0     # of the cell's elements touched
            key = (_KIND_COLOR[cl["kinds"][k] or 1][0], (0.4, 0.6, 0.8, 1.0)[min(3, int(share * 4 - 1e-9))])
        groups.setdefault(key, []).append(k)
    body = [_runs(cell_sizes(plane, np.arange(R * C)) > 0, R, C, "#ececec", 1.0, "untouched")]
    if len(cl["cell"]) <= NOTEBOOK_CELL_TITLES:
        for (fill, alpha), ks in groups.items():
            for k in ks:
                r, c = divmod(cl["cell"][k], C)
                body.append(f'<rect x="{c}" y="{r}" width="1" height="1" fill="{fill}" fill-opacity="{alpha}">'
                            f"<title>{esc(_cell_title(plane, info.name, cl, k, r, c))}</title></rect>")
    else:
        for (fill, alpha), ks in groups.items():
            mask = np.zeros(R * C, dtype=bool)
            mask[np.asarray(cl["cell"])[ks]] = True
            body.append(_runs(mask, R, C, fill, alpha, f"{len(ks)} cells"))
    svg = (f'<svg class="tt-tensor" xmlns="http://www.w3.org/2000/svg" width="{C * px}" height="{R * py}" '
           f'shape-rendering="crispEdges"><g transform="scale({px} {py})">{"".join(body)}</g></svg>')
    return f"<div><b>{esc(info.name)}</b> {_tensor_caption(info, plane, table, cl, placed, lo, hi)}</div>{svg}"


def _runs(mask: np.ndarray, R: int, C: int, fill: str, alpha: float, title: str) -> str:
    """Cells of ``mask`` as one path of horizontal runs (a few bytes per run, not one element per cell)."""
    m = np.pad(mask.reshape(R, C).astype(np.int8), ((0, 0), (1, 1)))
    d = np.diff(m, axis=1)
    starts, ends = np.nonzero(d == 1), np.nonzero(d == -1)
    path = "".join(f"M{c} {r}h{e - c}v1h{c - e}z" for r, c, e in zip(starts[0], starts[1], ends[1]))
    if not path:
        return ""
    return f'<path d="{path}" fill="{fill}" fill-opacity="{alpha}"><title>{esc(title)}</title></path>'


def _cell_title(plane, name: str, cl: dict, k: int, r: int, c: int) -> str:
    kind = _KIND_COLOR[cl["kinds"][k] or 1][1]
    if plane.fr == 1 and plane.fc == 1:
        if plane.wrap:
            idx = (r * plane.wrap + c,)
        elif plane.col_dim is None:
            idx = ()
        else:
            idx = list(plane.index)
            if plane.row_dim is not None:
                idx[plane.row_dim] = r
            idx[plane.col_dim] = c
        v = (cl.get("value") or [None] * (k + 1))[k]
        return f"{name}[{', '.join(str(i) for i in idx)}]: {kind}" + ("" if v is None else f", value {v}")
    share = cl["fill"][k] if "fill" in cl else 1.0
    return (f"{name} rows {r * plane.fr}-{(r + 1) * plane.fr - 1}, cols {c * plane.fc}-{(c + 1) * plane.fc - 1}: "
            f"{kind}, {100 * share:.0f}% of the cell's elements")


def _tensor_caption(info, plane, table, cl, placed, lo, hi) -> str:
    bits = [f"{info.dtype} shape {tuple(info.shape)} strides {tuple(info.strides)}",
            f"{len(table.offsets)} element(s) touched"]
    if plane.wrap:
        bits.append(f"drawn in rows of {plane.wrap}")
    if plane.fr > 1 or plane.fc > 1:
        bits.append(f"each cell {plane.fr}x{plane.fc} elements")
    if cl.get("value") and hi >= lo and any(v is not None for v in cl["value"]):
        bits.append(f"coloured by value from {lo:.4g} (dark) to {hi:.4g} (yellow)")
    else:
        bits.append("blue read, orange written, purple both")
    other = int((~placed).sum())
    if other:
        bits.append(f"{other} touched element(s) lie outside this slice of the view")
    if table.oob_lanes:
        bits.append(f"{table.oob_lanes} active lane(s) fall outside the tensor's storage (out of bounds), "
                    f"e.g. offsets {list(table.oob_examples)}")
    return f'<span class="tt-note">{esc("; ".join(bits))}</span>'
