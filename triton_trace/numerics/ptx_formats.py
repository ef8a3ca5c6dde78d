"""Bits of the PTX float formats, for ptx_float's arithmetic and ``cvt``: decoding to float64, rounding an
exact float64 pair once to f16/bf16/f32/f64 in any mode, the canonical NaNs the GPU writes, fp8 and fp4
codes, and float-to-integer conversion with the GPU's saturation and NaN results."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .ptx import WIDTH, PtxUnsupported, mask
from .rounding import _FP8_TABLES, round_to

_U64 = np.uint64
# the NaN an arithmetic instruction writes for any NaN result (sm_90, measured: f64's is not all ones)
NAN = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FF8000000000000}
FRAC = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}


def decode(bits: np.ndarray, t: str) -> np.ndarray:
    """float64 values of ``t`` bit patterns (exact)."""
    bits = np.asarray(bits, dtype=_U64)
    with np.errstate(invalid="ignore"):          # (a signalling NaN widened)
        return _decode(bits, t)


def _decode(bits, t):
    if t == "f64":
        return bits.view(np.float64).copy()
    if t == "f32":
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if t == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    raise PtxUnsupported(f"float type .{t}")


def _step(bits: np.ndarray, t: str, away: np.ndarray) -> np.ndarray:
    """The neighbour of a finite-or-inf pattern one ulp away from (``away``) or toward zero."""
    w = WIDTH[t]
    sign = _U64(1 << (w - 1))
    mag = bits & (sign - _U64(1))
    with np.errstate(over="ignore"):
        mag = np.where(away, mag + _U64(1), np.where(mag == 0, mag, mag - _U64(1)))
    return (bits & sign) | mag


def encode(s, e, t: str, mode: str = "rn") -> np.ndarray:
    """Bits of the exact value ``s + e`` (float64 pair) rounded once to ``t`` in ``mode`` (rn rz rd ru)."""
    s = np.asarray(s, dtype=np.float64)
    e = np.broadcast_to(np.asarray(e, dtype=np.float64), s.shape)
    with np.errstate(all="ignore"):
        if t in ("f32", "f64"):
            np_t = np.float32 if t == "f32" else np.float64
            r = round_to(s, e, np_t, mode).astype(np_t)
            return r.view(np.uint32 if t == "f32" else np.uint64).astype(_U64)
        # narrow: to nearest first (via round-to-odd fp32, single-rounded), then step for a directed mode
        from .rounding import f32_to_bf16, to_odd_f32
        odd = to_odd_f32(s, e)
        bits = (f32_to_bf16(odd) if t == "bf16" else odd.astype(np.float16).view(np.uint16)).astype(_U64)
        if mode == "rn":
            return bits
        r = decode(bits, t)
        above = (r > s) | ((r == s) & (e < 0))       # rounded value above the exact one
        below = (r < s) | ((r == s) & (e > 0))
        neg = np.signbit(r)
        if mode == "rz":
            fix = np.where(neg, below, above)
            return np.where(fix & ~np.isnan(s), _step(bits, t, np.zeros_like(fix)), bits)
        fix = above if mode == "rd" else below
        away = (mode == "rd") == neg                 # rd: more negative is away from zero when negative
        return np.where(fix & ~np.isnan(s), _step(bits, t, np.broadcast_to(away, fix.shape)), bits)


def nan_fix(bits, v, t):
    return np.where(np.isnan(v), _U64(NAN[t]), bits)

# cvt of a NaN to an integer: 0 as the PTX ISA says, except where sm_90 was measured to differ
INT_NAN = {("f64", "s64"): 1 << 63}


def to_int(x: np.ndarray, t: str, mode: str, nan_bits: int = 0) -> np.ndarray:
    """float64 to integer type ``t``: rounded in ``mode``, saturating, NaN to ``nan_bits`` (PTX cvt)."""
    r = to_int_float(x, mode)
    w = WIDTH[t]
    sgn = t[0] == "s"
    lo, past = (-(2.0 ** (w - 1)), 2.0 ** (w - 1)) if sgn else (0.0, 2.0 ** w)
    over, under, nan = r >= past, r < lo, np.isnan(r)
    safe = np.where(over | under | nan, 0.0, r)
    with np.errstate(invalid="ignore"):
        big = safe >= 2.0 ** 63
        out = np.where(big, (np.where(big, safe, 0.0) - 2.0 ** 63).astype(np.int64).view(_U64) + _U64(1 << 63),
                       np.where(big, 0.0, safe).astype(np.int64).view(_U64))
    top = _U64((1 << (w - 1)) - 1 if sgn else (1 << w) - 1)
    bottom = _U64((1 << (w - 1)) if sgn else 0)
    out = np.where(over, top, np.where(under, bottom, out))
    return np.where(nan, _U64(nan_bits), out) & mask(w)


def fp8_encode(x: np.ndarray, fmt: str, satfinite: bool) -> np.ndarray:
    """Nearest fp8 code (ties to even) of float64 values; satfinite clamps to the largest finite."""
    table = _FP8_TABLES["fp8e4nv" if fmt == "e4m3" else "fp8e5"].astype(np.float64)
    pos = table[:0x80]
    finite = np.isfinite(pos)
    codes = np.arange(0x80)[finite]
    vals = pos[finite]
    order = np.argsort(vals, kind="stable")
    codes, vals = codes[order], vals[order]
    a = np.abs(x)
    i = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
    lo, hi = vals[i - 1], vals[i]
    take_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (codes[i] % 2 == 0))
    code = np.where(take_hi, codes[i], codes[i - 1])
    top = vals[-1]
    if satfinite:
        code = np.where(a > top, codes[-1], code)
    else:                          # past the largest finite by half an ulp or more: Inf (e5m2), NaN (e4m3)
        code = np.where(a >= top + (top - vals[-2]) / 2, 0x7C if fmt == "e5m2" else 0x7F, code)
    code = np.where(np.signbit(x), code | 0x80, code)
    return np.where(np.isnan(x), 0x7F, code).astype(_U64)


FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])      # e2m1 codes 0-7; bit 3 is the sign


def fp4_encode(x: np.ndarray) -> np.ndarray:
    """Nearest e2m1 code (ties to the even code), saturating at 6 (``.satfinite``, which PTX requires).
    A NaN input, which PTX does not define for this format, gives +6 (code 7)."""
    a = np.abs(x)
    i = np.clip(np.searchsorted(FP4, a), 1, 7)
    lo, hi = FP4[i - 1], FP4[i]
    take_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(a >= 6.0, 7, np.where(take_hi, i, i - 1))
    code = np.where(np.signbit(x) & ~np.isnan(x), code | 8, code)
    return np.where(np.isnan(x), 7, code).astype(_U64)


def to_int_float(x, mode):
    with np.errstate(invalid="ignore"):              # (NaN stays NaN)
        return {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode](x)


def widen_nan(src, src_t, dst_t):
    sw, dw = WIDTH[src_t], WIDTH[dst_t]
    sign = (src >> _U64(sw - 1)) & _U64(1)
    payload = src & _U64((1 << FRAC[src_t]) - 1)
    exp_bits = dw - 1 - FRAC[dst_t]
    quiet = _U64(1 << (FRAC[dst_t] - 1))
    return (sign << _U64(dw - 1)) | (mask(exp_bits) << _U64(FRAC[dst_t])) | quiet | \
        (payload << _U64(FRAC[dst_t] - FRAC[src_t]))


def cvt_nan(src, src_t: str, dst_t: str) -> np.ndarray:
    """The bits ``cvt`` between two float types writes for a NaN ``src``, as measured on sm_90: f32 to f64
    keeps the payload (quietened), f16 to f32 gives the canonical 0x7FFFFFFF, f64 to f32 keeps the payload's top
    bits (quietened: 0x7FF8... is 0x7FC00000), and
    a narrowing to f16/bf16 the canonical 0x7FFF."""
    if (src_t, dst_t) == ("f64", "f32"):         # the payload's top 22 bits, quietened
        src = np.asarray(src, dtype=_U64)
        return ((src >> _U64(32)) & _U64(0x80000000)) | _U64(0x7FC00000) | ((src >> _U64(29)) & _U64(0x3FFFFF))
    if WIDTH[dst_t] > WIDTH[src_t] and (src_t, dst_t) != ("f16", "f32"):
        return widen_nan(src, src_t, dst_t)
    return np.full(np.shape(src), _U64(NAN[dst_t]))


def round_rational_f64(q: Fraction, mode: str) -> int:
    """Bits of an exact rational rounded to f64 in ``mode`` (rn rz rd ru), overflow and subnormals included;
    an exact zero is +0, or -0 when rounding down (IEEE 754's sign of an exact zero sum)."""
    if q == 0:
        return 1 << 63 if mode == "rd" else 0
    try:
        f = float(q)                               # to nearest, correctly (CPython's integer division)
    except OverflowError:
        f = math.inf if q > 0 else -math.inf
    past = math.isinf(f)
    if mode == "rz" and (past or abs(Fraction(f)) > abs(q)):
        f = np.nextafter(f, 0.0)
    elif mode == "rd" and (f == math.inf or (not past and Fraction(f) > q)):
        f = np.nextafter(f, -math.inf)
    elif mode == "ru" and (f == -math.inf or (not past and Fraction(f) < q)):
        f = np.nextafter(f, math.inf)
    return int(np.float64(f).view(np.uint64))
