"""LaneWriter: encodes blocks of lanes as they are recorded (see the package docstring for the encoding)."""
from __future__ import annotations

import array
import math
from typing import Optional

import numpy as np

from .encoding import (AFFINE, ARRAYS, DEFAULT_ROW, DELTA32, FULL, MAX_RANK, POOLS, RAW, ROWS, ROWSTRIDES, Cache,
                       core, exclusive_starts, pattern, unravel)
from .reader import Lanes


class LaneWriter:
    """Appends blocks of lanes, encoding each as it comes; ``finish`` hands back an immutable Lanes."""

    def __init__(self):
        self._pools = {name: array.array(code) for name, code in POOLS.items()}
        self._sigs: dict = {}              # signature tuple -> id
        self._sig_list: list = []
        self._seg_sig = array.array("i")
        self._seg_rows = array.array("q")
        self._seg_bitrows = 0              # bit-packed rows in the last segment (their codes count on)
        self._lanes = 0
        self._patterns = Cache()
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

    def add(self, offsets: np.ndarray, mask: np.ndarray, shape: Optional[tuple] = None, affine: bool = False) -> int:
        """Append one block of R rows of n lanes (int64 offsets and bool mask, shape (R, n), the mask may
        be a broadcast view); ``shape`` is the block shape of one row (product n), used to find strides.
        ``affine``: the caller knows every row is its first offset plus one pattern over ``shape`` (the
        same strides in every row), so the rows are not compared with it again. Returns the lane index of
        the block's first lane."""
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
            shape, affine = (n,), False
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
        elif affine:
            self._add_affine_rows(o, m, shape, n)
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
            pat = self._patterns.get((shape, s), lambda: pattern(shape, s))
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

    def add_affine(self, first: np.ndarray, strides: tuple, mask: np.ndarray, shape: tuple) -> int:
        """``add`` for rows given as every row's first offset plus one pattern of ``strides`` over ``shape``
        (``affine=True`` without the offsets themselves: nothing per lane is built). Returns the lane index
        of the block's first lane."""
        n = math.prod(shape)
        if not n or len(first) < 2 or len(shape) > MAX_RANK or len(strides) != len(shape):
            offsets = first.reshape((-1,) + (1,) * len(shape)) + pattern(tuple(shape), tuple(strides))
            return self.add(offsets.reshape(len(first), -1), mask, shape, affine=True)
        self._check_open()
        m = mask if mask.dtype == np.bool_ else mask.astype(bool)
        m = np.broadcast_to(m.reshape(len(first), n) if m.size == len(first) * n else m, (len(first), n))
        start = self._lanes
        s0 = tuple(_wrap(int(s)) if size > 1 else 0 for s, size in zip(strides, shape))
        self._add_affine(np.array(first, dtype=np.int64), s0, m, tuple(shape), n)
        return start

    def _add_affine_rows(self, o, m, shape, n) -> None:
        """``_add_rows`` for rows known to share one pattern: the one segment it would make."""
        base = o[:, 0].copy()
        self._add_affine(base, tuple(_wrap(int(o[0, k]) - int(base[0])) if k else 0 for k in _probe(shape)), m,
                         shape, n)

    def _add_affine(self, base, s0, m, shape, n) -> None:
        code = self._mask_codes(m, n)
        self._append(len(base), (AFFINE, n, shape, s0), base, None, None, None, code, m if code is not None else None)

    @staticmethod
    def _mask_codes(m, n):
        """None when every row's mask is full, else per row: its active-lane count when the active lanes
        are a prefix, -1 otherwise."""
        if core(m).all():           # (a broadcast mask: its distinct values only)
            return None
        cnt = np.count_nonzero(m, axis=1)
        prefix = (m == (np.arange(n) < cnt[:, None])).all(axis=1)
        return np.where(prefix, cnt, -1).astype(np.int32)

    def _add_rows(self, o, m, shape, n) -> None:
        R = o.shape[0]
        base = o[:, 0].copy()
        rel = o - base[:, None]
        s = rel[:, _probe(shape)]                  # (R, ndim) strides, if the row is affine
        same_prev = np.ones(R, dtype=bool)         # a row's strides equal the previous row's
        same_prev[1:] = (s[1:] == s[:-1]).all(axis=1)
        if same_prev.all():                        # one set of strides (a batch of one op): one pattern
            s0 = tuple(s[0].tolist())
            pat = self._patterns.get((shape, s0), lambda: pattern(shape, s0))
            ok = (rel == pat).all(axis=1)
            kind = np.where(ok, AFFINE, DELTA32)
        else:
            # rows of several ops, or strides that vary by program: runs of equal strides share them, a
            # row whose strides match neither neighbour keeps its own (ROWSTRIDES)
            u = self._patterns.get((shape, "u"), lambda: unravel(shape))
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

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_patterns"] = None              # a memo, rebuilt where the writer is used next
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._patterns = Cache()

    def extend(self, other: "LaneWriter") -> None:
        """Append every block ``other`` holds, as if each had been added here after this writer's own (the
        lanes a worker process recorded for later programs: record/parallel/). ``add`` merges a block into the
        last segment when their signatures agree, which only the segments' boundaries decide: each of
        ``other``'s segments is merged here where ``add`` would have merged its first block, its rows' mask
        codes completed (full rows in a coded segment) and its bit-packed rows numbered on, so the result is
        what one writer fed every block in order holds, array for array."""
        self._check_open()
        other._check_open()
        codes = np.frombuffer(other._pools["code"], dtype=np.int32) if len(other._pools["code"]) else \
            np.zeros(0, np.int32)
        at = 0
        out = self._pools["code"]
        for sig_id, rows in zip(other._seg_sig, other._seg_rows):
            sig = other._sig_list[sig_id]
            key, mask_kind = sig[:4], sig[4]
            last = self._sig_list[self._seg_sig[-1]] if len(self._seg_sig) else None
            merge = last is not None and last[:4] == key and (last[4] == mask_kind or last[4] == ROWS)
            bit_rows = 0
            if mask_kind == ROWS:
                code = codes[at:at + rows]
                at += rows
                neg = code < 0
                bit_rows = int(neg.sum())
                if merge and bit_rows and self._seg_bitrows:
                    code = np.where(neg, code - self._seg_bitrows, code).astype(np.int32)
                out.frombytes(np.ascontiguousarray(code, dtype=np.int32).tobytes())
            elif merge and last[4] == ROWS:            # full rows joining coded ones: coded as full
                out.frombytes(np.full(rows, key[1], dtype=np.int32).tobytes())
            if merge:
                self._seg_rows[-1] += rows
                self._seg_bitrows += bit_rows
            else:
                self._seg_sig.append(self._sig(key, mask_kind))
                self._seg_rows.append(rows)
                self._seg_bitrows = bit_rows
        for name, pool in self._pools.items():
            if name != "code":
                pool.extend(other._pools[name])
        self._lanes += other._lanes

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


def lanes_from_flat(offsets, mask, counts=None, shapes=None) -> Lanes:
    """Compact raw lane arrays. ``counts`` splits them into rows (consecutive, summing to the size) and
    ``shapes`` gives each row's block shape; without them rows of 1024 lanes are taken, 1-D."""
    offsets = np.asarray(offsets)
    mask = np.asarray(mask)
    if offsets.ndim != 1 or mask.shape != offsets.shape:
        raise ValueError(f"lanes_from_flat: offsets and mask must be 1-D arrays of one length, got shapes "
                         f"{offsets.shape} and {mask.shape}")
    offsets = offsets.astype(np.int64, copy=False)
    mask = mask.astype(bool, copy=False)
    size = len(offsets)
    if counts is None:
        full, rest = divmod(size, DEFAULT_ROW)
        counts = [DEFAULT_ROW] * full + ([rest] if rest else [])
        shapes = None
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    if counts.min(initial=0) < 0 or int(counts.sum()) != size:
        raise ValueError(f"lanes_from_flat: row lengths sum to {int(counts.sum())}, not {size} lanes")
    if shapes is None:
        shapes = [(int(c),) for c in counts.tolist()]
    elif len(shapes) != len(counts):
        raise ValueError("lanes_from_flat: one block shape per row is needed")
    w = LaneWriter()
    starts = exclusive_starts(counts)
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
