"""Exact float rounding in numpy: bfloat16 encoding, directed rounding modes, error-free transformations.

Everything is elementwise numpy that broadcasts, so it works on a block and on a block with a leading
program axis alike. The directed modes follow IEEE 754: ``rn`` nearest-even, ``rz`` toward zero, ``rd``
toward -inf, ``ru`` toward +inf. A value is passed as ``s + e``: ``s`` the float64 nearest the exact result
and ``e`` the (float64) rest, from ``two_sum`` / ``two_prod``; only the sign of ``e`` matters once ``s`` is
known, which is what makes single-rounded results exact without wider floats.
"""
from __future__ import annotations

import numpy as np

MODES = ("rn", "rz", "rd", "ru")
_SPLIT = 134217729.0     # 2**27 + 1, Veltkamp's splitter for float64


def two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth). e is 0 where s is not finite."""
    with np.errstate(all="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def two_prod(a, b):
    """(p, e) with p = fl(a * b) and a * b = p + e exactly (Dekker), barring overflow and underflow."""
    with np.errstate(all="ignore"):
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, np.where(np.isfinite(p), e, 0.0)


def fma64(a, b, c):
    """(r, e): r the float64 fma(a, b, c) rounded once to nearest, e the sign-carrying rest. Boldo and
    Melquiond's emulation: exact product and sum, the low parts added with rounding to odd, one last rounding.
    A finite product past float64's range is not an infinity to fma: with an infinite ``c`` the result is
    ``c`` (an H100's fma.rn.f64: 2.5 * DBL_MAX + inf is inf, not NaN), and with a finite one the sum is
    taken a quarter the size, where the product fits (past 2^1026 no finite c brings it back in range)."""
    r, e = _fma64(a, b, c)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(r) & np.isfinite(a) & np.isfinite(b)
        if np.any(bad):
            big = bad & np.isfinite(c) & ~np.isfinite(a * b)
            scaled = np.where(big, _fma64(a * 0.25, b, c * 0.25)[0] * 4.0, r)
            r = np.where(bad & np.isinf(c), c, np.where(big, scaled, r))
    return r, e


def _fma64(a, b, c):
    with np.errstate(all="ignore"):
        uh, ul = two_prod(a, b)
        th, tl = two_sum(c, uh)
        lo, lo_e = two_sum(tl, ul)
        bits = lo.view(np.int64)
        odd = np.where((lo_e != 0) & ((bits & 1) == 0), np.nextafter(lo, np.where(lo_e > 0, np.inf, -np.inf)), lo)
        r = th + odd
        q, qe = two_sum(th, -r)
        rest = (q + tl) + (qe + ul)
        exact = np.isfinite(r)
        return np.where(exact, r, a * b + c), np.where(exact, rest, 0.0)


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _cmp_exact(r, s, e):
    """(exact > r, exact < r) for exact = s + e, r a float no finer than float64 near s."""
    r = r.astype(np.float64)
    return (s > r) | ((s == r) & (e > 0)), (s < r) | ((s == r) & (e < 0))


def round_to(s, e, dtype, mode: str = "rn"):
    """Round the exact value s + e (float64 pair) to float32 or float64 with an IEEE rounding mode."""
    s = np.asarray(s, dtype=np.float64)
    e = np.broadcast_to(np.asarray(e, dtype=np.float64), s.shape) if np.ndim(e) else np.full(s.shape, float(e))
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        if dtype == np.float64:
            r = s.copy()
            if mode == "rn":
                return r
            above, below = e > 0, e < 0
        else:
            r = s.astype(dtype)
            above, below = _cmp_exact(r, s, e)
            if mode == "rn":
                return _nearest_fix(r, s, e, dtype)
        pos = (s > 0) | ((s == 0) & (e > 0))
        down = np.nextafter(r, np.asarray(-np.inf, dtype)).astype(dtype)
        up = np.nextafter(r, np.asarray(np.inf, dtype)).astype(dtype)
        if mode == "rd":
            return np.where(below, down, r)
        if mode == "ru":
            return np.where(above, up, r)
        if mode == "rz":
            return np.where(pos, np.where(below, down, r), np.where(above, up, r))
    raise ValueError(f"unknown rounding mode {mode!r}; use one of {MODES}")


def _nearest_fix(r, s, e, dtype):
    # fl32(s) is the nearest float32 to s + e unless s lies exactly halfway between two float32 values and
    # e pushes the exact value off the tie: then the neighbour on e's side is nearer.
    lo = np.nextafter(r, np.asarray(-np.inf, dtype)).astype(dtype)
    hi = np.nextafter(r, np.asarray(np.inf, dtype)).astype(dtype)
    r64, lo64, hi64 = r.astype(np.float64), lo.astype(np.float64), hi.astype(np.float64)
    tie_hi = (s - r64 == hi64 - s) & (hi64 != r64) & (s > r64)
    tie_lo = (r64 - s == s - lo64) & (lo64 != r64) & (s < r64)
    out = np.where(tie_hi & (e > 0), hi, r)
    return np.where(tie_lo & (e < 0), lo, out).astype(dtype)


def to_odd_f32(s, e=0.0):
    """float32 of s + e rounded to odd: truncate, and set the last bit when inexact. Rounding that to a
    narrower format (bfloat16, float16) to nearest gives the exact value's single rounding."""
    s = np.asarray(s, dtype=np.float64)
    t = round_to(s, e, np.float32, "rz")
    inexact = (t.astype(np.float64) != s) | (np.asarray(e) != 0)
    bits = t.view(np.uint32)
    odd = np.where(inexact & np.isfinite(t), bits | np.uint32(1), bits)
    return odd.astype(np.uint32).view(np.float32)


# --------------------------------------------------------------------------------------------------------
# bfloat16 (the interpreter stores it as uint16 bit patterns)
# --------------------------------------------------------------------------------------------------------
def bf16_to_f32(bits):
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x, mode: str = "rn"):
    """bfloat16 bit patterns (uint16) of float32 values: nearest-even (what cvt.rn.bf16.f32 does) or
    toward zero; NaN becomes 0x7FFF as on the GPU."""
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32)
    if mode == "rz":
        out = b >> np.uint32(16)
    else:
        with np.errstate(over="ignore"):
            out = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = np.where(np.isnan(x), np.uint32(0x7FFF), out)        # the GPU's canonical NaN
    return out.astype(np.uint16)


def f32_to_f16(x, mode: str = "rn"):
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        r = x.astype(np.float16)
        if mode == "rz":
            too_far = np.abs(r.astype(np.float32)) > np.abs(x)
            r = np.where(too_far & np.isfinite(x), np.nextafter(r, np.float16(0)), r)
    return r.astype(np.float16)


def f64_to_narrow(x, np_dtype, is_bf16: bool, mode: str = "rn"):
    """float64 values rounded once to bfloat16 (as uint16 bits) or float16."""
    x = np.asarray(x, dtype=np.float64)
    mid = to_odd_f32(x) if mode == "rn" else round_to(x, 0.0, np.float32, "rz")
    return f32_to_bf16(mid, mode) if is_bf16 else f32_to_f16(mid, mode).astype(np_dtype)


# --------------------------------------------------------------------------------------------------------
# fp8 (the interpreter stores it as uint8 bit patterns)
# --------------------------------------------------------------------------------------------------------
_FP8 = {"fp8e5": (5, 2, 15, True), "fp8e4nv": (4, 3, 7, False)}     # exponent bits, mantissa bits, bias, has Inf


def _fp8_table(fmt: str) -> np.ndarray:
    """The value of each of the 256 codes of an fp8 format, as float32 (every one is exact there)."""
    e_bits, m_bits, bias, has_inf = _FP8[fmt]
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> m_bits) & ((1 << e_bits) - 1)
    man = codes & ((1 << m_bits) - 1)
    # subnormals (exp 0) are man * 2^(1 - bias - m_bits): the conversion a GPU's cvt performs exactly
    mag = np.where(exp == 0, man * 2.0 ** (1 - bias - m_bits), (1 + man / 2.0 ** m_bits) * 2.0 ** (exp - bias))
    top = (1 << e_bits) - 1
    if has_inf:        # e5m2: IEEE-like, the top exponent is Inf (mantissa 0) or NaN
        mag = np.where((exp == top) & (man == 0), np.inf, np.where(exp == top, np.nan, mag))
    else:              # e4m3fn: no Inf; only S.1111.111 is NaN
        mag = np.where((exp == top) & (man == (1 << m_bits) - 1), np.nan, mag)
    return (sign * mag).astype(np.float32)


_FP8_TABLES = {fmt: _fp8_table(fmt) for fmt in _FP8}


def fp8_to_f32(bits, fmt: str) -> np.ndarray:
    """float32 values of fp8 bit patterns (uint8) in Triton's format ``fmt`` ("fp8e5" = e5m2, "fp8e4nv" =
    e4m3fn), subnormals included: exact, so a further cast to fp16, bf16 or fp64 rounds as the GPU's
    single ``cvt`` does (every fp8 value is exact in fp16 and bf16 as well)."""
    return _FP8_TABLES[fmt][np.asarray(bits).astype(np.uint8)]
