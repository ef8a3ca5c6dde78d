"""Compact lane storage: the element offsets and masks of every recorded memory op.

Most Triton accesses are regular: a row (one op of one program) is a block whose offsets are
``base + sum_d index_d * stride_d`` and whose mask is all true or a prefix. Raw int64 offsets plus a bool
mask cost 9 bytes a lane; stored as a base per row and strides shared by a run of rows they cost almost
nothing, and only irregular rows pay per lane.

Layout. Rows are grouped into *segments*: runs of consecutive rows that share a *signature* (offset
encoding, mask encoding, lanes per row, block shape, and for the shared-stride encoding the strides).
Signatures are few and stored once. Per-row and per-lane data live in flat pools, in row order; where a
segment's data starts in each pool follows from the segment table (a running sum), so it is not stored.

Offset encodings (``sig_offs``):
  AFFINE      base per row; strides of the signature
  ROWSTRIDES  base per row; strides per row (``row_strides``, ndim per row)
  DELTA32     base per row; an int32 delta per lane (``delta32``)
  RAW         an int64 offset per lane (``raw``); the row's base is its first offset and unused
Mask encodings (``sig_mask``):
  FULL        every lane active
  ROWS        a code per row (``code``): ``c >= 0`` means the first ``c`` lanes are active; ``c < 0`` means
              the row is the ``-c``-th bit-packed row of its segment (``bits``, ``ceil(n / 8)`` bytes a row)

Offsets are stored modulo 2**64 (numpy's int64 wrap-around): decoding gives back the recorded values.
"""
from __future__ import annotations

import array
import math
import weakref
from typing import Optional

import numpy as np

MAX_RANK = 8
AFFINE, ROWSTRIDES, DELTA32, RAW = 0, 1, 2, 3
FULL, ROWS = 0, 1
_DEFAULT_ROW = 1024           # from_flat without row boundaries: rows of this many lanes

# name -> (dtype, rank) of every array a Lanes is made of
ARRAYS: dict = {
    "sig_offs": (np.uint8, 1), "sig_mask": (np.uint8, 1), "sig_n": (np.int64, 1), "sig_ndim": (np.uint8, 1),
    "sig_shape": (np.int64, 2), "sig_strides": (np.int64, 2),
    "seg_sig": (np.int32, 1), "seg_rows": (np.int64, 1),
    "base": (np.int64, 1), "row_strides": (np.int64, 1), "code": (np.int32, 1),
    "delta32": (np.int32, 1), "raw": (np.int64, 1), "bits": (np.uint8, 1),
}
_POOLS = {"base": "q", "row_strides": "q", "code": "i", "delta32": "i", "raw": "q", "bits": "B"}


def _excl(a: np.ndarray) -> np.ndarray:
    """Exclusive running sum with the total appended: length len(a) + 1."""
    out = np.zeros(len(a) + 1, dtype=np.int64)
    np.cumsum(a, out=out[1:])
    return out


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for every (s, c)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(counts) - counts)
    return np.repeat(shift, counts) + np.arange(total, dtype=np.int64)


def _unravel(shape: tuple) -> np.ndarray:
    """(n, ndim) block index of every lane of a row, row-major."""
    grids = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), np.int64)
    return grids.reshape(len(shape), -1).T.copy() if shape else np.zeros((1, 0), np.int64)


def _pattern(shape: tuple, strides: tuple) -> np.ndarray:
    """Offsets of a row relative to its base: sum_d index_d * stride_d, row-major, as a flat array."""
    off = np.zeros((), dtype=np.int64)
    for size, stride in zip(shape, strides):
        off = off[..., None] + np.arange(size, dtype=np.int64) * np.int64(stride)
    return off.reshape(-1)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class _Cache:
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


# ----------------------------------------------------------------------------------------------------------
# writing
# ----------------------------------------------------------------------------------------------------------
class LaneWriter:
    """Appends blocks of lanes, encoding each as it comes; ``finish`` hands back an immutable Lanes."""

    def __init__(self):
        self._pools = {name: array.array(code) for name, code in _POOLS.items()}
        self._sigs: dict = {}              # signature tuple -> id
        self._sig_list: list = []
        self._seg_sig = array.array("i")
        self._seg_rows = array.array("q")
        self._seg_bitrows = 0              # bit-packed rows in the last segment (their codes count on)
        self._lanes = 0
        self._patterns = _Cache()
        self._finished = False

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def nbytes(self) -> int:
        pools = sum(len(a) * a.itemsize for a in self._pools.values())
        return pools + len(self._seg_sig) * 12 + len(self._sig_list) * (3 * 8 + 2 * 8 * MAX_RANK)

    def mark(self) -> tuple:
        last = self._seg_rows[-1] if len(self._seg_rows) else 0
        return (self._lanes, len(self._seg_sig), last, self._seg_bitrows,
                tuple(len(a) for a in self._pools.values()), len(self._sig_list))

    def rollback(self, mark) -> None:
        self._check_open()
        lanes, nseg, last, bitrows, pools, nsig = mark
        self._lanes = lanes
        for key in self._sig_list[nsig:]:        # signatures first used after the mark
            del self._sigs[key]
        del self._sig_list[nsig:]
        del self._seg_sig[nseg:]
        del self._seg_rows[nseg:]
        if nseg:
            self._seg_rows[-1] = last
        self._seg_bitrows = bitrows
        for a, n in zip(self._pools.values(), pools):
            del a[n:]

    def _check_open(self):
        if self._finished:
            raise RuntimeError("LaneWriter.finish() was called: the writer takes no more blocks")

    def add(self, offsets: np.ndarray, mask: np.ndarray, shape: Optional[tuple] = None) -> int:
        """Append one block of R rows of n lanes (int64 offsets and bool mask, shape (R, n), the mask may
        be a broadcast view); ``shape`` is the block shape of one row (product n), used to find strides.
        Returns the lane index of the block's first lane."""
        if self._finished:
            self._check_open()
        o = offsets if type(offsets) is np.ndarray else np.asarray(offsets)
        if o.ndim != 2:
            o = o.reshape(1, -1) if o.ndim < 2 else o.reshape(o.shape[0], -1)
        if o.dtype != np.int64:
            o = o.astype(np.int64)
        R, n = o.shape
        m = mask if type(mask) is np.ndarray else np.asarray(mask)
        if m.dtype != np.bool_:
            m = m.astype(bool)
        if m.shape != (R, n):
            m = np.broadcast_to(m.reshape(R, n) if m.size == R * n else m, (R, n))
        if shape is None or len(shape) > MAX_RANK:
            shape = (n,)
        else:
            shape = tuple(shape)
            if math.prod(shape) != n or min(shape, default=0) < 0:
                raise ValueError(f"LaneWriter.add: block shape {shape} does not hold {n} lanes per row")
        if n >= 1 << 31:
            raise ValueError(f"LaneWriter.add: {n} lanes in one row; at most 2**31 - 1 are supported")
        start = self._lanes
        if R == 0:
            return start
        if n == 0:
            self._append(R, (AFFINE, 0, (0,), (0,)), np.zeros(R, np.int64), None, None, None, None)
        elif R == 1:
            self._add_row(o[0], m[0], shape, n)
        else:
            self._add_rows(o, m, shape, n)
        return start

    # -- classification ------------------------------------------------------------------------------------
    def _add_row(self, row, mrow, shape, n) -> None:
        """One row (the sequential recorder's case): the steps of _add_rows with less overhead."""
        b = int(row[0])
        d32 = raw = None
        if n == 1:
            key = (AFFINE, 1, shape, (0,) * len(shape))
        else:
            probe = self._patterns.get((shape, "probe"), lambda: _probe(shape))
            s = tuple(_wrap(int(row[k]) - b) if k else 0 for k in probe)
            pat = self._patterns.get((shape, s), lambda: _pattern(shape, s))
            d = row - b
            if (d == pat).all():
                key = (AFFINE, n, shape, s)
            elif d.min() >= -(1 << 31) and d.max() < (1 << 31):
                key, d32 = (DELTA32, n, (n,), ()), d.astype(np.int32)
            else:
                key, raw = (RAW, n, (n,), ()), row
        c = int(np.count_nonzero(mrow)) if n > 1 else int(bool(mrow[0]))
        if c == n:
            code = None
        else:
            code = c if not mrow[c:].any() else -1
        self._append(1, key, b, None, d32, raw, code, mrow[None] if code == -1 else None)

    def _add_rows(self, o, m, shape, n) -> None:
        R = o.shape[0]
        base = o[:, 0].copy()
        rel = o - base[:, None]
        s = rel[:, _probe(shape)]                  # (R, ndim) strides, if the row is affine
        same_prev = np.ones(R, dtype=bool)         # a row's strides equal the previous row's
        same_prev[1:] = (s[1:] == s[:-1]).all(axis=1)
        if same_prev.all():                        # one set of strides (a batch of one op): one pattern
            s0 = tuple(s[0].tolist())
            pat = self._patterns.get((shape, s0), lambda: _pattern(shape, s0))
            ok = (rel == pat).all(axis=1)
            kind = np.where(ok, AFFINE, DELTA32)
        else:
            # rows of several ops, or strides that vary by program: runs of equal strides share them, a
            # row whose strides match neither neighbour keeps its own (ROWSTRIDES)
            u = self._patterns.get((shape, "u"), lambda: _unravel(shape))
            exp = np.zeros_like(rel)
            for d in range(len(shape)):
                exp += s[:, d, None] * u[None, :, d]
            ok = (rel == exp).all(axis=1)
            same_prev[0] = False
            in_run = same_prev.copy()
            in_run[:-1] |= same_prev[1:]
            kind = np.where(ok, np.where(in_run, AFFINE, ROWSTRIDES), DELTA32)
        if not ok.all():
            bad = ~ok
            fits = (rel.min(axis=1) >= -(1 << 31)) & (rel.max(axis=1) < (1 << 31))
            kind[bad & ~fits] = RAW
        full = m.all(axis=1)
        code = None
        if not full.all():
            cnt = np.count_nonzero(m, axis=1)
            prefix = (m == (np.arange(n) < cnt[:, None])).all(axis=1)
            code = np.where(prefix, cnt, -1).astype(np.int32)
        # runs of rows with the same encoding (and for AFFINE the same strides) become segments
        cuts = np.flatnonzero((kind[1:] != kind[:-1]) | ((kind[1:] == AFFINE) & ~same_prev[1:])) + 1
        for a, b in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [R]]).tolist()):
            k = int(kind[a])
            rs = d32 = raw = None
            if k == AFFINE:
                key = (AFFINE, n, shape, tuple(s[a].tolist()))
            elif k == ROWSTRIDES:
                key, rs = (ROWSTRIDES, n, shape, ()), s[a:b]
            elif k == DELTA32:
                key, d32 = (DELTA32, n, (n,), ()), rel[a:b].astype(np.int32)
            else:
                key, raw = (RAW, n, (n,), ()), o[a:b]
            c = None if code is None or full[a:b].all() else code[a:b]
            self._append(b - a, key, base[a:b], rs, d32, raw, c, m[a:b] if c is not None else None)

    # -- appending -----------------------------------------------------------------------------------------
    def _sig(self, key: tuple, mask_kind: int) -> int:
        k = key + (mask_kind,)
        sid = self._sigs.get(k)
        if sid is None:
            sid = self._sigs[k] = len(self._sig_list)
            self._sig_list.append(k)
        return sid

    def _append(self, rows, key, base, rs, d32, raw, code, m=None) -> None:
        """Append ``rows`` rows of one offsets signature ``key``; ``code`` is None for full masks. For one
        row, ``base`` and ``code`` may be Python ints (the common case, kept off numpy)."""
        n = key[1]
        p = self._pools
        mask_kind = FULL if code is None else ROWS
        last = self._sig_list[self._seg_sig[-1]] if len(self._seg_sig) else None
        merge = last is not None and last[:4] == key and (last[4] == mask_kind or last[4] == ROWS)
        if merge and last[4] == ROWS and code is None:
            code = n if rows == 1 else np.full(rows, n, dtype=np.int32)   # full rows among coded rows
        bit_rows = 0
        if type(code) is int and code < 0:
            code = np.array([code], dtype=np.int32)
        if type(code) is int:                      # one row, full or a prefix
            p["code"].append(code)
        elif code is not None:
            neg = code < 0
            if neg.any():                          # bit-packed rows are numbered on within the segment
                first = self._seg_bitrows if merge else 0
                code = np.where(neg, -(np.cumsum(neg) + first), code).astype(np.int32)
                p["bits"].frombytes(np.packbits(m[neg], axis=1).tobytes())
                bit_rows = int(neg.sum())
            p["code"].frombytes(np.ascontiguousarray(code, dtype=np.int32).tobytes())
        if merge:
            self._seg_rows[-1] += rows
            self._seg_bitrows += bit_rows
        else:
            self._seg_sig.append(self._sig(key, mask_kind))
            self._seg_rows.append(rows)
            self._seg_bitrows = bit_rows
        if type(base) is int:
            p["base"].append(base)
        else:
            p["base"].frombytes(np.ascontiguousarray(base, dtype=np.int64).tobytes())
        if rs is not None:
            p["row_strides"].frombytes(np.ascontiguousarray(rs, dtype=np.int64).tobytes())
        if d32 is not None:
            p["delta32"].frombytes(np.ascontiguousarray(d32).tobytes())
        if raw is not None:
            p["raw"].frombytes(np.ascontiguousarray(raw, dtype=np.int64).tobytes())
        self._lanes += rows * n

    def finish(self) -> "Lanes":
        self._check_open()
        self._finished = True
        used = sorted(set(self._seg_sig))
        remap = np.full(len(self._sig_list) + 1, -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        sigs = [self._sig_list[i] for i in used]
        a = _sig_arrays(sigs)
        a["seg_sig"] = remap[np.frombuffer(self._seg_sig, dtype=np.int32)] if len(self._seg_sig) else \
            np.zeros(0, np.int32)
        a["seg_rows"] = np.frombuffer(self._seg_rows, dtype=np.int64).copy()
        for name, pool in self._pools.items():
            a[name] = np.frombuffer(pool, dtype=ARRAYS[name][0]) if len(pool) else \
                np.zeros(0, ARRAYS[name][0])
        return Lanes(a, self._lanes)


def _wrap(v: int) -> int:
    """A Python int taken modulo 2**64 into int64's range, as numpy's int64 arithmetic wraps."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _probe(shape: tuple) -> list:
    """Flat lane index one step along each dimension (0 for dimensions of size 1, whose stride is 0)."""
    out, inner = [], 1
    for size in reversed(shape):
        out.append(inner if size > 1 else 0)
        inner *= size
    return out[::-1]


def _sig_arrays(sigs: list) -> dict:
    g = len(sigs)
    a = {"sig_offs": np.zeros(g, np.uint8), "sig_mask": np.zeros(g, np.uint8), "sig_n": np.zeros(g, np.int64),
         "sig_ndim": np.zeros(g, np.uint8), "sig_shape": np.zeros((g, MAX_RANK), np.int64),
         "sig_strides": np.zeros((g, MAX_RANK), np.int64)}
    for i, (kind, n, shape, strides, mask_kind) in enumerate(sigs):
        a["sig_offs"][i], a["sig_mask"][i], a["sig_n"][i], a["sig_ndim"][i] = kind, mask_kind, n, len(shape)
        a["sig_shape"][i, :len(shape)] = shape
        a["sig_strides"][i, :len(strides)] = strides
    return a


# ----------------------------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------------------------
class Lanes:
    """Every lane of a launch, compact. Immutable; decodes on demand (all lanes, or a few ranges)."""

    def __init__(self, arrays: dict, size: int):
        self._a = {k: _readonly(np.asarray(arrays[k]).view()) for k in ARRAYS}   # read-only views
        self.size = int(size)
        a = self._a
        sig = a["seg_sig"].astype(np.intp)
        self._seg_n = a["sig_n"][sig]
        self._seg_kind = a["sig_offs"][sig]
        self._seg_maskkind = a["sig_mask"][sig]
        self._seg_nd = a["sig_ndim"][sig].astype(np.int64)
        rows = a["seg_rows"]
        lanes = rows * self._seg_n
        self._lane_start = _excl(lanes)
        self._row_start = _excl(rows)
        self._rs_start = _excl(np.where(self._seg_kind == ROWSTRIDES, rows * self._seg_nd, 0))
        coded = self._seg_maskkind == ROWS
        self._code_start = _excl(np.where(coded, rows, 0))
        self._d32_start = _excl(np.where(self._seg_kind == DELTA32, lanes, 0))
        self._raw_start = _excl(np.where(self._seg_kind == RAW, lanes, 0))
        code_seg = np.repeat(np.flatnonzero(coded), rows[coded])
        self._bitrows = np.bincount(code_seg[a["code"] < 0], minlength=len(sig)).astype(np.int64) \
            if len(code_seg) == len(a["code"]) else np.zeros(len(sig), np.int64)
        self._bits_start = _excl(self._bitrows * ((self._seg_n + 7) // 8))
        self._helpers = _Cache()
        self._expanded: dict = {}     # weak references to the last full expansions

    # -- sizes ---------------------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        derived = (self._seg_n, self._seg_kind, self._seg_maskkind, self._seg_nd, self._lane_start,
                   self._row_start, self._rs_start, self._code_start, self._d32_start, self._raw_start,
                   self._bitrows, self._bits_start)
        return sum(v.nbytes for v in self._a.values()) + sum(v.nbytes for v in derived)

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (f"<Lanes {self.size} lanes, {len(self._a['seg_sig'])} segments, "
                f"{len(self._a['sig_n'])} signatures, {self.nbytes} bytes>")

    def __eq__(self, other) -> bool:
        if not isinstance(other, Lanes):
            return NotImplemented
        return self.size == other.size and np.array_equal(self.offsets(), other.offsets()) and \
            np.array_equal(self.mask(), other.mask())

    __hash__ = None

    def __reduce__(self):
        # the caches (weak references) do not pickle; the arrays and the size are the whole state
        return (Lanes, (dict(self._a), self.size))

    # -- full expansion --------------------------------------------------------------------------------------
    def offsets(self) -> np.ndarray:
        """Every lane's element offset, int64 (size,), read-only."""
        return self._full("offsets", self._expand_offsets)

    def mask(self) -> np.ndarray:
        """Every lane's active flag, bool (size,), read-only."""
        return self._full("mask", self._expand_mask)

    def _full(self, name, build) -> np.ndarray:
        ref = self._expanded.get(name)
        arr = ref() if ref is not None else None
        if arr is None:
            arr = _readonly(build())
            self._expanded[name] = weakref.ref(arr)
        return arr

    def _sig_rows(self, g: int):
        """Segments of signature g, and each of their rows as (segment, row within the segment)."""
        segs = np.flatnonzero(self._a["seg_sig"] == g)
        rows = self._a["seg_rows"][segs]
        seg = np.repeat(segs, rows)
        return segs, seg, _ranges(np.zeros(len(segs), np.int64), rows)

    def _pattern(self, g: int) -> np.ndarray:
        a = self._a
        nd = int(a["sig_ndim"][g])
        shape, strides = tuple(a["sig_shape"][g, :nd].tolist()), tuple(a["sig_strides"][g, :nd].tolist())
        return self._helpers.get(("p", g), lambda: _pattern(shape, strides))

    def _unravel(self, g: int) -> np.ndarray:
        nd = int(self._a["sig_ndim"][g])
        return self._helpers.get(("u", g), lambda: _unravel(tuple(self._a["sig_shape"][g, :nd].tolist())))

    def _rows(self, g: int, seg: np.ndarray, r: np.ndarray, what: str) -> np.ndarray:
        """Offsets (what="offsets") or mask of whole rows of signature g, as a (rows, n) array: row r[i]
        of segment seg[i]."""
        a = self._a
        n = int(a["sig_n"][g])
        if what == "mask":
            if a["sig_mask"][g] == FULL:
                return np.ones((len(seg), n), dtype=bool)
            code = a["code"][self._code_start[seg] + r]
            vals = np.arange(n) < code[:, None]
            neg = np.flatnonzero(code < 0)
            if len(neg):
                vals[neg] = self._bit_rows(seg[neg], code[neg], n)
            return vals
        kind = int(a["sig_offs"][g])
        grow = self._row_start[seg] + r
        if kind == AFFINE:
            return a["base"][grow][:, None] + self._pattern(g)
        if kind == ROWSTRIDES:
            nd = int(a["sig_ndim"][g])
            rs = a["row_strides"][(self._rs_start[seg] + r * nd)[:, None] + np.arange(nd)]
            u = self._unravel(g)
            vals = np.repeat(a["base"][grow][:, None], n, axis=1)
            for d in range(nd):
                vals += rs[:, d, None] * u[None, :, d]
            return vals
        if kind == DELTA32:
            return a["base"][grow][:, None] + a["delta32"][(self._d32_start[seg] + r * n)[:, None] + np.arange(n)]
        return a["raw"][(self._raw_start[seg] + r * n)[:, None] + np.arange(n)]

    def _expand(self, what: str) -> np.ndarray:
        a = self._a
        out = np.empty(self.size, dtype=np.int64 if what == "offsets" else bool)
        for g in range(len(a["sig_n"])):
            n = int(a["sig_n"][g])
            if n == 0:
                continue
            segs, seg, r = self._sig_rows(g)
            if len(seg) == 0:
                continue
            if what == "mask" and a["sig_mask"][g] == FULL:
                vals = True
            else:
                vals = self._rows(g, seg, r, what)
            if len(segs) == 1:
                s = segs[0]
                out[self._lane_start[s]:self._lane_start[s + 1]] = vals if vals is True else vals.reshape(-1)
            else:
                pos = (self._lane_start[seg] + r * n)[:, None] + np.arange(n)
                out[pos] = vals
        return out

    def _expand_offsets(self) -> np.ndarray:
        return self._expand("offsets")

    def _expand_mask(self) -> np.ndarray:
        return self._expand("mask")

    def _bit_rows(self, seg, code, n) -> np.ndarray:
        nb = (n + 7) // 8
        start = self._bits_start[seg] + (-code.astype(np.int64) - 1) * nb
        packed = self._a["bits"][start[:, None] + np.arange(nb)]
        return np.unpackbits(packed, axis=1, count=n).astype(bool)

    # -- regular rows, for analyses that work per pattern instead of per lane --------------------------------
    def affine_rows(self) -> tuple:
        """(lane start, lanes, signature, base, active) of every stored row, in storage order.
        ``signature`` is >= 0 for a row whose offsets are ``base + pattern(signature)`` and whose active
        lanes are its first ``active`` (all, or a prefix: a block's tail), else -1 (its lanes must be
        decoded)."""
        a = self._a
        rows = a["seg_rows"]
        seg = np.repeat(np.arange(len(rows)), rows)
        r = np.arange(int(self._row_start[-1]), dtype=np.int64) - self._row_start[:-1][seg]
        n = self._seg_n[seg]
        start = self._lane_start[:-1][seg] + r * n
        active = n.copy()
        coded = np.flatnonzero(self._seg_maskkind[seg] != FULL)
        if len(coded):
            active[coded] = a["code"][self._code_start[:-1][seg[coded]] + r[coded]]   # < 0: bit-packed
        regular = (active >= 0) & (self._seg_kind == AFFINE)[seg] & (n > 0)
        sig = np.where(regular, a["seg_sig"][seg], -1).astype(np.int64)
        return start, n, sig, np.where(regular, a["base"][:len(sig)], 0), np.where(regular, active, 0)

    def pattern(self, signature: int) -> np.ndarray:
        """Offsets relative to the base of a row of ``signature`` (see affine_rows), read-only."""
        return _readonly(self._pattern(int(signature)).view())

    # -- partial decoding ----------------------------------------------------------------------------------
    def take(self, start: int, count: int) -> tuple:
        """(offsets, mask) of lanes [start, start + count), decoding only the rows involved."""
        start, count = int(start), int(count)
        if count < 0 or start < 0 or start + count > self.size:
            raise IndexError(f"Lanes.take({start}, {count}): outside the {self.size} lanes")
        if count == 0:
            return np.zeros(0, np.int64), np.zeros(0, bool)
        ls = self._lane_start
        first = int(np.searchsorted(ls, start, side="right")) - 1
        last = int(np.searchsorted(ls, start + count - 1, side="right")) - 1
        parts = []
        for s in range(first, last + 1):
            lo, hi = max(start, int(ls[s])), min(start + count, int(ls[s + 1]))
            if hi > lo:
                parts.append(self._segment_lanes(s, lo - int(ls[s]), hi - int(ls[s])))
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _segment_lanes(self, s: int, lo: int, hi: int) -> tuple:
        """(offsets, mask) of lanes [lo, hi) counted within segment s (non-empty)."""
        a = self._a
        g = int(a["seg_sig"][s])
        n, kind = int(a["sig_n"][g]), int(a["sig_offs"][g])
        r0, r1 = lo // n, (hi - 1) // n + 1
        k = r1 - r0
        rows = slice(int(self._row_start[s]) + r0, int(self._row_start[s]) + r1)
        if kind == AFFINE:
            off = a["base"][rows][:, None] + self._pattern(g)
        elif kind == ROWSTRIDES:
            nd = int(a["sig_ndim"][g])
            p0 = int(self._rs_start[s]) + r0 * nd
            rs = a["row_strides"][p0:p0 + k * nd].reshape(k, nd)
            u = self._unravel(g)
            off = np.repeat(a["base"][rows][:, None], n, axis=1)
            for d in range(nd):
                off += rs[:, d, None] * u[None, :, d]
        elif kind == DELTA32:
            p0 = int(self._d32_start[s]) + r0 * n
            off = a["base"][rows][:, None] + a["delta32"][p0:p0 + k * n].reshape(k, n)
        else:
            p0 = int(self._raw_start[s]) + r0 * n
            off = a["raw"][p0:p0 + k * n].reshape(k, n).copy()
        if a["sig_mask"][g] == FULL:
            msk = np.ones((k, n), dtype=bool)
        else:
            c0 = int(self._code_start[s]) + r0
            code = a["code"][c0:c0 + k]
            msk = np.arange(n) < code[:, None]
            neg = np.flatnonzero(code < 0)
            if len(neg):
                msk[neg] = self._bit_rows(np.full(len(neg), s), code[neg], n)
        cut = slice(lo - r0 * n, hi - r0 * n)
        return off.reshape(-1)[cut], msk.reshape(-1)[cut]

    def gather(self, starts, counts) -> tuple:
        """(offsets, mask) of the lane ranges [starts[i], starts[i] + counts[i]), concatenated in order."""
        starts = np.asarray(starts, dtype=np.int64).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if len(starts) != len(counts):
            raise ValueError("Lanes.gather: starts and counts differ in length")
        if len(counts) and (counts.min() < 0 or starts.min() < 0 or (starts + counts).max() > self.size):
            raise IndexError(f"Lanes.gather: a lane range lies outside the {self.size} lanes")
        total = int(counts.sum())
        if total == self.size and total:
            if np.array_equal(starts, _excl(counts)[:-1]):
                return self.offsets(), self.mask()
            order = np.argsort(starts, kind="stable")
            s, c = starts[order], counts[order]
            if s[0] == 0 and np.array_equal(s[1:], (s + c)[:-1]):      # every lane once, rows reordered
                lanes = _ranges(starts, counts)
                return self.offsets()[lanes], self.mask()[lanes]
        if len(starts) <= 4:
            parts = [self.take(s, c) for s, c in zip(starts.tolist(), counts.tolist())]
            if len(parts) == 1:
                return parts[0]
            return (np.concatenate([p[0] for p in parts] + [np.zeros(0, np.int64)]),
                    np.concatenate([p[1] for p in parts] + [np.zeros(0, bool)]))
        S = len(self._seg_n)
        if S:       # ranges that are whole rows (the op table's own) decode row-wise, by signature
            seg = np.searchsorted(self._lane_start, starts, side="right") - 1
            inside = seg < S
            seg = np.minimum(seg, S - 1)
            n = np.maximum(self._seg_n[seg], 1)
            within = starts - self._lane_start[seg]
            if np.all(inside & (counts == self._seg_n[seg]) & (within % n == 0)):
                return self._gather_rows(seg, within // n, counts)
        return self._decode(_ranges(starts, counts))

    def _gather_rows(self, seg, r, counts) -> tuple:
        """Whole rows (row r[i] of segment seg[i]), decoded row-wise by signature and placed in order."""
        sig = self._a["seg_sig"][seg]
        if len(sig) and sig.min() == sig.max() and counts[0] > 0:      # one signature: no scatter
            g = int(sig[0])
            return (self._rows(g, seg, r, "offsets").reshape(-1), self._rows(g, seg, r, "mask").reshape(-1))
        off = np.empty(int(counts.sum()), dtype=np.int64)
        msk = np.empty(len(off), dtype=bool)
        at = _excl(counts)[:-1]
        for g in np.unique(sig).tolist():
            sel = np.flatnonzero((sig == g) & (counts > 0))
            if len(sel) == 0:
                continue
            pos = at[sel][:, None] + np.arange(int(self._a["sig_n"][g]))
            off[pos] = self._rows(g, seg[sel], r[sel], "offsets")
            msk[pos] = self._rows(g, seg[sel], r[sel], "mask")
        return off, msk

    def _decode(self, lanes: np.ndarray) -> tuple:
        a = self._a
        off = np.empty(len(lanes), dtype=np.int64)
        msk = np.empty(len(lanes), dtype=bool)
        if not len(lanes):
            return off, msk
        seg = np.searchsorted(self._lane_start, lanes, side="right") - 1
        sig = a["seg_sig"][seg]
        one = len(a["sig_n"]) == 1 or sig.min() == sig.max()
        for g in ([int(sig[0])] if one else np.unique(sig).tolist()):
            sel = slice(None) if one else np.flatnonzero(sig == g)
            s = seg[sel]
            n, kind = int(a["sig_n"][g]), int(a["sig_offs"][g])
            within = lanes[sel] - self._lane_start[s]
            r, j = np.divmod(within, n)
            grow = self._row_start[s] + r
            if kind == AFFINE:
                off[sel] = a["base"][grow] + self._pattern(g)[j]
            elif kind == ROWSTRIDES:
                nd = int(a["sig_ndim"][g])
                u = self._unravel(g)[j]
                rs0 = self._rs_start[s] + r * nd
                v = a["base"][grow].copy()
                for d in range(nd):
                    v += a["row_strides"][rs0 + d] * u[:, d]
                off[sel] = v
            elif kind == DELTA32:
                off[sel] = a["base"][grow] + a["delta32"][self._d32_start[s] + within]
            else:
                off[sel] = a["raw"][self._raw_start[s] + within]
            if a["sig_mask"][g] == FULL:
                msk[sel] = True
            else:
                code = a["code"][self._code_start[s] + r].astype(np.int64)
                m = j < code
                neg = np.flatnonzero(code < 0)
                if len(neg):
                    nb = (n + 7) // 8
                    jn = j[neg]
                    byte = a["bits"][self._bits_start[s[neg]] + (-code[neg] - 1) * nb + jn // 8]
                    m[neg] = (byte >> (7 - jn % 8).astype(np.uint8)) & 1
                msk[sel] = m
        return off, msk

    # -- construction from other forms -------------------------------------------------------------------------
    @staticmethod
    def from_flat(offsets, mask, counts=None, shapes=None) -> "Lanes":
        """Compact raw lane arrays. ``counts`` splits them into rows (consecutive, summing to the size) and
        ``shapes`` gives each row's block shape; without them rows of 1024 lanes are taken, 1-D."""
        offsets = np.asarray(offsets)
        mask = np.asarray(mask)
        if offsets.ndim != 1 or mask.shape != offsets.shape:
            raise ValueError(f"Lanes.from_flat: offsets and mask must be 1-D arrays of one length, got shapes "
                             f"{offsets.shape} and {mask.shape}")
        offsets = offsets.astype(np.int64, copy=False)
        mask = mask.astype(bool, copy=False)
        size = len(offsets)
        if counts is None:
            full, rest = divmod(size, _DEFAULT_ROW)
            counts = [_DEFAULT_ROW] * full + ([rest] if rest else [])
            shapes = None
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if counts.min(initial=0) < 0 or int(counts.sum()) != size:
            raise ValueError(f"Lanes.from_flat: row lengths sum to {int(counts.sum())}, not {size} lanes")
        if shapes is None:
            shapes = [(int(c),) for c in counts.tolist()]
        elif len(shapes) != len(counts):
            raise ValueError("Lanes.from_flat: one block shape per row is needed")
        w = LaneWriter()
        starts = _excl(counts)
        keys = [(c, tuple(int(v) for v in sh)) for c, sh in zip(counts.tolist(), shapes)]
        i, P = 0, len(counts)
        while i < P:          # consecutive rows of one shape go in as one block
            j = i + 1
            while j < P and keys[j] == keys[i]:
                j += 1
            n, shape = keys[i]
            if math.prod(shape) != n or min(shape, default=0) < 0 or len(shape) > MAX_RANK:
                shape = (n,)
            lo, hi = int(starts[i]), int(starts[j])
            w.add(offsets[lo:hi].reshape(j - i, n), mask[lo:hi].reshape(j - i, n), shape=shape)
            i = j
        return w.finish()

    def to_arrays(self) -> dict:
        """name -> array, every array the compact form is made of (for the trace file)."""
        return dict(self._a)

    @staticmethod
    def from_arrays(arrays: dict, size: int) -> "Lanes":
        """The inverse of ``to_arrays``. Checks every array and raises ValueError on any inconsistency."""
        _validate(arrays, size)
        return Lanes(arrays, size)


def _validate(arrays: dict, size) -> None:
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
