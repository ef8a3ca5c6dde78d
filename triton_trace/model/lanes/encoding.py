"""The compact lane encoding's constants, array table and shared helpers, and the check of a stored form.
The encoding itself is described in the package docstring (``triton_trace.lanes``)."""
from __future__ import annotations

import numpy as np

MAX_RANK = 8
AFFINE, ROWSTRIDES, DELTA32, RAW = 0, 1, 2, 3
FULL, ROWS = 0, 1
DEFAULT_ROW = 1024           # from_flat without row boundaries: rows of this many lanes

# name -> (dtype, rank) of every array a Lanes is made of
ARRAYS: dict = {
    "sig_offs": (np.uint8, 1), "sig_mask": (np.uint8, 1), "sig_n": (np.int64, 1), "sig_ndim": (np.uint8, 1),
    "sig_shape": (np.int64, 2), "sig_strides": (np.int64, 2),
    "seg_sig": (np.int32, 1), "seg_rows": (np.int64, 1),
    "base": (np.int64, 1), "row_strides": (np.int64, 1), "code": (np.int32, 1),
    "delta32": (np.int32, 1), "raw": (np.int64, 1), "bits": (np.uint8, 1),
}
POOLS = {"base": "q", "row_strides": "q", "code": "i", "delta32": "i", "raw": "q", "bits": "B"}


def exclusive_starts(a: np.ndarray) -> np.ndarray:
    """Exclusive running sum with the total appended: length len(a) + 1."""
    out = np.zeros(len(a) + 1, dtype=np.int64)
    np.cumsum(a, out=out[1:])
    return out


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for every (s, c)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(counts) - counts)
    return np.repeat(shift, counts) + np.arange(total, dtype=np.int64)


def unravel(shape: tuple) -> np.ndarray:
    """(n, ndim) block index of every lane of a row, row-major."""
    grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
    return grids.reshape(len(shape), -1).T.copy() if shape else np.zeros((1, 0), np.int64)


def pattern(shape: tuple, strides: tuple) -> np.ndarray:
    """Offsets of a row relative to its base: sum_d index_d * stride_d, row-major, as a flat array."""
    off = np.zeros((), dtype=np.int64)
    for size, stride in zip(shape, strides):
        off = off[..., None] + np.arange(size, dtype=np.int64) * np.int64(stride)
    return off.reshape(-1)


def readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Cache:
    """Small bounded memo of per-shape helper arrays (patterns, index tables)."""

    def __init__(self, limit: int = 256):
        self.d: dict = {}
        self.limit = limit

    def get(self, key, build):
        v = self.d.get(key)
        if v is None:
            if len(self.d) >= self.limit:
                self.d.clear()
            v = self.d[key] = build()
        return v


def validate(arrays: dict, size) -> None:
    missing = sorted(set(ARRAYS) - set(arrays))
    extra = sorted(set(arrays) - set(ARRAYS))
    if missing or extra:
        raise ValueError(f"lane arrays missing {missing} or unknown {extra}")
    for name, (dt, rank) in ARRAYS.items():
        a = arrays[name]
        if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dt) or a.ndim != rank or \
                (rank == 2 and a.shape[1] != MAX_RANK):
            raise ValueError(f"lane array {name} must be {np.dtype(dt).name} of rank {rank}"
                             f"{f' with {MAX_RANK} columns' if rank == 2 else ''}")
    size = int(size)
    if size < 0:
        raise ValueError("negative lane count")
    g = len(arrays["sig_n"])
    if any(len(arrays[k]) != g for k in ("sig_offs", "sig_mask", "sig_ndim", "sig_shape", "sig_strides")):
        raise ValueError("lane signature arrays differ in length")
    kind, mk, n, nd = arrays["sig_offs"], arrays["sig_mask"], arrays["sig_n"], arrays["sig_ndim"].astype(np.int64)
    shape, strides = arrays["sig_shape"], arrays["sig_strides"]
    if g:
        if kind.max() > RAW or mk.max() > ROWS or nd.max() > MAX_RANK or n.min() < 0 or n.max() >= 1 << 31:
            raise ValueError("a lane signature has an unknown encoding, rank or row length")
        outside = np.arange(MAX_RANK)[None, :] >= nd[:, None]
        if shape.min() < 0 or np.any(shape[outside] != 0) or np.any(strides[outside] != 0) or \
                np.any(strides[kind != AFFINE] != 0):
            raise ValueError("a lane signature has a malformed shape or strides")
        # product of the shape, saturating: every factor is at most 2**31 once n is
        prod = np.ones(g, dtype=np.float64)
        for d in range(MAX_RANK):
            prod *= np.where(outside[:, d], 1, shape[:, d]).astype(np.float64)
        exact = np.where(outside, 1, shape).prod(axis=1) if np.all(prod < 2.0 ** 62) else None
        if exact is None or np.any(exact != n):
            raise ValueError("a lane signature's shape does not hold its row length")
    seg_sig, seg_rows = arrays["seg_sig"], arrays["seg_rows"]
    if len(seg_sig) != len(seg_rows):
        raise ValueError("lane segment arrays differ in length")
    nrows = len(arrays["base"])
    if len(seg_sig):
        if seg_sig.min() < 0 or seg_sig.max() >= g:
            raise ValueError("a lane segment names an unknown signature")
        if seg_rows.min() < 1 or seg_rows.max() > nrows:
            raise ValueError("a lane segment has an invalid row count")
    if int(seg_rows.sum()) != nrows:
        raise ValueError(f"lane segments hold {int(seg_rows.sum())} rows but {nrows} row bases are stored")
    s = seg_sig.astype(np.intp)
    sn, sk, sm, snd = n[s], kind[s], mk[s], nd[s]
    if float((seg_rows.astype(np.float64) * sn).sum()) > size + 1.0 or int((seg_rows * sn).sum()) != size:
        raise ValueError(f"lane segments hold a different number of lanes than the {size} declared")
    lanes = seg_rows * sn

    def expect(name, want):
        if len(arrays[name]) != int(want):
            raise ValueError(f"lane array {name} holds {len(arrays[name])} entries, the segments need {int(want)}")

    expect("row_strides", (seg_rows * snd)[sk == ROWSTRIDES].sum())
    expect("delta32", lanes[sk == DELTA32].sum())
    expect("raw", lanes[sk == RAW].sum())
    coded = sm == ROWS
    expect("code", seg_rows[coded].sum())
    code = arrays["code"].astype(np.int64)
    code_seg = np.repeat(np.flatnonzero(coded), seg_rows[coded])
    if len(code) and np.any(code > sn[code_seg]):
        raise ValueError("a lane mask code exceeds its row length")
    neg = code < 0
    nseg = code_seg[neg]
    # bit-packed rows of a segment are numbered -1, -2, ... in order
    ordinal = np.arange(len(nseg)) - np.searchsorted(nseg, nseg, side="left")
    if np.any(-code[neg] - 1 != ordinal):
        raise ValueError("lane mask codes of bit-packed rows are out of order")
    bitrows = np.bincount(nseg, minlength=len(seg_sig))
    expect("bits", (bitrows * ((sn + 7) // 8)).sum())


def core(d: np.ndarray) -> np.ndarray:
    """``d`` without the dimensions it only broadcasts along (stride 0): those become size 1 (a reduction
    over it reads each distinct value once, not the broadcast's every lane)."""
    if not d.ndim or all(st or n == 1 for st, n in zip(d.strides, d.shape)):
        return d
    return d[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(d.strides, d.shape))]
