"""The approximate fp32 instructions an sm_90 kernel runs on its special-function unit (MUFU), bit for bit:
``rcp.approx``, ``div.full``, ``div.approx``, ``sqrt.approx``, ``rsqrt.approx``, each with and without
``.ftz``.

MUFU's results are not specified by NVIDIA. They were measured on an H100
(``benchmarks/fidelity/record_intrinsics.py --tables``, in ``gpu_2026-12-07b/tables/``): for every fp32 input
of one binade (rcp: [1, 2) and again [2, 4); sqrt and rsqrt: [1, 4), both exponent parities), the GPU's
result minus the correctly rounded one, in ulps of the result (-2..1). ``mufu_tables.npz`` ships those
offsets, two bits each (``pack``). The reciprocal's offset depends on the input's mantissa alone (the
[1, 2) and [2, 4) tables are equal entry for entry), and sqrt's and rsqrt's on the mantissa and the
exponent's parity: ``sqrt(x * 4^k) = sqrt(x) * 2^k`` exactly, and the hardware scales the same way. So a
normal input's result is the correctly rounded one of its [1, 2) or [1, 4) representative, plus the
table's offset as an integer step of the bit pattern (which carries across a binade: 1.0 - 1 ulp is
0x3f7fffff), then moved to the input's binade by adding to the exponent field.

MUFU itself flushes: a subnormal input is read as a signed zero, a result below 2^-126 becomes a signed
zero. The non-``.ftz`` PTX forms are instruction sequences around it, which Triton's own ``ptxas`` emits
for sm_90 (read with ``cuobjdump -sass``):

- ``rcp.approx.f32``: ``s = 0.25 if |x| > 2^126 else 2^24 if |x| < 2^-126 else 1``; ``s * MUFU.RCP(x * s)``.
- ``div.full.f32 x, y``: if ``|y| > 2^126`` both ``x`` and ``y`` times 0.25, if ``|y| < 2^-126`` both times 2^24;
  then ``x * MUFU.RCP(y)`` (``FMUL``, rounded to nearest, subnormals kept). ``.ftz``: the 0.25 scaling only,
  with flushing multiplies.
- ``div.approx.f32``: the 2^24 scaling only; ``.ftz``: ``x * MUFU.RCP(y)``, flushed.
- ``sqrt.approx.f32``: ``|x| < 2^-126``: ``MUFU.SQRT(x * 2^24) * 2^-12``; ``rsqrt.approx.f32``:
  ``MUFU.RSQ(x * 2^24) * 2^12``.
- the ``.ftz`` forms of rcp, sqrt and rsqrt are the MUFU instruction alone.

What the tables do not cover, and is taken from the PTX ISA's special-value tables instead: zeros,
infinities, NaN (the GPU's canonical 0x7fffffff), negative inputs of sqrt/rsqrt, and MUFU.RCP of an input
above 2^126, whose result is below 2^-126: here the offset is applied as for any input and the result
flushed to zero unless its exponent field is still at least 1 (only 1/2^126 itself, and a neighbour the
offset rounds up to it). Inputs are numpy arrays (or scalars) of float32; results float32, broadcast.
"""
from __future__ import annotations

import functools
import os

import numpy as np

_U32 = np.uint32
_NAN = _U32(0x7FFFFFFF)
_ONE = 0x3F800000
_TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mufu_tables.npz")
_TINY = np.float32(2.0 ** -126)
_HUGE = np.float32(2.0 ** 126)


@functools.lru_cache(maxsize=None)
def _packed(name: str) -> np.ndarray:
    """The 2-bit codes (offset + 2, four to a byte, the lowest first) of one table, read on first use."""
    with np.load(_TABLE_FILE) as f:
        return f[name]


def offsets(name: str, index: np.ndarray) -> np.ndarray:
    """The measured offsets (int32 ulps) of table ``name`` at ``index`` (the input's low 23 bits for rcp, 24 for
    sqrt and rsqrt: the bit pattern's distance from 1.0 within [1, 4))."""
    index = np.asarray(index, dtype=np.int64)
    codes = (_packed(name)[index >> 2] >> ((index & 3) * 2).astype(np.uint8)) & np.uint8(3)
    return codes.astype(np.int32) - 2


def pack(tables_npz: str, out: str = _TABLE_FILE) -> None:
    """Write ``mufu_tables.npz`` from ``record_intrinsics.py --tables``'s ``tables.npz``."""
    keys = {"rcp": "rcp.approx.ftz.f32", "sqrt": "sqrt.approx.ftz.f32", "rsqrt": "rsqrt.approx.ftz.f32",
            "ex2": "ex2.approx.ftz.f32_[1,_2)"}                  # (numerics/ex2.py)
    with np.load(tables_npz) as f:
        tables = {name: f[key] for name, key in keys.items()}
    packed = {}
    for name, t in tables.items():
        code = (t.astype(np.int16) + 2).astype(np.uint8)
        if code.max() > 3 or len(code) % 4:
            raise ValueError(f"{name}: offsets outside -2..1, or a length not a multiple of 4")
        packed[name] = code[0::4] | (code[1::4] << 2) | (code[2::4] << 4) | (code[3::4] << 6)
    np.savez_compressed(out, **packed)


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(_U32)       # (same width: any strides, and 0-d, view)


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormals to a zero of the same sign (MUFU's inputs and the .ftz multiplies)."""
    return np.where(np.abs(x) < _TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def _rcp_mufu(x) -> np.ndarray:
    """MUFU.RCP: ``rcp.approx.ftz.f32``."""
    x = _f32(x)
    b = _bits(x)
    sign, mag = b & _U32(0x80000000), b & _U32(0x7FFFFFFF)
    field = (mag >> _U32(23)).astype(np.int64)
    mant = (mag & _U32(0x7FFFFF)).astype(np.int64)
    rep = (mant | _ONE).astype(_U32).view(np.float32)            # the input's representative in [1, 2)
    r = (1.0 / rep.astype(np.float64)).astype(np.float32).view(_U32).astype(np.int64)
    r = r + offsets("rcp", mant) - ((field - 127) << 23)          # in the input's binade
    r = np.where(r < (1 << 23), 0, r)                             # below 2^-126: flushed
    normal = (field > 0) & (field < 255)
    out = np.where(normal, r, np.where(field == 0, 0x7F800000, 0))  # zero/subnormal -> inf, inf -> 0
    out = out.astype(_U32) | sign
    return np.where(mag > _U32(0x7F800000), _NAN, out).view(np.float32)


def _sqrt_parts(x: np.ndarray, name: str):
    """For x = rep * 4^k, rep in [1, 4): (rep's correctly rounded result plus the table's offset as int64 bit
    patterns, k, where x is normal, x's bits)."""
    b = _bits(x)
    mag = b & _U32(0x7FFFFFFF)
    field = (mag >> _U32(23)).astype(np.int64)
    index = (mag.astype(np.int64) - _ONE) & 0xFFFFFF
    rep = (index + _ONE).astype(_U32).view(np.float32).astype(np.float64)
    base = _sqrt_rn(rep) if name == "sqrt" else _rsqrt_rn(rep)
    k = (field - 127) >> 1
    r = base.view(_U32).astype(np.int64) + offsets(name, index)
    normal = (field > 0) & (field < 255)
    return r, k, normal, b


def _sqrt_rn(x64: np.ndarray) -> np.ndarray:
    """Correctly rounded fp32 sqrt of float32 values given as float64 (double's sqrt is correctly rounded,
    and 53 bits round again to 24 without a double-rounding error)."""
    return np.sqrt(x64).astype(np.float32)


def _rsqrt_rn(x64: np.ndarray) -> np.ndarray:
    """Correctly rounded fp32 1/sqrt(x) for fp32 x in [1, 4) (as float64). 1/sqrt in float64 is within 2^-52
    of the truth, so its fp32 rounding is right unless it lies that close to a midpoint between two floats;
    those are settled exactly with integers (x = X * 2^-23, midpoint m = M * 2^-25: 1/sqrt(x) > m exactly when
    M^2 * X < 2^73)."""
    r64 = 1.0 / np.sqrt(x64)
    r = r64.astype(np.float32)
    up = np.nextafter(r, np.float32(np.inf))
    down = np.nextafter(r, np.float32(0))
    near = np.minimum(np.abs(r64 - (r.astype(np.float64) + up) / 2),
                      np.abs(r64 - (r.astype(np.float64) + down) / 2)) < r64 * 2.0 ** -50
    for i in np.flatnonzero(near):
        X = int(np.float32(x64.flat[i]).view(_U32)) & 0x7FFFFF | 0x800000
        X <<= int(np.float32(x64.flat[i]).view(_U32)) >> 23 & 1 ^ 1   # [2, 4): X * 2^-22
        cands = sorted({float(down.flat[i]), float(r.flat[i]), float(up.flat[i])})
        best = cands[0]
        for lo, hi in zip(cands, cands[1:]):
            M = int((lo + hi) * 2 ** 24)                         # midpoints of (0.5, 1] are M * 2^-25
            if M * M * X < 1 << 73:                              # 1/sqrt(x) above the midpoint
                best = hi
        r.flat[i] = best
    return r


def sqrt_approx(x, ftz: bool = False) -> np.ndarray:
    """``sqrt.approx[.ftz].f32`` (``tl.sqrt`` compiles to the ``.ftz`` form)."""
    x = _f32(x)
    small = np.abs(x) < _TINY
    if ftz:
        return _sqrt_mufu(x)
    with np.errstate(all="ignore"):
        r = _sqrt_mufu(np.where(small, x * np.float32(2.0 ** 24), x))
        return np.where(small, r * np.float32(2.0 ** -12), r).astype(np.float32)


def _sqrt_mufu(x: np.ndarray) -> np.ndarray:
    r, k, normal, b = _sqrt_parts(x, "sqrt")
    neg = (b >> _U32(31)).astype(bool)
    out = np.where(normal, r + (k << 23), 0).astype(_U32)       # zero and subnormal: a zero
    out = np.where(~normal & ((b & _U32(0x7FFFFFFF)) == _U32(0x7F800000)), _U32(0x7F800000), out)
    out = out | (b & _U32(0x80000000))                            # -0 (and a flushed -subnormal) stay -0
    bad = ((b & _U32(0x7FFFFFFF)) > _U32(0x7F800000)) | (neg & (normal | (b == _U32(0xFF800000))))
    return np.where(bad, _NAN, out).view(np.float32)


def rsqrt_approx(x, ftz: bool = False) -> np.ndarray:
    """``rsqrt.approx[.ftz].f32`` (``tl.rsqrt`` compiles to the ``.ftz`` form)."""
    x = _f32(x)
    if ftz:
        return _rsqrt_mufu(x)
    small = np.abs(x) < _TINY
    with np.errstate(all="ignore"):
        r = _rsqrt_mufu(np.where(small, x * np.float32(2.0 ** 24), x))
        return np.where(small, r * np.float32(2.0 ** 12), r).astype(np.float32)


def _rsqrt_mufu(x: np.ndarray) -> np.ndarray:
    r, k, normal, b = _sqrt_parts(x, "rsqrt")
    neg = (b >> _U32(31)).astype(bool)
    mag = b & _U32(0x7FFFFFFF)
    out = np.where(normal, r - (k << 23), np.where(mag == _U32(0x7F800000), 0, 0x7F800000)).astype(_U32)
    out = out | (b & _U32(0x80000000))                            # +-0 -> +-inf
    bad = (mag > _U32(0x7F800000)) | (neg & (normal | (mag == _U32(0x7F800000))))
    return np.where(bad, _NAN, out).view(np.float32)


def rcp_approx(x, ftz: bool = False) -> np.ndarray:
    """``rcp.approx[.ftz].f32``."""
    x = _f32(x)
    if ftz:
        return _rcp_mufu(x)
    ax = np.abs(x)
    s = np.where(ax > _HUGE, np.float32(0.25), np.where(ax < _TINY, np.float32(2.0 ** 24), np.float32(1)))
    with np.errstate(all="ignore"):
        return _canon(s * _rcp_mufu(x * s))


def div_full(x, y, ftz: bool = False, constant_divisor: bool = False) -> np.ndarray:
    """``div.full[.ftz].f32 x, y``: fp32 ``x / y`` and ``tl.fdiv`` compile to it. ``constant_divisor``: ``y`` is
    an immediate of the PTX, and ptxas folds MUFU.RCP of the scaled constant to its correctly rounded
    reciprocal (the scaling stays; read from the SASS of Triton 3.6's and 3.9's ptxas)."""
    x, y = np.broadcast_arrays(_f32(x), _f32(y))
    rcp = _rcp_rn if constant_divisor else _rcp_mufu
    ay = np.abs(y)
    big = ay > _HUGE
    with np.errstate(all="ignore"):
        if ftz:
            x, y = _flush(x), _flush(y)
            x = _flush(np.where(big, x * np.float32(0.25), x))
            y = np.where(big, y * np.float32(0.25), y)
            return _canon(_flush(rcp(y) * x))
        small = ay < _TINY
        scale = np.where(big, np.float32(0.25), np.where(small, np.float32(2.0 ** 24), np.float32(1)))
        return _canon(rcp(y * scale) * (x * scale))


def div_approx(x, y, ftz: bool = False, constant_divisor: bool = False) -> np.ndarray:
    """``div.approx[.ftz].f32 x, y`` (Triton 3.9's ``tl.fdiv(..., approx=True)``): no scaling of a divisor above
    2^126, whose reciprocal MUFU flushes to zero. ``constant_divisor`` as for div_full."""
    x, y = np.broadcast_arrays(_f32(x), _f32(y))
    rcp = _rcp_rn if constant_divisor else _rcp_mufu
    with np.errstate(all="ignore"):
        if ftz:
            return _canon(_flush(rcp(y) * _flush(x)))
        scale = np.where(np.abs(y) < _TINY, np.float32(2.0 ** 24), np.float32(1))
        return _canon(rcp(y * scale) * (x * scale))


def _rcp_rn(y: np.ndarray) -> np.ndarray:
    """The correctly rounded reciprocal (what ptxas folds a constant's MUFU.RCP to)."""
    with np.errstate(all="ignore"):
        return (1.0 / y.astype(np.float64)).astype(np.float32)


def _canon(r: np.ndarray) -> np.ndarray:
    """A NaN result as the GPU writes every arithmetic NaN: 0x7fffffff."""
    r = _f32(r)
    return np.where(np.isnan(r), _NAN.view(np.float32), r).astype(np.float32)
