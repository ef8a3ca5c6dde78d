"""PTX floating-point instructions and conversions on numpy (see ptx.py), bit for bit where the PTX ISA
defines the result: every rounding mode (``.rn .rz .rm .rp``, ``.rna``), ``.ftz``, ``.sat``, ``.relu``,
``.satfinite``, the packed ``f16x2``/``bf16x2`` forms, fp8 pairs, and the GPU's canonical NaN for
arithmetic results. Exact results are computed as a float64 pair (rounding.two_sum/two_prod/fma64) and
rounded once. ``OPS`` is the full instruction table (integer instructions from ptx_int)."""
from __future__ import annotations

import numpy as np

from . import ptx_int
from .ptx import WIDTH, Instr, Machine, PtxUnsupported, mask
from .rounding import _FP8_TABLES, fma64, round_to, two_prod, two_sum

_U64 = np.uint64
_FLOATS = ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "tf32")
_NAN = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}
_MODE = {"rn": "rn", "rz": "rz", "rm": "rd", "rp": "ru", "rni": "rn", "rzi": "rz", "rmi": "rd", "rpi": "ru"}
_FRAC = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}


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


def _nan_fix(bits, v, t):
    return np.where(np.isnan(v), _U64(_NAN[t]), bits)


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
    if ins.has("relu"):
        bits = np.where(~np.isnan(r) & (r < 0), _U64(0), bits)
    return _nan_fix(bits, s, t)


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


def _one(m, ins, t, mode, v, raw):
    op = ins.op
    with np.errstate(all="ignore"):
        if op in ("add", "sub"):
            s, e = two_sum(v[0], v[1] if op == "add" else -v[1])
        elif op == "mul":
            s, e = two_prod(v[0], v[1])
        elif op in ("fma", "mad"):
            s, e = fma64(v[0], v[1], v[2])
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
            return r
        elif op == "copysign":
            sign = _U64(1 << (WIDTH[t] - 1))
            return (raw[1] & (sign - _U64(1))) | (raw[0] & sign)
        else:
            raise PtxUnsupported(f"instruction {ins.text!r}")
    return _finish(m, ins, s, e, t, mode)


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
    return np.where(both, _U64(_NAN[t]), r)


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


def _to_int(x: np.ndarray, t: str, mode: str) -> np.ndarray:
    """float64 to integer type ``t``: rounded in ``mode``, saturating, NaN to 0 (PTX cvt)."""
    r = _to_int_float(x, mode)
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
    return np.where(nan, _U64(0), out) & mask(w)


def _fp8_encode(x: np.ndarray, fmt: str, satfinite: bool) -> np.ndarray:
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


_FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])      # e2m1 codes 0-7; bit 3 is the sign


def _fp4_encode(x: np.ndarray) -> np.ndarray:
    """Nearest e2m1 code (ties to the even code), saturating at 6 (``.satfinite``, which PTX requires).
    A NaN input, which PTX does not define for this format, gives +6 (code 7)."""
    a = np.abs(x)
    i = np.clip(np.searchsorted(_FP4, a), 1, 7)
    lo, hi = _FP4[i - 1], _FP4[i]
    take_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(a >= 6.0, 7, np.where(take_hi, i, i - 1))
    code = np.where(np.signbit(x) & ~np.isnan(x), code | 8, code)
    return np.where(np.isnan(x), 7, code).astype(_U64)


def cvt(m: Machine, ins: Instr):
    types = ins.types()
    if len(types) != 2:
        raise PtxUnsupported(f"{ins.text!r}: cvt with {len(types)} types")
    dst_t, src_t = types
    mode = next((_MODE[x] for x in ins.mods if x in _MODE), None)
    if dst_t == "e2m1x2":                              # a -> upper nibble, b -> lower
        hi, lo = (_fp4_encode(decode(m.read(ins.operands[i], src_t), src_t)) for i in (1, 2))
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
            v = np.where(code & 8, -1.0, 1.0) * _FP4[code & 7]
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
        hi, lo = (_fp8_encode(h, fmt, ins.has("satfinite")) for h in halves)
        m.write(ins.operands[0], (hi << _U64(8)) | lo, "b16")
        return
    if src_t in ("e4m3x2", "e5m2x2"):
        src = m.read(ins.operands[1], "b16")
        table = _FP8_TABLES["fp8e4nv" if src_t == "e4m3x2" else "fp8e5"]
        out = np.zeros(m.n, dtype=_U64)
        for k in (0, 1):
            v = table[((src >> _U64(8 * k)) & _U64(0xFF)).astype(np.int64)].astype(np.float64)
            et = "f16" if dst_t == "f16x2" else "bf16"
            out |= _nan_fix(encode(v, 0.0, et), v, et) << _U64(16 * k)
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
        m.write(ins.operands[0], np.where(np.isfinite(x), r, np.where(np.isnan(x), _U64(0x7FFFFFFF), b)), "b32")
        return
    if dst_t in ("f16", "bf16", "f32", "f64"):
        if src_t in ("f16", "bf16", "f32", "f64"):
            x = _ftz_in(decode(src, src_t), src_t, ins.has("ftz"))
            if any(x_ in ins.mods for x_ in ("rni", "rzi", "rmi", "rpi")):
                x = _to_int_float(x, mode)                  # round to an integer in the same type
                mode = "rn"
            if ins.has("satfinite") and dst_t != "f64":
                top = decode(encode(np.inf, 0.0, dst_t, "rz"), dst_t)
                x = np.where(np.isnan(x), x, np.clip(x, -top, top))
            bits = _finish(m, ins, x, 0.0, dst_t, mode or "rn")
            if WIDTH[dst_t] >= WIDTH[src_t] and src_t != dst_t:   # widening keeps a NaN's payload, quietened
                bits = np.where(np.isnan(x), _widen_nan(src, src_t, dst_t), bits)
        else:
            s, e = _from_int(src, src_t)
            bits = _finish(m, ins, s, e, dst_t, mode or "rn")
        m.write(ins.operands[0], bits, dst_t)
        return
    # integer destination
    if src_t in ("f16", "bf16", "f32", "f64"):
        x = _ftz_in(decode(src, src_t), src_t, ins.has("ftz"))
        m.write(ins.operands[0], _to_int(x, dst_t, mode or "rz"), dst_t)
        return
    v = ptx_int.signed(src, WIDTH[src_t]) if src_t[0] == "s" else src
    if ins.has("sat"):
        w = WIDTH[dst_t]
        lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if dst_t[0] == "s" else (0, (1 << w) - 1)
        v = np.clip(v.astype(object), lo, hi).astype(np.int64) if src_t[0] == "s" else np.minimum(v, _U64(hi))
    bits = np.asarray(v).astype(np.int64).view(_U64) if np.asarray(v).dtype.kind == "i" else v
    m.write(ins.operands[0], bits, dst_t, signed=dst_t[0] == "s")


def _to_int_float(x, mode):
    return {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode](x)


def _widen_nan(src, src_t, dst_t):
    sw, dw = WIDTH[src_t], WIDTH[dst_t]
    sign = (src >> _U64(sw - 1)) & _U64(1)
    payload = src & _U64((1 << _FRAC[src_t]) - 1)
    exp_bits = dw - 1 - _FRAC[dst_t]
    quiet = _U64(1 << (_FRAC[dst_t] - 1))
    return (sign << _U64(dw - 1)) | (mask(exp_bits) << _U64(_FRAC[dst_t])) | quiet | \
        (payload << _U64(_FRAC[dst_t] - _FRAC[src_t]))


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
