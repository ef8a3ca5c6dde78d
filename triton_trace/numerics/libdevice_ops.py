"""numpy implementations of CUDA libdevice functions, keyed by their symbol (``__nv_tanhf``, ...).

Precision: a float32 function is computed in float64 and rounded once to float32, so it is correctly
rounded in all but vanishingly rare cases, which is within libdevice's own documented error (1 to 4 ulp;
its ``fast_*`` variants are looser still and get the accurate value here). A float64 function uses numpy's
float64 math (within a few ulp, as libdevice's). Results that must be exact are exact: directed rounding
(``_rz``/``_rd``/``_ru``) through error-free transformations, conversions with saturation (NaN to 0, as
cvt does), fma with one rounding, and every integer function bit for bit. ``OPS`` is the whole list;
a symbol outside it (the Bessel functions j0/j1/y0/y1/jn/yn/cyl_bessel_i1 and rcp64h, which numpy cannot
compute) is reported as unsupported. ``libdevice_exact`` adds the directed-rounding, conversion and
integer symbols.
"""
from __future__ import annotations

import math

import numpy as np

from .rounding import two_prod

OPS: dict = {}
_F64 = np.float64
_U32, _U64 = np.uint32, np.uint64
_M32 = np.uint64(0xFFFFFFFF)


def _reg(symbols, fn) -> None:
    for s in symbols.split():
        OPS[s] = fn


def _pair(name: str, fn, f32: str = None, f64: str = None) -> None:
    """Register the float32 (``__nv_<name>f``) and float64 (``__nv_<name>``) symbols of one function."""
    _reg(f"{f32 or '__nv_' + name + 'f'} {f64 or '__nv_' + name}", fn)


def _f(fn):
    """fn on float64 copies of the arguments; the caller rounds the result to the return type."""
    return lambda *xs: fn(*(np.asarray(x, dtype=_F64) for x in xs))


def _py(fn, on_error=math.nan):
    """A Python math function applied elementwise, with a value for arguments it rejects."""
    def safe(v):
        try:
            return fn(v)
        except (ValueError, OverflowError):
            return on_error(v) if callable(on_error) else on_error
    vec = np.frompyfunc(safe, 1, 1)
    return lambda x: np.asarray(vec(np.asarray(x, dtype=_F64)), dtype=_F64)


def _py2(fn):
    def safe(a, b):
        try:
            return fn(a, b)
        except (ValueError, OverflowError):
            return math.nan
    vec = np.frompyfunc(safe, 2, 1)
    return lambda a, b: np.asarray(vec(np.asarray(a, dtype=_F64), np.asarray(b, dtype=_F64)), dtype=_F64)


# --------------------------------------------------------------------------------------------------------
# elementary functions
# --------------------------------------------------------------------------------------------------------
for _name, _fn in (("exp", np.exp), ("exp2", np.exp2), ("expm1", np.expm1), ("log", np.log), ("log2", np.log2),
                   ("log10", np.log10), ("log1p", np.log1p), ("sin", np.sin), ("cos", np.cos), ("tan", np.tan),
                   ("sinh", np.sinh), ("cosh", np.cosh), ("tanh", np.tanh), ("asin", np.arcsin),
                   ("acos", np.arccos), ("atan", np.arctan), ("asinh", np.arcsinh), ("acosh", np.arccosh),
                   ("atanh", np.arctanh), ("sqrt", np.sqrt), ("cbrt", np.cbrt), ("floor", np.floor),
                   ("ceil", np.ceil), ("trunc", np.trunc), ("rint", np.rint), ("nearbyint", np.rint),
                   ("atan2", np.arctan2), ("hypot", np.hypot), ("pow", np.power), ("copysign", np.copysign)):
    _pair(_name, _f(_fn))
_pair("exp10", _f(lambda x: np.power(10.0, x)))
_pair("rsqrt", _f(lambda x: 1.0 / np.sqrt(x)))
_pair("rcbrt", _f(lambda x: 1.0 / np.cbrt(x)))
_pair("rhypot", _f(lambda x, y: 1.0 / np.hypot(x, y)))
_pair("powi", _f(np.power))
_pair("fmod", _f(np.fmod))                     # exact in any precision
_pair("remainder", _py2(math.remainder))       # IEEE remainder, exact
_pair("fabs", np.abs)
_pair("fdim", _f(lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x - y, 0.0))))
_pair("nextafter", np.nextafter)               # in the argument's own precision
_pair("ldexp", np.ldexp)
_pair("scalbn", np.ldexp)
_pair("cyl_bessel_i0", _f(np.i0))
_reg("__nv_frsqrt_rn", _f(lambda x: 1.0 / np.sqrt(x)))
_reg("__nv_saturatef", _f(lambda x: np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))))
# fast (approximate) variants: the accurate value is within their documented error
for _fast, _acc in (("sinf", "sinf"), ("cosf", "cosf"), ("log2f", "log2f"), ("logf", "logf"), ("expf", "expf"),
                    ("tanf", "tanf"), ("exp10f", "exp10f"), ("log10f", "log10f"), ("powf", "powf")):
    OPS[f"__nv_fast_{_fast}"] = OPS[f"__nv_{_acc}"]
_reg("__nv_fast_fdividef", _f(np.divide))


def _round_half_away(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


_pair("round", _f(_round_half_away))


def _sincospi(x, cos: bool):
    r = np.fmod(x, 2.0)                     # exact
    n = np.rint(2.0 * r)
    f = r - 0.5 * n                         # exact, in [-1/4, 1/4]
    q = (n.astype(np.int64) + (1 if cos else 0)) % 4
    s, c = np.sin(np.pi * f), np.cos(np.pi * f)
    out = np.where(np.isfinite(x), np.choose(q, [s, c, -s, -c]), np.nan)
    return np.where(out == 0, np.copysign(0.0, x) if not cos else 0.0, out)


_pair("sinpi", _f(lambda x: _sincospi(x, False)))
_pair("cospi", _f(lambda x: _sincospi(x, True)))


def _norm(*xs):
    m = np.max(np.abs(np.stack(np.broadcast_arrays(*xs))), axis=0)
    scale = np.where((m == 0) | ~np.isfinite(m), 1.0, m)
    s = np.sqrt(sum((x / scale) ** 2 for x in xs)) * scale
    return np.where(np.isinf(m), np.inf, s)


_pair("norm3d", _f(_norm))
_pair("norm4d", _f(_norm))
_pair("rnorm3d", _f(lambda *xs: 1.0 / _norm(*xs)))
_pair("rnorm4d", _f(lambda *xs: 1.0 / _norm(*xs)))

# --------------------------------------------------------------------------------------------------------
# special functions
# --------------------------------------------------------------------------------------------------------
_erf, _erfc = _py(math.erf), _py(math.erfc)
_pair("erf", _erf)
_pair("erfc", _erfc)
_pair("lgamma", _py(math.lgamma, on_error=math.inf))
_pair("tgamma", _py(math.gamma, on_error=lambda v: math.copysign(math.inf, v) if v == 0 or v > 0 else math.nan))
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erfcx(x):
    x = np.asarray(x, dtype=_F64)
    p, pe = two_prod(x, x)
    direct = np.exp(p) * (1.0 + pe) * _erfc(np.minimum(x, 25.0))
    inv = 1.0 / np.where(x >= 25.0, 2.0 * x * x, 1.0)
    series = (1.0 - inv * (1.0 - 3.0 * inv * (1.0 - 5.0 * inv * (1.0 - 7.0 * inv * (1.0 - 9.0 * inv * (
        1.0 - 11.0 * inv))))))
    tail = series / (np.where(x >= 25.0, x, 1.0) * math.sqrt(math.pi))
    return np.where(x >= 25.0, tail, direct)


def _erfcinv(c):
    """x with erfc(x) = c: Newton's method, on log(erfc) in the tail, from an asymptotic first guess."""
    c = np.asarray(c, dtype=_F64)
    neg = c > 1.0
    t = np.where(neg, 2.0 - c, c)                                  # exact; solve for x >= 0
    inside = (t > 0) & (t <= 1)
    t = np.where(inside, t, 0.5)
    g = np.sqrt(np.maximum(-np.log(t), 0.0))
    x = np.where(t < 0.5, np.sqrt(np.maximum(-np.log(t * math.sqrt(math.pi) * np.maximum(g, 1.0)), 0.0)),
                 (1.0 - t) * math.sqrt(math.pi) / 2.0)
    for _ in range(12):
        e = _erfc(x)
        step_log = (np.log(e) - np.log(t)) * e / (_TWO_OVER_SQRT_PI * np.exp(-x * x))
        step_lin = (e - t) / (_TWO_OVER_SQRT_PI * np.exp(-x * x))
        x = x + np.where(t < 0.5, step_log, step_lin)
    out = np.where(neg, -x, x)
    out = np.where(c == 0, np.inf, np.where(c == 2, -np.inf, out))
    return np.where((c >= 0) & (c <= 2), out, np.nan)


def _erfinv(y):
    y = np.asarray(y, dtype=_F64)
    x = _erfcinv(1.0 - np.abs(y)) * np.sign(y)            # 1 - |y| is exact for |y| >= 1/2
    small = np.abs(y) < 0.5
    if np.any(small):
        z = np.where(small, y, 0.0) * math.sqrt(math.pi) / 2.0
        for _ in range(8):
            z = z - (_erf(z) - np.where(small, y, 0.0)) / (_TWO_OVER_SQRT_PI * np.exp(-z * z))
        x = np.where(small, z, x)
    return np.where(np.abs(y) > 1, np.nan, np.where(y == 0, y, x))


_SQRT_HALF_HI = 0.7071067811865476
_SQRT_HALF_LO = -4.833646656726457e-17


def _normcdf(x):
    x = np.asarray(x, dtype=_F64)
    t, te = two_prod(-x, _SQRT_HALF_HI)
    te = te - x * _SQRT_HALF_LO
    return 0.5 * (_erfc(t) - te * _TWO_OVER_SQRT_PI * np.exp(-t * t))


_pair("erfcx", _erfcx)
_pair("erfcinv", _erfcinv)
_pair("erfinv", _erfinv)
_pair("normcdf", _normcdf)
_pair("normcdfinv", lambda p: -math.sqrt(2.0) * _erfcinv(2.0 * np.asarray(p, dtype=_F64)))


def _ilogb(x):
    x = np.asarray(x, dtype=_F64)
    e = np.frexp(np.where(np.isfinite(x) & (x != 0), x, 1.0))[1] - 1
    return np.where(np.isinf(x), 2**31 - 1, np.where((x == 0) | np.isnan(x), -2**31, e)).astype(np.int64)


def _logb(x):
    x = np.asarray(x, dtype=_F64)
    e = _ilogb(x).astype(_F64)
    return np.where(np.isnan(x), np.nan, np.where(np.isinf(x), np.inf, np.where(x == 0, -np.inf, e)))


_pair("ilogb", _ilogb, f64="__nv_ilogb")
_pair("logb", _logb)
_reg("__nv_isnanf __nv_isnand", np.isnan)
_reg("__nv_isinff __nv_isinfd", np.isinf)
_reg("__nv_finitef __nv_isfinited", np.isfinite)
_reg("__nv_signbitf __nv_signbitd", np.signbit)
