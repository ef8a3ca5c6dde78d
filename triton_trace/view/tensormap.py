"""Where recorded lanes land in a tensor view, drawn as a bounded 2-D grid of cells.

Lane offsets are element offsets into a tensor's *storage*. What a user reads is the *view*: its shape,
strides and storage offset, which may be a transpose, a strided slice or a broadcast. A storage offset is
mapped back to a view index by inverting the strides when the layout is non-overlapping (every view
element has its own storage element: contiguous tensors, transposes, slices with steps), which costs one
pass over the touched elements. Any other layout (broadcast zero strides, overlapping ``as_strided``
views, hand-made trace files) is mapped the other way round: every element of the displayed plane is
turned into its storage offset and looked up among the touched ones. Contiguity is never assumed.

A plane is a 2-D slice: two view dimensions are drawn as rows and columns and every other dimension is
fixed at an index. A 1-D view is wrapped into rows. A plane with more than ``MAX_CELLS`` elements is
drawn downsampled: each cell covers ``fr`` x ``fc`` elements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..model import TensorInfo

MAX_CELLS = 1 << 15        # cells of one drawn plane; bounds the tensor payload (see payload.py)
FORWARD_LIMIT = 1 << 24    # plane elements enumerated for a non-invertible layout before sampling


class PlaneError(ValueError):
    """A plane request that does not fit the tensor (bad dimension or index); answered with a 400."""


@dataclass(frozen=True)
class Plane:
    """One drawable 2-D slice of a tensor view."""
    shape: tuple            # the view's shape
    row_dim: Optional[int]  # view dimension drawn as rows (None: a single row, or a wrapped 1-D view)
    col_dim: Optional[int]  # view dimension drawn as columns (None: a scalar)
    index: tuple            # the fixed index of every view dimension; row/col entries are ignored
    wrap: int               # > 0: a 1-D view wrapped into rows of this many elements
    rows: int               # plane size in elements
    cols: int
    fr: int                 # elements per cell, along rows and columns
    fc: int

    @property
    def cell_rows(self) -> int:
        return -(-self.rows // self.fr)

    @property
    def cell_cols(self) -> int:
        return -(-self.cols // self.fc)

    def to_dict(self) -> dict:
        return {"row_dim": self.row_dim, "col_dim": self.col_dim, "index": list(self.index), "wrap": self.wrap,
                "rows": self.rows, "cols": self.cols, "cell": [self.fr, self.fc],
                "cell_rows": self.cell_rows, "cell_cols": self.cell_cols}


def _factors(rows: int, cols: int, max_cells: int) -> tuple:
    """The smallest square-ish downsampling that brings rows x cols within max_cells."""
    if rows * cols <= max_cells:
        return 1, 1
    f = max(1, math.isqrt(rows * cols // max_cells))
    while True:
        fr, fc = min(f, rows), min(f, cols)
        # a very thin plane downsamples along its long side only
        if rows <= f:
            fc = -(-rows * cols // max_cells)
        elif cols <= f:
            fr = -(-rows * cols // max_cells)
        if -(-rows // fr) * -(-cols // fc) <= max_cells:
            return fr, fc
        f += 1


def make_plane(info: TensorInfo, row_dim: Optional[int] = None, col_dim: Optional[int] = None,
               index: Optional[Sequence[int]] = None, wrap: Optional[int] = None,
               max_cells: int = MAX_CELLS) -> Plane:
    shape = tuple(int(s) for s in info.shape)
    rank = len(shape)
    idx = tuple(int(i) for i in index) if index is not None else (0,) * rank
    if len(idx) != rank:
        raise PlaneError(f"index has {len(idx)} entries; tensor '{info.name}' has rank {rank}")
    if rank == 0:
        return Plane(shape, None, None, (), 0, 1, 1, 1, 1)
    if rank == 1:
        n = shape[0]
        if wrap is None or wrap <= 0:     # default: the power of two nearest a square
            wrap = 1 << max(0, math.ceil(math.log2(math.sqrt(n)))) if n > 1 else 1
        wrap = max(1, min(int(wrap), max(n, 1)))
        rows, cols = -(-n // wrap) if n else 0, wrap if n else 0
        fr, fc = _factors(max(rows, 1), max(cols, 1), max_cells)
        return Plane(shape, None, 0, idx, wrap, rows, cols, fr, fc)
    row_dim = rank - 2 if row_dim is None else int(row_dim)
    col_dim = rank - 1 if col_dim is None else int(col_dim)
    if not (0 <= row_dim < rank and 0 <= col_dim < rank) or row_dim == col_dim:
        raise PlaneError(f"rows and cols must be two different dimensions of a rank-{rank} tensor; "
                         f"got rows={row_dim}, cols={col_dim}")
    for d, (i, s) in enumerate(zip(idx, shape)):
        if d not in (row_dim, col_dim) and not 0 <= i < s:
            raise PlaneError(f"index {i} is out of range for dimension {d} of size {s}")
    rows, cols = shape[row_dim], shape[col_dim]
    fr, fc = _factors(max(rows, 1), max(cols, 1), max_cells)
    return Plane(shape, row_dim, col_dim, idx, 0, rows, cols, fr, fc)


def invertible(info: TensorInfo) -> bool:
    """True when no two view elements share a storage element and every stride is positive."""
    dims = sorted((abs(int(st)), int(sz), int(st)) for sz, st in zip(info.shape, info.strides) if sz > 1)
    span = 0
    for a, size, stride in dims:
        if stride <= 0 or a <= span:
            return False
        span += (size - 1) * a
    return True


def view_index(info: TensorInfo, offsets: np.ndarray) -> tuple:
    """Invert an invertible layout: (index array of shape (n, rank), ok mask). ``ok`` is False for
    offsets that are not an element of the view (out of bounds, or padding between strided rows)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    rank = len(info.shape)
    idx = np.zeros((len(offsets), rank), dtype=np.int64)
    rem = offsets - int(info.storage_offset)
    ok = rem >= 0
    order = sorted((d for d in range(rank) if info.shape[d] > 1), key=lambda d: -int(info.strides[d]))
    for d in order:
        st = int(info.strides[d])
        q = np.floor_divide(rem, st)
        idx[:, d] = q
        rem = rem - q * st
        ok &= (q >= 0) & (q < info.shape[d])
    ok &= rem == 0
    return idx, ok


def _plane_offsets(info: TensorInfo, plane: Plane, r0: int, r1: int) -> np.ndarray:
    """Storage offsets of plane rows r0..r1 (all columns), as an (r1 - r0, cols) array."""
    rows = np.arange(r0, r1, dtype=np.int64)[:, None]
    cols = np.arange(plane.cols, dtype=np.int64)[None, :]
    if plane.wrap:
        i = rows * plane.wrap + cols
        off = int(info.storage_offset) + np.minimum(i, max(plane.shape[0] - 1, 0)) * int(info.strides[0])
        return np.where(i < plane.shape[0], off, -1)
    base = int(info.storage_offset) + sum(int(i) * int(s) for d, (i, s) in enumerate(zip(plane.index, info.strides))
                                          if d not in (plane.row_dim, plane.col_dim))
    rs = int(info.strides[plane.row_dim]) if plane.row_dim is not None else 0
    cs = int(info.strides[plane.col_dim]) if plane.col_dim is not None else 0
    return base + rows * rs + cols * cs


def locate(info: TensorInfo, plane: Plane, elements: np.ndarray) -> tuple:
    """Place distinct touched storage offsets on the plane.

    ``elements`` is sorted and unique. Returns (pos, entry, placed): flat plane positions
    ``row * plane.cols + col`` with the index into ``elements`` drawn there, and a bool per element that
    says whether it was drawn (False: in another slice, or not an element of the view at all).
    """
    elements = np.asarray(elements, dtype=np.int64)
    placed = np.zeros(len(elements), dtype=bool)
    if len(elements) == 0 or plane.rows == 0 or plane.cols == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), placed
    if not plane.shape:        # a scalar: one element at storage_offset
        hit = np.nonzero(elements == int(info.storage_offset))[0]
        placed[hit] = True
        return np.zeros(len(hit), np.int64), hit.astype(np.int64), placed
    if invertible(info):
        idx, ok = view_index(info, elements)
        if plane.wrap:
            r, c = np.divmod(idx[:, 0], plane.wrap)
        else:
            for d, i in enumerate(plane.index):
                if d not in (plane.row_dim, plane.col_dim) and info.shape[d] > 1:
                    ok &= idx[:, d] == i
            r = idx[:, plane.row_dim] if plane.row_dim is not None else np.zeros(len(elements), np.int64)
            c = idx[:, plane.col_dim]
        entry = np.nonzero(ok)[0]
        placed[entry] = True
        return r[entry] * plane.cols + c[entry], entry, placed
    return _locate_forward(info, plane, elements, placed)


def _locate_forward(info, plane, elements, placed):
    step_r = 1
    if plane.rows * plane.cols > FORWARD_LIMIT:    # too big to enumerate: sample one row per cell row
        step_r = plane.fr
    chunk = max(1, (1 << 20) // max(plane.cols, 1))
    pos_parts, entry_parts = [], []
    for r0 in range(0, plane.rows, chunk * step_r):
        r1 = min(plane.rows, r0 + chunk * step_r)
        rows = np.arange(r0, r1, step_r)
        off = np.concatenate([_plane_offsets(info, plane, r, r + 1) for r in rows]) if step_r > 1 else \
            _plane_offsets(info, plane, r0, r1).reshape(-1)
        flat = off.reshape(-1)
        k = np.clip(np.searchsorted(elements, flat), 0, len(elements) - 1)
        hit = (elements[k] == flat) & (flat >= 0)
        where = np.nonzero(hit)[0]
        rr = rows[where // plane.cols] if step_r > 1 else r0 + where // plane.cols
        pos_parts.append(rr * plane.cols + where % plane.cols)
        entry_parts.append(k[where])
    pos = np.concatenate(pos_parts) if pos_parts else np.zeros(0, np.int64)
    entry = np.concatenate(entry_parts) if entry_parts else np.zeros(0, np.int64)
    placed[entry] = True
    return pos.astype(np.int64), entry.astype(np.int64), placed


def cells(plane: Plane, pos: np.ndarray) -> np.ndarray:
    """Flat cell index (row-major over cell_rows x cell_cols) of flat plane positions."""
    r, c = np.divmod(np.asarray(pos, dtype=np.int64), max(plane.cols, 1))
    return (r // plane.fr) * plane.cell_cols + c // plane.fc


def cell_sizes(plane: Plane, cell: np.ndarray) -> np.ndarray:
    """Number of view elements each cell covers (edge cells are smaller; a wrapped tail row is short)."""
    cr, cc = np.divmod(np.asarray(cell, dtype=np.int64), max(plane.cell_cols, 1))
    h = np.minimum(plane.fr, plane.rows - cr * plane.fr)
    w = np.minimum(plane.fc, plane.cols - cc * plane.fc)
    size = h * w
    if plane.wrap:
        n = plane.shape[0]
        last_row, tail = divmod(n, plane.wrap)
        if tail:   # the wrapped view's last row is only ``tail`` long
            in_last = (cr * plane.fr <= last_row) & (last_row < cr * plane.fr + h)
            c0 = cc * plane.fc
            missing = np.clip(c0 + w - np.maximum(c0, tail), 0, None)
            size = size - np.where(in_last, missing, 0)
    return size
