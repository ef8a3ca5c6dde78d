"""PTX floating-point instructions and conversions on numpy (see ptx.py), bit for bit where the PTX ISA
defines the result and as the GPU (sm_90) was measured to behave where it is silent: every rounding mode
(``.rn .rz .rm .rp``, ``.rna``), ``.ftz``, ``.sat``, ``.relu``, ``.satfinite``, the packed ``f16x2``/``bf16x2``
forms, fp8 pairs, the sign of exact zeros, and the GPU's NaNs. Exact results are computed as a float64 pair
(rounding.two_sum/two_prod/fma64) and rounded once (the formats' bits are in ptx_formats). ``OPS`` is the
full instruction table (integer instructions from ptx_int)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import ex2, mufu, ptx_int
from .ptx import WIDTH, Instr, Machine, PtxUnsupported, mask
from .ptx_formats import (FP4, INT_NAN, NAN, cvt_nan, decode, encode, fp4_encode, fp8_encode, nan_fix,
                          round_rational_f64, to_int, to_int_float)
from .rounding import _FP8_TABLES, fma64, two_prod, two_sum

_U64 = np.uint64
_FLOATS = ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "tf32")
# the types whose abs/neg write the canonical NaN for a NaN input, not the input with its sign changed
# (sm_90 measured for f32, signalling and negative NaNs included; the other types were not measured)
_CANON_SIGN_OPS = ("f32",)
_MODE = {"rn": "rn", "rz": "rz", "rm": "rd", "rp": "ru", "rni": "rn", "rzi": "rz", "rmi": "rd", "rpi": "ru"}


def _ftz_in(x: np.ndarray, t: str, on: bool) -> np.ndarray:
    if not on or t != "f32":
        return x
    return np.where(np.abs(x) < 2.0 ** -126, np.copysign(0.0, x), x)


def _finish(m: Machine, ins: Instr, s, e, t: str, mode="rn", lane=None):
    """Round, apply .ftz/.sat/.relu and the canonical NaN; the bits of one lane (of a packed pair)."""
    bits = encode(s, e, t, mode)
    r = decode(bits, t)
    if ins.has("ftz") and t == "f32":
        tiny = (np.abs(r) < 2.0 ** -126) & (r != 0)
        bits = np.where(tiny, bits & _U64(0x80000000), bits)
        r = decode(bits, t)
    if ins.has("sat"):
        bits = np.where(np.isnan(r) | (r <= 0), _U64(0), np.where(r >= 1.0, encode(1.0, 0.0, t), bits))
        return bits
    if ins.has("relu"):                          # cvt's relu makes -0 +0 too (measured; fma.relu was not)
        bits = np.where(~np.isnan(r) & ((r <= 0) if ins.op == "cvt" else (r < 0)), _U64(0), bits)
    return nan_fix(bits, s, t)


def _zero_sign(s, e, x, y, mode):
    """IEEE 754's sign of an exact zero sum ``x + y`` (for fma, ``x`` is the product): the addends' common
    sign, else -0 only when rounding down. float64 gives +0 to x + (-x) in any mode and fma64 loses the
    sign of a zero product; the GPU follows the standard (add.rm x + -x is -0, fma(0, -y, -0) is -0)."""
    neg = np.where(np.signbit(x) == np.signbit(y), np.signbit(y), mode == "rd")
    return np.where((s == 0) & (e == 0), np.where(neg, -0.0, 0.0), s)


def _lanes(t: str):
    """(element type, number of lanes) of a possibly packed float type."""
    return (t[:-2], 2) if t.endswith("x2") else (t, 1)


def _arith(m: Machine, ins: Instr):
    t = ptx_int.itype(ins)
    et, lanes = _lanes(t)
    mode = next((_MODE[x] for x in ins.mods if x in ("rn", "rz", "rm", "rp")), "rn")
    n_in = {"fma": 3, "mad": 3}.get(ins.op, 2 if ins.op in ("add", "sub", "mul", "div", "min", "max", "copysign") else 1)
    raw = [m.read(ins.operands[1 + i], t) for i in range(n_in)]
    out = np.zeros(m.n, dtype=_U64)
    ew = WIDTH[et]
    for lane in range(lanes):
        vals = [_ftz_in(decode((r >> _U64(ew * lane)) & mask(ew), et), et, ins.has("ftz")) for r in raw]
        bits = _one(m, ins, et, mode, vals, [(r >> _U64(ew * lane)) & mask(ew) for r in raw])
        out |= (bits & mask(ew)) << _U64(ew * lane)
    m.write(ins.operands[0], out, t)


def _mufu(ins, t, raw):
    """The special-function unit's f32 approximations with the GPU's bits (numerics/mufu.py, from tables measured
    on an H100), or None for an instruction it does not cover. The raw bits, not the ``.ftz``-flushed values:
    the non-ftz forms keep subnormal inputs. An immediate divisor is folded by ptxas to its correctly rounded
    reciprocal, as in the compiled kernel."""
    op, ftz = ins.op, ins.has("ftz")
    if t != "f32" or not (ins.has("approx") or (op == "div" and ins.has("full"))):
        return None
    a = raw[0].astype(np.uint32).view(np.float32)
    if op == "rcp":
        r = mufu.rcp_approx(a, ftz=ftz)
    elif op in ("sqrt", "rsqrt"):
        r = (mufu.sqrt_approx if op == "sqrt" else mufu.rsqrt_approx)(a, ftz=ftz)
    elif op == "ex2":
        r = ex2.ex2_approx(a, ftz=ftz)
    elif op == "div":
        b = raw[1].astype(np.uint32).view(np.float32)
        const = ins.operands[2].kind == "imm"
        r = (mufu.div_full if ins.has("full") else mufu.div_approx)(a, b, ftz=ftz, constant_divisor=const)
    else:
        return None
    return np.asarray(r, np.float32).view(np.uint32).astype(_U64)


def _one(m, ins, t, mode, v, raw):
    op = ins.op
    gpu = _mufu(ins, t, raw) if op in ("rcp", "sqrt", "rsqrt", "div", "ex2") else None
    if gpu is not None:
        return gpu
    with np.errstate(all="ignore"):
        if op in ("add", "sub"):
            y = v[1] if op == "add" else -v[1]
            s, e = two_sum(v[0], y)
            s = _zero_sign(s, e, v[0], y, mode)
        elif op == "mul":
            s, e = two_prod(v[0], v[1])
        elif op in ("fma", "mad"):
            s, e = fma64(v[0], v[1], v[2])
            s = _zero_sign(s, e, v[0] * v[1], v[2], mode)
        elif op in ("div", "rcp"):
            num, den = (v[0], v[1]) if op == "div" else (np.ones_like(v[0]), v[0])
            if ins.has("approx") or ins.has("full"):
                m.approximate.add(ins.text.split()[0])
            s = num / den
            e = np.where(np.isfinite(s) & (den != 0), -fma64(s, den, -num)[0] * np.sign(den), 0.0)
        elif op == "sqrt":
            if ins.has("approx"):
                m.approximate.add(ins.text.split()[0])
            s = np.sqrt(v[0])
            e = np.where(np.isfinite(s), -fma64(s, s, -v[0])[0], 0.0)
        elif op in ("rsqrt", "ex2", "lg2", "sin", "cos", "tanh"):
            m.approximate.add(ins.text.split()[0])
            f = {"rsqrt": lambda x: 1.0 / np.sqrt(x), "ex2": np.exp2, "lg2": np.log2, "sin": np.sin,
                 "cos": np.cos, "tanh": np.tanh}[op]
            s, e = f(v[0]), 0.0
        elif op in ("min", "max"):
            return _minmax(ins, t, v, raw)
        elif op in ("abs", "neg"):
            sign = _U64(1 << (WIDTH[t] - 1))
            r = raw[0] & (sign - _U64(1)) if op == "abs" else raw[0] ^ sign
            return np.where(np.isnan(v[0]), _U64(NAN[t]), r) if t in _CANON_SIGN_OPS else r
        elif op == "copysign":
            sign = _U64(1 << (WIDTH[t] - 1))
            return (raw[1] & (sign - _U64(1))) | (raw[0] & sign)
        else:
            raise PtxUnsupported(f"instruction {ins.text!r}")
    bits = _finish(m, ins, s, e, t, mode)
    if t != "f64":
        return bits
    return _f64_nans(_exact_f64(op, v, s, mode, bits) if op in ("add", "sub", "mul", "fma", "mad") else bits, raw)


_F64_EXP, _F64_FRAC, _F64_QUIET = _U64(0x7FF0000000000000), _U64((1 << 52) - 1), _U64(1 << 51)


def _f64_nans(bits, raw):
    """sm_90's f64 NaNs (measured, benchmarks/fidelity/gpu_2026-12-07c): a NaN operand comes out quietened with
    its sign and payload, the first NaN in operand order; an invalid operation on numbers (inf - inf, 0 * inf,
    0 / 0) writes 0xFFF8000000000000, the negative default NaN, not the f32 ops' canonical 0x7FFFFFFF."""
    def nan(b):
        return ((b & _F64_EXP) == _F64_EXP) & ((b & _F64_FRAC) != 0)
    wrote_nan = nan(bits)
    out = np.where(wrote_nan, _U64(0xFFF8000000000000), bits)
    for r in reversed(raw):
        out = np.where(wrote_nan & nan(r), r | _F64_QUIET, out)
    return out


def _exact_f64(op, v, s, mode, bits):
    """The f64 lanes a float64 pair cannot hold, redone with exact rationals: a product with a factor past
    2^+-480 (Dekker's split overflows, or the product or its error underflows) and an overflow in a directed
    mode (float64 says inf where .rz gives the largest finite). Real kernels seldom have any."""
    redo = np.isinf(s) & (mode != "rn")
    if op != "add" and op != "sub":
        extreme = [(x != 0) & ((np.abs(x) > 2.0 ** 480) | (np.abs(x) < 2.0 ** -480)) for x in v[:2]]
        redo |= (v[0] != 0) & (v[1] != 0) & (extreme[0] | extreme[1])
    redo &= np.logical_and.reduce([np.isfinite(x) for x in v])
    bits = bits.copy()
    for i in np.flatnonzero(redo):
        a, b = Fraction(float(v[0][i])), Fraction(float(v[1][i]))
        exact = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b}.get(
            op, lambda: a * b + Fraction(float(v[2][i])))()
        bits[i] = round_rational_f64(exact, mode)
    return bits


def _minmax(ins, t, v, raw):
    a, b = v
    pick_a = (a < b) if ins.op == "min" else (a > b)
    zeros = (a == 0) & (b == 0)                       # -0 is below +0 for both
    neg_a = np.signbit(a)
    pick_a = np.where(zeros, neg_a if ins.op == "min" else ~neg_a, pick_a | (a == b))
    r = np.where(np.isnan(b), raw[0], np.where(np.isnan(a), raw[1], np.where(pick_a, raw[0], raw[1])))
    both = np.isnan(a) & np.isnan(b)
    if ins.has("NaN"):
        both = np.isnan(a) | np.isnan(b)
    return np.where(both, _U64(NAN[t]), r)


def setp(m: Machine, ins: Instr):
    t = ptx_int.itype(ins)
    cmp = next(x for x in ins.mods if x not in WIDTH and x not in ("ftz", "and", "or", "xor"))
    if t in _FLOATS:
        a = _ftz_in(decode(m.read(ins.operands[1], t), t), t, ins.has("ftz"))
        b = _ftz_in(decode(m.read(ins.operands[2], t), t), t, ins.has("ftz"))
        unordered = np.isnan(a) | np.isnan(b)
        base = cmp[:-1] if cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu") else cmp
        if cmp == "num":
            r = ~unordered
        elif cmp == "nan":
            r = unordered
        else:
            with np.errstate(invalid="ignore"):
                r = ptx_int._CMP[base](a, b)
            r = (r | unordered) if base != cmp else (r & ~unordered)     # ne is ordered too
    else:
        r = ptx_int.compare_int(m, ins, cmp)
    combine = next((x for x in ins.mods if x in ("and", "or", "xor")), None)
    if combine:
        c = m.predicate(ins.operands[3])
        r = {"and": r & c, "or": r | c, "xor": r ^ c}[combine]
        q_r = {"and": ~r & c, "or": ~r | c, "xor": ~r ^ c}[combine]
    else:
        q_r = ~r
    dst = ins.operands[0]
    if dst.kind == "pair":
        m.write(dst.value[0], r.astype(_U64), "pred")
        m.write(dst.value[1], q_r.astype(_U64), "pred")
    else:
        m.write(dst, r.astype(_U64), "pred")


def _from_int(bits, t: str):
    """Exact (s, e) float64 pair of an integer of type ``t``."""
    w = WIDTH[t]
    v = ptx_int.signed(bits, w) if t[0] == "s" else np.asarray(bits, dtype=_U64)
    if w <= 32:
        return v.astype(np.float64), np.zeros(v.shape)
    hi = (v >> (32 if t[0] == "s" else _U64(32))).astype(np.float64) * 2.0 ** 32
    lo = (np.asarray(bits, dtype=_U64) & _U64(0xFFFFFFFF)).astype(np.float64)
    return two_sum(hi, lo)


def cvt(m: Machine, ins: Instr):
    types = ins.types()
    if len(types) != 2:
        raise PtxUnsupported(f"{ins.text!r}: cvt with {len(types)} types")
    dst_t, src_t = types
    mode = next((_MODE[x] for x in ins.mods if x in _MODE), None)
    if dst_t == "e2m1x2":                              # a -> upper nibble, b -> lower
        hi, lo = (fp4_encode(decode(m.read(ins.operands[i], src_t), src_t)) for i in (1, 2))
        if ins.has("relu"):
            hi, lo = (np.where(v & _U64(8), _U64(0), v) for v in (hi, lo))
        m.write(ins.operands[0], (hi << _U64(4)) | lo, "b8")
        return
    if src_t == "e2m1x2":                              # upper nibble -> upper half
        src = m.read(ins.operands[1], "b8")
        out = np.zeros(m.n, dtype=_U64)
        et = "f16" if dst_t == "f16x2" else "bf16"
        for k in (0, 1):
            code = ((src >> _U64(4 * k)) & _U64(0xF)).astype(np.int64)
            v = np.where(code & 8, -1.0, 1.0) * FP4[code & 7]
            if ins.has("relu"):
                v = np.maximum(v, 0.0)
            out |= encode(v, 0.0, et) << _U64(16 * k)
        m.write(ins.operands[0], out, dst_t)
        return
    if dst_t in ("e4m3x2", "e5m2x2"):
        fmt = dst_t[:4]
        if src_t == "f16x2":
            packed = m.read(ins.operands[1], "f16x2")
            halves = [decode((packed >> _U64(16 * k)) & _U64(0xFFFF), "f16") for k in (1, 0)]
        else:
            halves = [decode(m.read(ins.operands[i], src_t), src_t) for i in (1, 2)]
        hi, lo = (fp8_encode(h, fmt, ins.has("satfinite")) for h in halves)
        m.write(ins.operands[0], (hi << _U64(8)) | lo, "b16")
        return
    if src_t in ("e4m3x2", "e5m2x2"):
        src = m.read(ins.operands[1], "b16")
        table = _FP8_TABLES["fp8e4nv" if src_t == "e4m3x2" else "fp8e5"]
        out = np.zeros(m.n, dtype=_U64)
        for k in (0, 1):
            v = table[((src >> _U64(8 * k)) & _U64(0xFF)).astype(np.int64)].astype(np.float64)
            et = "f16" if dst_t == "f16x2" else "bf16"
            out |= nan_fix(encode(v, 0.0, et), v, et) << _U64(16 * k)
        m.write(ins.operands[0], out, dst_t)
        return
    if dst_t in ("f16x2", "bf16x2"):                   # a -> upper half, b -> lower half
        et = dst_t[:-2]
        parts = [_finish(m, ins, decode(m.read(ins.operands[i], src_t), src_t), 0.0, et, mode or "rn")
                 for i in (1, 2)]
        m.write(ins.operands[0], (parts[0] << _U64(16)) | parts[1], dst_t)
        return
    src = m.read(ins.operands[1], src_t)
    if dst_t == "tf32":            # the low 13 bits cleared: ties away (.rna), to even (.rn), or cut (.rz)
        x = decode(src, "f32")
        b = src.astype(_U64)
        if ins.has("rna"):
            r = (b + _U64(0x1000)) & _U64(0xFFFFE000)
        elif mode == "rn":
            r = (b + _U64(0xFFF) + ((b >> _U64(13)) & _U64(1))) & _U64(0xFFFFE000)
        else:
            r = b & _U64(0xFFFFE000)
        nan = b & _U64(0xFFFFE000)                # (sm_90: a NaN's payload is cut, not quietened)
        m.write(ins.operands[0], np.where(np.isfinite(x), r, np.where(np.isnan(x), nan, b)), "b32")
        return
    if dst_t in ("f16", "bf16", "f32", "f64"):
        if src_t in ("f16", "bf16", "f32", "f64"):
            x = _ftz_in(decode(src, src_t), src_t, ins.has("ftz"))
            if any(x_ in ins.mods for x_ in ("rni", "rzi", "rmi", "rpi")):
                x = to_int_float(x, mode)                  # round to an integer in the same type
                mode = "rn"
            if ins.has("satfinite") and dst_t != "f64":
                top = decode(encode(np.inf, 0.0, dst_t, "rz"), dst_t)
                x = np.where(np.isnan(x), x, np.clip(x, -top, top))
            bits = _finish(m, ins, x, 0.0, dst_t, mode or "rn")
            if src_t != dst_t:
                bits = np.where(np.isnan(x), cvt_nan(src, src_t, dst_t), bits)
        else:
            s, e = _from_int(src, src_t)
            bits = _finish(m, ins, s, e, dst_t, mode or "rn")
        m.write(ins.operands[0], bits, dst_t)
        return
    # integer destination
    if src_t in ("f16", "bf16", "f32", "f64"):
        x = _ftz_in(decode(src, src_t), src_t, ins.has("ftz"))
        m.write(ins.operands[0], to_int(x, dst_t, mode or "rz", INT_NAN.get((src_t, dst_t), 0)), dst_t)
        return
    v = ptx_int.signed(src, WIDTH[src_t]) if src_t[0] == "s" else src
    if ins.has("sat"):
        w = WIDTH[dst_t]
        lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if dst_t[0] == "s" else (0, (1 << w) - 1)
        v = np.clip(v.astype(object), lo, hi).astype(np.int64) if src_t[0] == "s" else np.minimum(v, _U64(hi))
    bits = np.asarray(v).astype(np.int64).view(_U64) if np.asarray(v).dtype.kind == "i" else v
    m.write(ins.operands[0], bits, dst_t, signed=dst_t[0] == "s")



def _float_or_int(int_fn):
    def run(m: Machine, ins: Instr):
        if ptx_int.itype(ins) in _FLOATS:
            return _arith(m, ins)
        return int_fn(m, ins)
    return run


OPS = dict(ptx_int.INT_OPS)
for _name in ("add", "sub", "mul", "mad", "div", "min", "max", "abs", "neg"):
    OPS[_name] = _float_or_int(ptx_int.INT_OPS[_name])
for _name in ("fma", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "copysign"):
    OPS[_name] = _arith
OPS["setp"] = setp
OPS["cvt"] = cvt
