"""Lanes: the immutable compact form of a launch's lanes, decoded on demand (all, some rows or ranges)."""
from __future__ import annotations

import weakref

import numpy as np

from .encoding import (AFFINE, ARRAYS, DELTA32, FULL, RAW, ROWS, ROWSTRIDES, Cache, exclusive_starts, pattern, ranges,
                       readonly, unravel, validate)


class Lanes:
    """Every lane of a launch, compact. Immutable; decodes on demand (all lanes, or a few ranges)."""

    def __init__(self, arrays: dict, size: int):
        self._a = {k: readonly(np.asarray(arrays[k]).view()) for k in ARRAYS}   # read-only views
        self.size = int(size)
        a = self._a
        sig = a["seg_sig"].astype(np.intp)
        self._seg_n = a["sig_n"][sig]
        self._seg_kind = a["sig_offs"][sig]
        self._seg_maskkind = a["sig_mask"][sig]
        self._seg_nd = a["sig_ndim"][sig].astype(np.int64)
        rows = a["seg_rows"]
        lanes = rows * self._seg_n
        self._lane_start = exclusive_starts(lanes)
        self._row_start = exclusive_starts(rows)
        self._rs_start = exclusive_starts(np.where(self._seg_kind == ROWSTRIDES, rows * self._seg_nd, 0))
        coded = self._seg_maskkind == ROWS
        self._code_start = exclusive_starts(np.where(coded, rows, 0))
        self._d32_start = exclusive_starts(np.where(self._seg_kind == DELTA32, lanes, 0))
        self._raw_start = exclusive_starts(np.where(self._seg_kind == RAW, lanes, 0))
        code_seg = np.repeat(np.flatnonzero(coded), rows[coded])
        self._bitrows = np.bincount(code_seg[a["code"] < 0], minlength=len(sig)).astype(np.int64) \
            if len(code_seg) == len(a["code"]) else np.zeros(len(sig), np.int64)
        self._bits_start = exclusive_starts(self._bitrows * ((self._seg_n + 7) // 8))
        self._helpers = Cache()
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
            arr = readonly(build())
            self._expanded[name] = weakref.ref(arr)
        return arr

    def _sig_rows(self, g: int):
        """Segments of signature g, and each of their rows as (segment, row within the segment)."""
        segs = np.flatnonzero(self._a["seg_sig"] == g)
        rows = self._a["seg_rows"][segs]
        seg = np.repeat(segs, rows)
        return segs, seg, ranges(np.zeros(len(segs), np.int64), rows)

    def _pattern(self, g: int) -> np.ndarray:
        a = self._a
        nd = int(a["sig_ndim"][g])
        shape, strides = tuple(a["sig_shape"][g, :nd].tolist()), tuple(a["sig_strides"][g, :nd].tolist())
        return self._helpers.get(("p", g), lambda: pattern(shape, strides))

    def _unravel(self, g: int) -> np.ndarray:
        nd = int(self._a["sig_ndim"][g])
        return self._helpers.get(("u", g), lambda: unravel(tuple(self._a["sig_shape"][g, :nd].tolist())))

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
        return readonly(self._pattern(int(signature)).view())

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
            if np.array_equal(starts, exclusive_starts(counts)[:-1]):
                return self.offsets(), self.mask()
            order = np.argsort(starts, kind="stable")
            s, c = starts[order], counts[order]
            if s[0] == 0 and np.array_equal(s[1:], (s + c)[:-1]):      # every lane once, rows reordered
                lanes = ranges(starts, counts)
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
        return self._decode(ranges(starts, counts))

    def _gather_rows(self, seg, r, counts) -> tuple:
        """Whole rows (row r[i] of segment seg[i]), decoded row-wise by signature and placed in order."""
        sig = self._a["seg_sig"][seg]
        if len(sig) and sig.min() == sig.max() and counts[0] > 0:      # one signature: no scatter
            g = int(sig[0])
            return (self._rows(g, seg, r, "offsets").reshape(-1), self._rows(g, seg, r, "mask").reshape(-1))
        off = np.empty(int(counts.sum()), dtype=np.int64)
        msk = np.empty(len(off), dtype=bool)
        at = exclusive_starts(counts)[:-1]
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

    # -- the file form ---------------------------------------------------------------------------------------------
    def to_arrays(self) -> dict:
        """name -> array, every array the compact form is made of (for the trace file)."""
        return dict(self._a)

    @staticmethod
    def from_arrays(arrays: dict, size: int) -> "Lanes":
        """The inverse of ``to_arrays``. Checks every array and raises ValueError on any inconsistency."""
        validate(arrays, size)
        return Lanes(arrays, size)
