"""Microscaling (OCP MX) numbers in numpy: the element formats ``tl.dot_scaled`` takes, its block scales, and
the arithmetic compiled code does with them before its dot on GPUs without native MX instructions.

Element formats, each a code per byte except fp4, which Triton packs two to a uint8 (the first element in the
low nibble); ``decode`` gives every code's exact value as float32:

======  ====  ========================================================================
e2m1    fp4   bias 1, subnormal 0.5, largest 6; no Inf, no NaN
e2m3    fp6   bias 1, subnormal 1/8, largest 7.5; no Inf, no NaN (one code per uint8)
e3m2    fp6   bias 3, subnormal 1/16, largest 28; no Inf, no NaN (one code per uint8)
e4m3    fp8   e4m3fn: bias 7, largest 448; no Inf, NaN only at S.1111.111 (0x7F, 0xFF)
e5m2    fp8   IEEE-like: bias 15, top exponent Inf (mantissa 0) or NaN
bf16          the bit pattern (uint16)
fp16          numpy's float16
======  ====  ========================================================================

Scales: e8m0 (uint8 ``s``: 2^(s-127), 0xFF NaN, one per 32 elements along K) or, for NVFP4, e4m3 (one per 16).

What a GPU without MX tensor cores computes (Triton's decomposition of ``tt.dot_scaled``, used on sm_80 and
sm_90): each operand is converted to the compute type (fp16 if either operand is fp16, else bf16) exactly
(fp4/fp6/fp8 fit both; bf16 to fp16 rounds to nearest even), its scale is built in that type, not as the
exact power of two (bf16: the bits ``s << 7``, so s = 0 is 0 rather than 2^-127 and 0xFF is Inf; fp16: the
float32 ``s << 23`` rounded to fp16, so 2^-25 and below become 0 and 2^16 and above Inf), the two are
multiplied in the compute type (one rounding to nearest even), and an operand element whose e8m0 scale is
0xFF is replaced by the type's quiet NaN unless ``fast_math``. ``scaled_operand`` is that, element for element.
"""
from __future__ import annotations

import numpy as np

from . import rounding

# name -> (exponent bits, mantissa bits, bias, special values: "none", "fn" (NaN at all ones) or "ieee")
FORMATS = {
    "e2m1": (2, 1, 1, "none"),
    "e2m3": (2, 3, 1, "none"),
    "e3m2": (3, 2, 3, "none"),
    "e4m3": (4, 3, 7, "fn"),
    "e5m2": (5, 2, 15, "ieee"),
}
COMPUTE_TYPES = ("bf16", "fp16")
# APFloat::getNaN of the compute type: the constant the NaN mask selects
_QUIET_NAN = {"bf16": np.uint16(0x7FC0), "fp16": np.uint16(0x7E00)}


def _table(fmt: str) -> np.ndarray:
    """The exact value of every code of a minifloat format, as float32 (each one is representable there)."""
    e_bits, m_bits, bias, special = FORMATS[fmt]
    codes = np.arange(1 << (1 + e_bits + m_bits), dtype=np.int64)
    sign = np.where(codes >> (e_bits + m_bits) & 1, -1.0, 1.0)
    exp = (codes >> m_bits) & ((1 << e_bits) - 1)
    man = codes & ((1 << m_bits) - 1)
    # an exponent field of 0 is subnormal: man * 2^(1 - bias - m_bits), no implicit leading one
    mag = np.where(exp == 0, man * 2.0 ** (1 - bias - m_bits),
                   (1.0 + man / 2.0 ** m_bits) * 2.0 ** (exp - bias))
    top = (1 << e_bits) - 1
    if special == "ieee":
        mag = np.where((exp == top) & (man == 0), np.inf, np.where(exp == top, np.nan, mag))
    elif special == "fn":
        mag = np.where((exp == top) & (man == (1 << m_bits) - 1), np.nan, mag)
    return (sign * mag).astype(np.float32)


_TABLES = {fmt: _table(fmt) for fmt in FORMATS}


def _bytes(data) -> np.ndarray:
    """uint8 codes: one-byte arrays (uint8, int8, fp8 bits) reinterpreted, wider integers narrowed."""
    data = np.asarray(data)
    return data.view(np.uint8) if data.dtype.itemsize == 1 else data.astype(np.uint8)


def table(fmt: str) -> np.ndarray:
    """The value of each code of ``fmt`` (index = code), float32; a copy the caller may change."""
    return _TABLES[fmt].copy()


def decode(data, fmt: str) -> np.ndarray:
    """float32 values (exact) of ``data`` held in element format ``fmt``: codes (uint8; fp4 codes unpacked,
    see ``unpack_fp4``; for fp6 and fp4 the bits above the code are ignored), bf16 bit patterns, or fp16."""
    data = np.asarray(data)
    if fmt == "bf16":
        return rounding.bf16_to_f32(data.view(np.uint16))
    if fmt == "fp16":
        return data.astype(np.float16).astype(np.float32)
    e_bits, m_bits, _, _ = FORMATS[fmt]
    mask = np.uint8((1 << (1 + e_bits + m_bits)) - 1)
    return _TABLES[fmt][_bytes(data) & mask]


def unpack_fp4(packed, axis: int = -1) -> np.ndarray:
    """The fp4 codes of uint8 bytes holding two each, the low nibble first: ``axis`` doubles in length."""
    packed = np.moveaxis(_bytes(packed), axis, -1)
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=np.uint8)
    out[..., 0::2] = packed & np.uint8(0x0F)
    out[..., 1::2] = packed >> np.uint8(4)
    return np.moveaxis(out, -1, axis)


def e8m0_to_f32(bits) -> np.ndarray:
    """The value an e8m0 scale stands for: 2^(s - 127) (s = 0 is 2^-127, a float32 subnormal), 0xFF NaN."""
    s = _bytes(bits).astype(np.int32)
    # 2^(s-127) for s >= 1 is the float32 with exponent field s; s = 0 is the subnormal 0x00400000
    out = np.where(s == 0, np.uint32(0x00400000), s.astype(np.uint32) << np.uint32(23)).astype(np.uint32)
    return np.where(s == 0xFF, np.float32(np.nan), out.view(np.float32))


# --------------------------------------------------------------------------------------------------------
# the compiled decomposition (GPUs without MX instructions)
# --------------------------------------------------------------------------------------------------------
def compute_type(lhs_fmt: str, rhs_fmt: str) -> str:
    """The 16-bit type both operands are converted to: fp16 if either is fp16, else bf16."""
    return "fp16" if "fp16" in (lhs_fmt, rhs_fmt) else "bf16"


def narrow(x, compute: str) -> np.ndarray:
    """float values rounded once, to nearest even, to the compute type; returned as float32 (exact)."""
    x = np.asarray(x, dtype=np.float64)
    if compute == "bf16":
        return rounding.bf16_to_f32(rounding.f64_to_narrow(x, np.uint16, True))
    return rounding.f64_to_narrow(x, np.float16, False).astype(np.float32)


def encode(values, compute: str) -> np.ndarray:
    """Values already representable in the compute type, in its storage: bf16 bit patterns or float16."""
    if compute == "bf16":
        return rounding.f32_to_bf16(values)
    return np.asarray(values, dtype=np.float32).astype(np.float16)


def compiled_scale(bits, scale_fmt: str, compute: str) -> np.ndarray:
    """The scale as compiled code holds it in the compute type (float32 values). e8m0 is not its exact power
    of two: in bf16 it is the bits ``s << 7`` (s = 0 gives 0, 0xFF Inf); in fp16 the float32 with bits
    ``s << 23`` rounded to fp16. An e4m3 scale converts exactly."""
    if scale_fmt == "e4m3":
        return decode(bits, "e4m3")
    s = _bytes(bits)
    if compute == "bf16":
        return rounding.bf16_to_f32(s.astype(np.uint16) << np.uint16(7))
    wide = (s.astype(np.uint32) << np.uint32(23)).view(np.float32)
    return narrow(wide, "fp16")


def scale_is_nan(bits, scale_fmt: str) -> np.ndarray:
    """Where a scale is NaN: the byte 0xFF for e8m0, the NaN codes for e4m3."""
    if scale_fmt == "e4m3":
        return np.isnan(decode(bits, "e4m3"))
    return _bytes(bits) == np.uint8(0xFF)


def scaled_operand(values, scale_bits, scale_fmt: str, compute: str, fast_math: bool) -> np.ndarray:
    """One operand of the decomposed dot, in the compute type's storage: ``values`` (float32, the decoded
    elements) converted to the compute type, times the compiled scale (``scale_bits`` already broadcast to
    the values' shape, or None for an unscaled operand) rounded once in that type, and NaN where the scale is
    NaN unless ``fast_math``."""
    v = narrow(values, compute)
    if scale_bits is None:
        return encode(v, compute)
    with np.errstate(all="ignore"):
        # float64 holds the product of two 16-bit floats exactly: one rounding, as mul.rn.bf16 / mul.rn.f16
        out = encode(narrow(v.astype(np.float64) * compiled_scale(scale_bits, scale_fmt, compute), compute),
                     compute)
    if fast_math:
        return out
    nan = _QUIET_NAN[compute]
    return np.where(scale_is_nan(scale_bits, scale_fmt), nan.view(out.dtype) if compute == "fp16" else nan, out)
