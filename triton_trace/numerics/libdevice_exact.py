"""libdevice functions whose GPU result is exact, emulated bit for bit: IEEE arithmetic in the four rounding
modes, fma, conversions between floats and integers, reinterpretations, and the integer functions.

Each is registered in ``libdevice_ops.OPS`` under its symbol. A rounded result is built from ``s + e``, the
float64 nearest the exact value and the rest (``rounding.two_sum`` / ``two_prod``), so it is rounded once.
"""
from __future__ import annotations

import numpy as np

from .libdevice_ops import OPS, _reg
from .rounding import MODES, fma64, round_to, two_prod, two_sum

_F64, _U32, _U64 = np.float64, np.uint32, np.uint64
_M32 = np.uint64(0xFFFFFFFF)


def _out(x):
    """The float type a symbol returns, from its first argument: __nv_f*/float args give float32."""
    return np.float32 if np.asarray(x).dtype == np.float32 else _F64


def _add(a, b):
    return two_sum(a.astype(_F64), b.astype(_F64))


def _sub(a, b):
    return two_sum(a.astype(_F64), -b.astype(_F64))


def _mul(a, b):
    return two_prod(a.astype(_F64), b.astype(_F64))


def _div(a, b):
    a, b = a.astype(_F64), b.astype(_F64)
    q = a / b
    p, pe = two_prod(q, b)
    ok = np.isfinite(q) & (b != 0) & np.isfinite(b)
    rest = np.where(ok, ((a - p) - pe) / np.where(ok, b, 1.0), 0.0)    # only its sign matters
    return q, rest


def _sqrt(x):
    x = x.astype(_F64)
    s = np.sqrt(x)
    p, pe = two_prod(s, s)
    return s, np.where(np.isfinite(s) & (x > 0), (x - p) - pe, 0.0)


def _fma(a, b, c):
    a, b, c = (v.astype(_F64) for v in np.broadcast_arrays(a, b, c))
    return fma64(a, b, c)


def _rounded(kernel, mode):
    def op(*xs):
        s, e = kernel(*xs)
        return round_to(s, e, _out(xs[0]), mode)
    return op


for _m in MODES:
    _reg(f"__nv_fadd_{_m} __nv_dadd_{_m}", _rounded(_add, _m))
    _reg(f"__nv_fsub_{_m} __nv_dsub_{_m}", _rounded(_sub, _m))
    _reg(f"__nv_fmul_{_m} __nv_dmul_{_m}", _rounded(_mul, _m))
    _reg(f"__nv_fdiv_{_m} __nv_ddiv_{_m}", _rounded(_div, _m))
    _reg(f"__nv_frcp_{_m} __nv_drcp_{_m}", _rounded(lambda x: _div(np.ones_like(x), x), _m))
    _reg(f"__nv_fsqrt_{_m} __nv_dsqrt_{_m}", _rounded(_sqrt, _m))
    _reg(f"__nv_fmaf_{_m} __nv_fma_{_m}", _rounded(_fma, _m))


_reg("__nv_fmaf __nv_fma", _rounded(_fma, "rn"))

# --------------------------------------------------------------------------------------------------------
# conversions
# --------------------------------------------------------------------------------------------------------
_TO_INT = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _saturate(x, np_dtype, nan_bits: bool = False):
    """Rounded float64 values to an integer type as cvt does: saturating; NaN gives 0, or the sign bit alone
    (0x80..0) where ``nan_bits`` (measured on an H200: float64 sources and 64-bit results)."""
    info = np.iinfo(np_dtype)
    nan = np.isnan(x)
    x = np.where(nan, 0.0, x)
    lo, hi = x < float(info.min), x >= float(info.max) + 1.0
    safe = np.where(lo | hi, 0.0, x).astype(np_dtype)
    out = np.where(lo, np.array(info.min, np_dtype), np.where(hi, np.array(info.max, np_dtype), safe))
    if nan_bits:
        sign = np.array(1 << (np.dtype(np_dtype).itemsize * 8 - 1), dtype=np.uint64).astype(np_dtype)
        out = np.where(nan, sign, out)
    return out


def _from_int64(x, mode, out):
    x = np.asarray(x)
    if x.dtype == np.int64:
        hi, lo = (x >> 32).astype(_F64), (x & 0xFFFFFFFF).astype(_F64)
    else:
        hi, lo = (x >> _U64(32)).astype(_F64), (x & _M32).astype(_F64)
    s, e = two_sum(hi * 4294967296.0, lo)
    return round_to(s, e, out, mode)


for _m in MODES:
    _f2i = _TO_INT[_m]
    for _src in ("float", "double"):
        for _dst, _dt in (("int", np.int32), ("uint", _U32), ("ll", np.int64), ("ull", _U64)):
            _nb = _src == "double" or _dst in ("ll", "ull")
            _reg(f"__nv_{_src}2{_dst}_{_m}", lambda x, f=_f2i, d=_dt, nb=_nb: _saturate(f(x.astype(_F64)), d, nb))
    _reg(f"__nv_double2float_{_m}", lambda x, m=_m: round_to(x, 0.0, np.float32, m))
    _reg(f"__nv_int2float_{_m} __nv_uint2float_{_m}", lambda x, m=_m: round_to(x.astype(_F64), 0.0, np.float32, m))
    _reg(f"__nv_ll2float_{_m} __nv_ull2float_{_m}", lambda x, m=_m: _from_int64(x, m, np.float32))
    _reg(f"__nv_ll2double_{_m} __nv_ull2double_{_m}", lambda x, m=_m: _from_int64(x, m, _F64))
_reg("__nv_int2double_rn __nv_uint2double_rn", lambda x: x.astype(_F64))
_reg("__nv_llrintf __nv_llrint", lambda x: _saturate(np.rint(x.astype(_F64)), np.int64, True))
_reg("__nv_llroundf __nv_llround", lambda x: _saturate(OPS["__nv_round"](x), np.int64, True))
_reg("__nv_int_as_float __nv_uint_as_float", lambda x: x.view(np.float32))
_reg("__nv_float_as_int", lambda x: x.view(np.int32))
_reg("__nv_float_as_uint", lambda x: x.view(_U32))
_reg("__nv_longlong_as_double", lambda x: x.view(_F64))
_reg("__nv_double_as_longlong", lambda x: x.view(np.int64))
_reg("__nv_double2loint", lambda x: (x.view(_U64) & _M32).astype(_U32))
_reg("__nv_double2hiint", lambda x: (x.view(_U64) >> _U64(32)).astype(_U32))
_reg("__nv_hiloint2double",
     lambda hi, lo: ((hi.view(_U32).astype(_U64) << _U64(32)) | lo.view(_U32).astype(_U64)).view(_F64))

# --------------------------------------------------------------------------------------------------------
# integer functions (libdevice's int/uint/long long; Triton passes them as int32/uint32/int64/uint64)
# --------------------------------------------------------------------------------------------------------
_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=_U32)


def _u32(x):
    return np.asarray(x).astype(np.int64).astype(_U32) if np.asarray(x).dtype.kind == "i" else x.astype(_U32)


def _bitlen32(u):
    return np.frexp(u.astype(_F64))[1]          # exact for 32-bit values; 0 for 0


def _halves(x):
    u = x.view(_U64) if x.dtype == np.int64 else x.astype(_U64)
    return (u >> _U64(32)).astype(_U32), (u & _M32).astype(_U32)


def _clz64(x):
    hi, lo = _halves(x)
    return np.where(hi != 0, 32 - _bitlen32(hi), 64 - _bitlen32(lo))


def _brev32(u):
    u = u.astype(_U32)
    return ((_REV8[u & 0xFF] << 24) | (_REV8[(u >> 8) & 0xFF] << 16) | (_REV8[(u >> 16) & 0xFF] << 8)
            | _REV8[u >> 24]).astype(_U32)


def _ffs32(u):
    u = u.astype(_U32)
    low = u & (~u + _U32(1))
    return _bitlen32(low)


def _ffs64(x):
    hi, lo = _halves(x)
    return np.where(lo != 0, _ffs32(lo), np.where(hi != 0, 32 + _ffs32(hi), 0))


def _umulhi64(a, b):
    a, b = a.view(_U64) if a.dtype == np.int64 else a, b.view(_U64) if b.dtype == np.int64 else b
    a0, a1, b0, b1 = a & _M32, a >> _U64(32), b & _M32, b >> _U64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U64(32)) + (p01 & _M32) + (p10 & _M32)
    return p11 + (p01 >> _U64(32)) + (p10 >> _U64(32)) + (mid >> _U64(32))


def _mulhi64(a, b):
    hi = _umulhi64(a, b)
    hi = hi - np.where(a < 0, b.view(_U64), _U64(0)) - np.where(b < 0, a.view(_U64), _U64(0))
    return hi.view(np.int64)


def _byte_perm(x, y, s):
    whole = (_u32(y).astype(_U64) << _U64(32)) | _u32(x).astype(_U64)
    sel = _u32(s).astype(_U64)
    out = np.zeros(np.broadcast(whole, sel).shape, dtype=_U64)
    for n in range(4):
        pick = (sel >> _U64(4 * n)) & _U64(7)
        out |= ((whole >> (pick * _U64(8))) & _U64(0xFF)) << _U64(8 * n)
    return out.astype(_U32)


def _sext24(x):
    return (x.astype(np.int32) << 8) >> 8


_reg("__nv_clz", lambda x: 32 - _bitlen32(_u32(x)))
_reg("__nv_clzll", _clz64)
_reg("__nv_popc", lambda x: np.bitwise_count(_u32(x)))
_reg("__nv_popcll", lambda x: np.bitwise_count(x.view(_U64)))
_reg("__nv_brev", lambda x: _brev32(_u32(x)))
_reg("__nv_brevll", lambda x: ((_brev32(_halves(x)[1]).astype(_U64) << _U64(32)) | _brev32(_halves(x)[0])))
_reg("__nv_ffs", lambda x: _ffs32(_u32(x)))
_reg("__nv_ffsll", _ffs64)
_reg("__nv_byte_perm", _byte_perm)
_reg("__nv_mulhi", lambda a, b: (a.astype(np.int64) * b.astype(np.int64)) >> 32)
_reg("__nv_umulhi", lambda a, b: (a.astype(_U64) * b.astype(_U64)) >> _U64(32))
_reg("__nv_mul64hi", _mulhi64)
_reg("__nv_umul64hi", _umulhi64)
_reg("__nv_mul24", lambda a, b: _sext24(a).astype(np.int64) * _sext24(b).astype(np.int64))
_reg("__nv_umul24", lambda a, b: (a.astype(_U64) & _U64(0xFFFFFF)) * (b.astype(_U64) & _U64(0xFFFFFF)))
_reg("__nv_sad", lambda x, y, z: np.abs(x.astype(np.int64) - y.astype(np.int64)) + z.astype(np.int64))
_reg("__nv_usad", lambda x, y, z: np.abs(x.astype(np.int64) - y.astype(np.int64)) + z.astype(np.int64))
_reg("__nv_hadd __nv_uhadd", lambda x, y: (x.astype(np.int64) + y.astype(np.int64)) >> 1)
_reg("__nv_rhadd __nv_urhadd", lambda x, y: (x.astype(np.int64) + y.astype(np.int64) + 1) >> 1)
_reg("__nv_abs __nv_llabs", np.abs)
