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

from ..model.layout import invertible, view_index  # noqa: F401  (re-exported: the views' layout helpers)
from ..model import TensorInfo
from .limits import MAX_PLANE_CELLS as MAX_CELLS

FORWARD_LIMIT = 1 << 24    # plane elements enumerated for a non-invertible layout before sampling


class PlaneError(ValueError):
    """A plane request that does not fit the tensor (bad dimension or index); answered with a 400."""


@dataclass(frozen=True)
class Plane:
    """One drawable 2-D slice of a tensor view, or a rectangular window of it."""
    shape: tuple            # the view's shape
    row_dim: Optional[int]  # view dimension drawn as rows (None: a single row, or a wrapped 1-D view)
    col_dim: Optional[int]  # view dimension drawn as columns (None: a scalar)
    index: tuple            # the fixed index of every view dimension; row/col entries are ignored
    wrap: int               # > 0: a 1-D view wrapped into rows of this many elements
    rows: int               # size of the drawn window in elements
    cols: int
    fr: int                 # elements per cell, along rows and columns
    fc: int
    r0: int = 0             # the window's first row and column in the whole plane
    c0: int = 0
    full_rows: int = 0      # size of the whole plane
    full_cols: int = 0

    @property
    def cell_rows(self) -> int:
        return -(-self.rows // self.fr)

    @property
    def cell_cols(self) -> int:
        return -(-self.cols // self.fc)

    @property
    def windowed(self) -> bool:
        return (self.rows, self.cols) != (self.full_rows, self.full_cols)

    def to_dict(self) -> dict:
        return {"row_dim": self.row_dim, "col_dim": self.col_dim, "index": list(self.index), "wrap": self.wrap,
                "rows": self.rows, "cols": self.cols, "cell": [self.fr, self.fc],
                "cell_rows": self.cell_rows, "cell_cols": self.cell_cols, "origin": [self.r0, self.c0],
                "full": [self.full_rows, self.full_cols], "windowed": self.windowed}


def factors(rows: int, cols: int, max_cells: int) -> tuple:
    """The smallest downsampling (fr, fc) that brings rows x cols within max_cells. Factors are powers of
    two, so cells line up with the power-of-two blocks kernels tile tensors with; square where possible,
    along the long side only for a thin plane."""
    if rows * cols <= max_cells:
        return 1, 1
    f = 1
    while True:
        f *= 2
        fr, fc = min(f, _pow2_at_least(rows)), min(f, _pow2_at_least(cols))
        if rows <= f:        # a thin plane: keep its rows, shrink the columns enough
            fr, fc = 1, _pow2_at_least(-(-rows * cols // max_cells))
        elif cols <= f:
            fr, fc = _pow2_at_least(-(-rows * cols // max_cells)), 1
        if -(-rows // fr) * -(-cols // fc) <= max_cells:
            return fr, fc


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def make_plane(info: TensorInfo, row_dim: Optional[int] = None, col_dim: Optional[int] = None,
               index: Optional[Sequence[int]] = None, wrap: Optional[int] = None,
               window: Optional[Sequence[int]] = None, max_cells: int = MAX_CELLS) -> Plane:
    """The plane to draw. ``window = (r0, r1, c0, c1)`` (half-open, in plane elements) draws only that
    rectangle, so a small selection of a huge tensor can be seen element by element."""
    shape = tuple(int(s) for s in info.shape)
    rank = len(shape)
    idx = tuple(int(i) for i in index) if index is not None else (0,) * rank
    if len(idx) != rank:
        raise PlaneError(f"index has {len(idx)} entries; tensor '{info.name}' has rank {rank}")
    if rank == 0:
        row_dim = col_dim = None
        wrap, rows, cols = 0, 1, 1
    elif rank == 1:
        n = shape[0]
        if wrap is None or wrap <= 0:     # default: the power of two nearest a square
            wrap = 1 << max(0, math.ceil(math.log2(math.sqrt(n)))) if n > 1 else 1
        wrap = max(1, min(int(wrap), max(n, 1)))
        row_dim, col_dim = None, 0
        rows, cols = (-(-n // wrap), wrap) if n else (0, 0)
    else:
        row_dim = rank - 2 if row_dim is None else int(row_dim)
        col_dim = rank - 1 if col_dim is None else int(col_dim)
        if not (0 <= row_dim < rank and 0 <= col_dim < rank) or row_dim == col_dim:
            raise PlaneError(f"rows and cols must be two different dimensions of a rank-{rank} tensor; "
                             f"got rows={row_dim}, cols={col_dim}")
        for d, (i, s) in enumerate(zip(idx, shape)):
            if d not in (row_dim, col_dim) and not 0 <= i < s:
                raise PlaneError(f"index {i} is out of range for dimension {d} of size {s}")
        wrap, rows, cols = 0, shape[row_dim], shape[col_dim]
    r0, r1, c0, c1 = (0, rows, 0, cols) if window is None else (int(v) for v in window)
    if not (0 <= r0 < r1 <= max(rows, 1) and 0 <= c0 < c1 <= max(cols, 1)) and (rows and cols):
        raise PlaneError(f"window rows {r0}..{r1}, cols {c0}..{c1} is not inside the {rows} x {cols} plane")
    h, w = (r1 - r0, c1 - c0) if rows and cols else (rows, cols)
    fr, fc = factors(max(h, 1), max(w, 1), max_cells)
    return Plane(shape, row_dim, col_dim, idx, wrap, h, w, fr, fc, r0 if h else 0, c0 if w else 0, rows, cols)


def auto_window(plane: Plane, r: np.ndarray, c: np.ndarray, margin: float = 0.25, least: int = 8) -> Optional[tuple]:
    """A window around the elements at plane rows ``r`` and columns ``c``, or None when the whole plane
    is already drawn element by element (or nothing was placed)."""
    if (plane.fr == 1 and plane.fc == 1) or not len(r):
        return None

    def span(lo, hi, size):
        pad = max(least, int((hi - lo + 1) * margin))
        return max(0, lo - pad), min(size, hi + 1 + pad)

    r0, r1 = span(int(r.min()), int(r.max()), plane.full_rows)
    c0, c1 = span(int(c.min()), int(c.max()), plane.full_cols)
    return r0, r1, c0, c1


def _plane_offsets(info: TensorInfo, plane: Plane, rows: np.ndarray) -> np.ndarray:
    """Storage offsets of the given window rows (all window columns), as a (len(rows), cols) array;
    -1 past the end of a wrapped 1-D view."""
    rows = plane.r0 + np.asarray(rows, dtype=np.int64)[:, None]
    cols = plane.c0 + np.arange(plane.cols, dtype=np.int64)[None, :]
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

    ``elements`` is sorted and unique. Returns (pos, entry, placed, r, c): flat window positions
    ``row * plane.cols + col`` with the index into ``elements`` drawn there, a bool per element that says
    whether it was drawn (False: in another slice, outside the window, or not an element of the view),
    and the whole-plane row and column of every position.
    """
    elements = np.asarray(elements, dtype=np.int64)
    placed = np.zeros(len(elements), dtype=bool)
    none = np.zeros(0, np.int64)
    if len(elements) == 0 or plane.rows == 0 or plane.cols == 0:
        return none, none, placed, none, none
    if not plane.shape:        # a scalar: one element at storage_offset
        hit = np.nonzero(elements == int(info.storage_offset))[0].astype(np.int64)
        placed[hit] = True
        z = np.zeros(len(hit), np.int64)
        return z, hit, placed, z, z
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
        ok &= (r >= plane.r0) & (r < plane.r0 + plane.rows) & (c >= plane.c0) & (c < plane.c0 + plane.cols)
        entry = np.nonzero(ok)[0]
        r, c = r[entry], c[entry]
    else:
        r, c, entry = _locate_forward(info, plane, elements)
    placed[entry] = True
    return (r - plane.r0) * plane.cols + (c - plane.c0), entry.astype(np.int64), placed, r, c


def _locate_forward(info, plane, elements):
    """Enumerate the window's elements, map each to its storage offset, look it up among ``elements``."""
    step_r = plane.fr if plane.rows * plane.cols > FORWARD_LIMIT else 1   # too big: sample a row per cell
    chunk = max(1, (1 << 20) // max(plane.cols, 1)) * step_r
    rs, cs, es = [], [], []
    for r0 in range(0, plane.rows, chunk):
        rows = np.arange(r0, min(plane.rows, r0 + chunk), step_r)
        flat = _plane_offsets(info, plane, rows).reshape(-1)
        k = np.clip(np.searchsorted(elements, flat), 0, len(elements) - 1)
        where = np.nonzero((elements[k] == flat) & (flat >= 0))[0]
        rs.append(plane.r0 + rows[where // plane.cols])
        cs.append(plane.c0 + where % plane.cols)
        es.append(k[where])
    cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    return cat(rs), cat(cs), cat(es)


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
        last_row, tail = divmod(plane.shape[0], plane.wrap)
        if tail:   # the wrapped view's last row is only ``tail`` long
            top = plane.r0 + cr * plane.fr
            c0 = plane.c0 + cc * plane.fc
            missing = np.clip(c0 + w - np.maximum(c0, tail), 0, None)
            size = size - np.where((top <= last_row) & (last_row < top + h), missing, 0)
    return size
