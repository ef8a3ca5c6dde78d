"""PTX integer, bit and data-movement instructions on numpy (see ptx.py): the meaning of each is the PTX ISA's
(section "Integer Arithmetic Instructions", "Logic and Shift Instructions", "Data Movement"), wrapping in
the instruction's width as the hardware does. Every function takes the machine and the parsed instruction."""
from __future__ import annotations

import numpy as np

from .ptx import WIDTH, Instr, Machine, PtxUnsupported, mask

_U64 = np.uint64


def itype(ins: Instr) -> str:
    types = ins.types()
    if not types:
        raise PtxUnsupported(f"no type on {ins.text!r}")
    return types[-1]


def signed(bits: np.ndarray, width: int) -> np.ndarray:
    """Bits of a ``width``-bit two's complement integer as int64."""
    bits = np.asarray(bits, dtype=_U64) & mask(width)
    if width == 64:
        return bits.view(np.int64)
    sign = _U64(1 << (width - 1))
    return (bits ^ sign).astype(np.int64) - np.int64(1 << (width - 1))


def value(m: Machine, ins: Instr, i: int, t: str) -> np.ndarray:
    """Operand ``i`` as a number: int64 for .sN, uint64 otherwise."""
    bits = m.read(ins.operands[i], t)
    return signed(bits, WIDTH[t]) if t[0] == "s" else bits


def put(m: Machine, ins: Instr, v, t: str) -> None:
    m.write(ins.operands[0], np.asarray(v).astype(np.int64).view(_U64) if np.asarray(v).dtype.kind == "i"
            else np.asarray(v, dtype=_U64), t)


def _saturate(v: np.ndarray, t: str) -> np.ndarray:
    w = WIDTH[t]
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)
    return np.clip(v, lo, hi)


def add(m, ins):
    t = itype(ins)
    if ins.has("cc") or ins.op == "addc":
        raise PtxUnsupported(f"carry chain in {ins.text!r}")
    a, b = value(m, ins, 1, t), value(m, ins, 2, t)
    with np.errstate(over="ignore"):
        r = a + b if ins.op == "add" else a - b
    if ins.has("sat"):
        r = _saturate(a.astype(object) + b.astype(object) if ins.op == "add" else a.astype(object) - b.astype(object), t)
        r = np.asarray(r, dtype=np.int64)
    put(m, ins, r, t)


def _wide_mul(a: np.ndarray, b: np.ndarray, t: str):
    """(low, high) 64-bit halves of the exact product of two values of type ``t`` (up to 64 bits)."""
    w = WIDTH[t]
    if w <= 32:
        p = a.astype(np.int64) * b.astype(np.int64) if t[0] == "s" else a.astype(_U64) * b.astype(_U64)
        return p.astype(np.int64).view(_U64) if t[0] == "s" else p, None
    # 64 x 64: schoolbook on 32-bit halves, exact in uint64
    ua, ub = a.astype(np.int64).view(_U64) if t[0] == "s" else a, b.astype(np.int64).view(_U64) if t[0] == "s" else b
    m32 = _U64(0xFFFFFFFF)
    a0, a1, b0, b1 = ua & m32, ua >> _U64(32), ub & m32, ub >> _U64(32)
    with np.errstate(over="ignore"):
        p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
        mid = (p00 >> _U64(32)) + (p01 & m32) + (p10 & m32)
        lo = (p00 & m32) | (mid << _U64(32))
        hi = p11 + (p01 >> _U64(32)) + (p10 >> _U64(32)) + (mid >> _U64(32))
        if t[0] == "s":           # signed high half: subtract the other operand where one is negative
            hi = hi - np.where(a < 0, ub, _U64(0)) - np.where(b < 0, ua, _U64(0))
    return lo, hi


def mul(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    a, b = value(m, ins, 1, t), value(m, ins, 2, t)
    lo, hi = _wide_mul(a, b, t)
    if ins.has("wide"):
        if w > 32:
            raise PtxUnsupported(f"{ins.text!r}: a 128-bit result")
        r, out_t = lo, t[0] + str(2 * w)
    elif ins.has("hi"):
        r, out_t = (lo.astype(_U64) >> _U64(w) if w <= 32 else hi), t
        if w <= 32 and t[0] == "s":
            r = (lo.view(np.int64) >> np.int64(w)).view(_U64)
    else:
        r, out_t = lo, t
    if ins.op == "mad":
        c = value(m, ins, 3, out_t).astype(np.int64).view(_U64) if out_t[0] == "s" else value(m, ins, 3, out_t)
        with np.errstate(over="ignore"):
            r = r.astype(_U64) + c
    m.write(ins.operands[0], r.astype(_U64), out_t)


_REM_BY_ZERO_ONES = ("s32",)


def divrem(m, ins):
    t = itype(ins)
    a, b = value(m, ins, 1, t), value(m, ins, 2, t)
    safe = np.where(b == 0, 1, b)
    if t[0] == "s":                # truncation toward zero; INT_MIN / -1 wraps
        with np.errstate(over="ignore"):
            q = np.abs(a).astype(_U64) // np.abs(safe).astype(_U64)
            q = np.where((a < 0) != (safe < 0), -q.astype(np.int64), q.astype(np.int64))
            r = a - q * safe
    else:
        q, r = a // safe, a % safe
    # by zero, what the GPU's division routine returns (sm_90 measured): all ones, for div and for rem.s32
    # alike; rem of the other types keeps the dividend
    ones = np.int64(-1) if t[0] == "s" else mask(WIDTH[t])
    if ins.op == "div" or t in _REM_BY_ZERO_ONES:
        out = np.where(b == 0, ones, q if ins.op == "div" else r)
    else:
        out = np.where(b == 0, a, r)
    put(m, ins, out, t)


def minmax(m, ins):
    t = itype(ins)
    a, b = value(m, ins, 1, t), value(m, ins, 2, t)
    put(m, ins, np.minimum(a, b) if ins.op == "min" else np.maximum(a, b), t)


def absneg(m, ins):
    t = itype(ins)
    a = value(m, ins, 1, t)
    with np.errstate(over="ignore"):
        put(m, ins, np.abs(a) if ins.op == "abs" else -a.astype(np.int64), t)


def logic(m, ins):
    t = itype(ins)
    a = m.read(ins.operands[1], t)
    if ins.op in ("not", "cnot"):
        r = (a == 0).astype(_U64) if ins.op == "cnot" else ~a
    else:
        b = m.read(ins.operands[2], t)
        r = {"and": a & b, "or": a | b, "xor": a ^ b}[ins.op]
    m.write(ins.operands[0], r, t)


def shift(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    n = m.read(ins.operands[2], "u32")
    big = n >= _U64(w)
    n = np.minimum(n, _U64(w - 1))
    if ins.op == "shl":
        r = np.where(big, _U64(0), m.read(ins.operands[1], t) << n)
    elif t[0] == "s":
        v = signed(m.read(ins.operands[1], t), w)
        r = (v >> n.astype(np.int64)).view(_U64)        # past the width: all sign bits (n clamped to w-1)
    else:
        r = np.where(big, _U64(0), m.read(ins.operands[1], t) >> n)
    m.write(ins.operands[0], r, t)


def shf(m, ins):
    """Funnel shift of the 64-bit pair b:a by c (mod 32 with .wrap, at most 32 with .clamp)."""
    a, b = m.read(ins.operands[1], "b32"), m.read(ins.operands[2], "b32")
    c = m.read(ins.operands[3], "u32")
    n = c & _U64(31) if ins.has("wrap") else np.minimum(c, _U64(32))
    pair = (b << _U64(32)) | a
    r = (pair << n) >> _U64(32) if ins.has("l") else pair >> n
    m.write(ins.operands[0], r, "b32")


def lop3(m, ins):
    a, b, c = (m.read(ins.operands[i], "b32") for i in (1, 2, 3))
    lut = int(m.read(ins.operands[4], "b32")[0]) & 0xFF
    full = mask(32)
    r = np.zeros_like(a)
    for i in range(8):             # bit i of the table is the result for (a, b, c) = bits of i, a highest
        if lut >> i & 1:
            r |= (a if i & 4 else a ^ full) & (b if i & 2 else b ^ full) & (c if i & 1 else c ^ full)
    m.write(ins.operands[0], r, "b32")


_PRMT_MODES = {
    "f4e": lambda n, i: (n + i) % 8, "b4e": lambda n, i: (n - i) % 8, "rc8": lambda n, i: n,
    "ecl": lambda n, i: max(i, n), "ecr": lambda n, i: min(i, n), "rc16": lambda n, i: 2 * (n & 1) + (i & 1)}


def prmt(m, ins):
    a, b, c = (m.read(ins.operands[i], "b32") for i in (1, 2, 3))
    src = (b << _U64(32)) | a                     # bytes 0-3 from a, 4-7 from b
    byte = [(src >> _U64(8 * k)) & _U64(0xFF) for k in range(8)]
    stack = np.stack(byte)                        # (8, n)
    mode = next((x for x in ins.mods if x in _PRMT_MODES), None)
    r = np.zeros_like(a)
    for i in range(4):
        if mode is None:
            sel = (c >> _U64(4 * i)) & _U64(0xF)
            chosen = np.take_along_axis(stack, (sel & _U64(7)).astype(np.int64)[None], 0)[0]
            sign = np.where(chosen & _U64(0x80), _U64(0xFF), _U64(0))
            chosen = np.where(sel & _U64(8), sign, chosen)
        else:
            n = (c & _U64(3)).astype(np.int64)
            idx = np.vectorize(lambda k: _PRMT_MODES[mode](int(k), i), otypes=[np.int64])(n) if n.size else n
            chosen = np.take_along_axis(stack, idx[None], 0)[0]
        r |= chosen << _U64(8 * i)
    m.write(ins.operands[0], r, "b32")


def bfe(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    a = m.read(ins.operands[1], t)
    pos = m.read(ins.operands[2], "u32") & _U64(0xFF)
    length = m.read(ins.operands[3], "u32") & _U64(0xFF)
    r = np.zeros_like(a)
    msb = _U64(w - 1)
    if t[0] == "s":
        top = np.minimum(pos + length - _U64(1), msb)
        sbit = np.where(length == 0, _U64(0), (a >> np.where(length == 0, _U64(0), top)) & _U64(1))
    else:
        sbit = np.zeros_like(a)
    for i in range(w):
        i64 = _U64(i)
        inside = (i64 < length) & (pos + i64 <= msb)
        bit = np.where(inside, (a >> np.minimum(pos + i64, msb)) & _U64(1), sbit)
        r |= bit << i64
    m.write(ins.operands[0], r, t)


def bfi(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    a, b = m.read(ins.operands[1], t), m.read(ins.operands[2], t)
    pos = m.read(ins.operands[3], "u32") & _U64(0xFF)
    length = m.read(ins.operands[4], "u32") & _U64(0xFF)
    r = b.copy()
    for i in range(w):
        i64 = _U64(i)
        at = pos + i64
        ok = (i64 < length) & (at < _U64(w))
        sh = np.minimum(at, _U64(w - 1))
        bit = (a >> i64) & _U64(1)
        r = np.where(ok, (r & ~(_U64(1) << sh)) | (bit << sh), r)
    m.write(ins.operands[0], r, t)


def bitcount(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    a = m.read(ins.operands[1], t)
    bits = np.stack([(a >> _U64(i)) & _U64(1) for i in range(w)])       # (w, n), bit 0 first
    if ins.op == "popc":
        r = bits.sum(0).astype(_U64)
    elif ins.op == "clz":
        nz = bits[::-1].argmax(0)
        r = np.where(a == 0, _U64(w), nz.astype(_U64))
    elif ins.op == "brev":
        r = sum(bits[i] << _U64(w - 1 - i) for i in range(w))
        m.write(ins.operands[0], np.asarray(r, dtype=_U64), t)
        return
    else:                          # bfind: the highest bit unlike the sign (signed) / set (unsigned)
        v = a ^ np.where((a >> _U64(w - 1)) & _U64(1), mask(w), _U64(0)) if t[0] == "s" else a
        vb = np.stack([(v >> _U64(i)) & _U64(1) for i in range(w)])
        hi = (w - 1 - vb[::-1].argmax(0)).astype(_U64)
        none = v == 0
        r = np.where(none, mask(32), _U64(w - 1) - hi if ins.has("shiftamt") else hi)
    m.write(ins.operands[0], r, "u32")


def mov(m, ins):
    t = itype(ins)
    w = WIDTH[t]
    dst, src = ins.operands[0], ins.operands[1]
    if dst.kind == "vec":          # unpack: lowest part to the first register
        part = w // len(dst.value)
        bits = m.read(src, t)
        for i, d in enumerate(dst.value):
            m.write(d, (bits >> _U64(part * i)) & mask(part), "b" + str(part))
        return
    if src.kind == "vec":          # pack
        part = w // len(src.value)
        r = np.zeros(m.n, dtype=_U64)
        for i, s in enumerate(src.value):
            r |= m.read(s, "b" + str(part)) << _U64(part * i)
        m.write(dst, r, t)
        return
    m.write(dst, m.read(src, t), t)


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}


def compare_int(m, ins, cmp: str) -> np.ndarray:
    t = itype(ins)
    a, b = value(m, ins, 1, t), value(m, ins, 2, t)
    return _CMP[cmp](a, b)


def selp(m, ins):
    t = itype(ins)
    p = m.predicate(ins.operands[3])
    m.write(ins.operands[0], np.where(p, m.read(ins.operands[1], t), m.read(ins.operands[2], t)), t)


def memory(m, ins):
    """ld.global / st.global (and .v2/.v4) through the machine's memory callbacks, which record the access."""
    if m.memory is None or not (ins.has("global") or not any(s in ins.mods for s in ("shared", "local", "const", "param"))):
        raise PtxUnsupported(f"{ins.text!r}: only global memory can be reached from the CPU")
    t = itype(ins)
    vec = next((int(x[1:]) for x in ins.mods if x in ("v2", "v4", "v8")), 1)
    if ins.op == "ld":
        dst, addr_op = ins.operands[0], ins.operands[1]
    else:
        addr_op, dst = ins.operands[0], ins.operands[1]
    base, offset = addr_op.value
    addr = m.read(base, "u64") + _U64(offset % (1 << 64))
    regs = dst.value if dst.kind == "vec" else (dst,)
    if len(regs) != vec:
        raise PtxUnsupported(f"{ins.text!r}: {len(regs)} registers for .v{vec}")
    step = _U64(WIDTH[t] // 8)
    for k, reg in enumerate(regs):
        where = addr + step * _U64(k)
        if ins.op == "ld":
            m.write(reg, m.memory.load(where, t, m.active), t, signed=t[0] == "s")
        else:
            m.memory.store(where, m.read(reg, t), t, m.active)


INT_OPS = {"add": add, "sub": add, "mul": mul, "mad": mul, "div": divrem, "rem": divrem, "min": minmax,
           "max": minmax, "abs": absneg, "neg": absneg, "and": logic, "or": logic, "xor": logic,
           "not": logic, "cnot": logic, "shl": shift, "shr": shift, "shf": shf, "lop3": lop3, "prmt": prmt,
           "bfe": bfe, "bfi": bfi, "popc": bitcount, "clz": bitcount, "brev": bitcount, "bfind": bitcount,
           "mov": mov, "selp": selp, "ld": memory, "st": memory}
