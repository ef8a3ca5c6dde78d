"""A small PTX interpreter: the inline assembly of ``tl.inline_asm_elementwise`` run on numpy, bit for bit.

Real kernels put a few PTX lines in ``tl.inline_asm_elementwise``: bit manipulation (``lop3``, ``prmt``,
``shf``, ``bfe``), packing and unpacking of narrow values (``mov.b32 {a, b}``, ``cvt.rn.f16x2.f32``, fp8
``cvt``), integer and float arithmetic with explicit rounding, loads and stores through pointers. This
module parses such a block (``parse``) and runs it over every instance at once (``Machine``): each register
holds one numpy array of raw bits (uint64), one entry per instance of the asm. The instructions' meaning is
in ``ptx_int`` (integer and bit operations) and ``ptx_float`` (floats and conversions, on the formats'
bits in ``ptx_formats``), written from the PTX ISA and checked against the GPU
(benchmarks/fidelity/inline_asm.py), whose bits win where the ISA leaves a result open (NaNs, by zero).

What is not here raises ``PtxUnsupported`` naming the statement: branches and labels, special registers
that depend on where a lane sits on the GPU (``%laneid``, ``%tid``, ``%smid``; the timers ``%globaltimer``
and ``%clock`` read the host's clock), shared memory, warp-level
instructions (``shfl``, ``vote``, ``bar``), carry chains across statements. The approximate instructions
(``ex2.approx``, ``tanh.approx``, ...) compute the correctly rounded value: their bits are the hardware's
(within the PTX ISA's error bound), and ``Machine.approximate`` lists the ones a block used.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

# the width of each PTX type, in bits
WIDTH = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
         "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
         "b64": 64, "u64": 64, "s64": 64, "f64": 64, "e4m3x2": 16, "e5m2x2": 16, "e2m1x2": 8}
# the register width of an LLVM constraint letter
CONSTRAINT_WIDTH = {"c": 8, "h": 16, "r": 32, "f": 32, "l": 64, "d": 64, "b": 1}
_U64 = np.uint64


class PtxUnsupported(Exception):
    """A statement this interpreter cannot run; the message names it."""


@dataclass(frozen=True)
class Operand:
    kind: str                 # bind | reg | imm | vec | mem | sink | pair
    value: object = None      # bind: index; reg: name; imm: (form, number); vec/pair: tuple; mem: (base, offset)
    negate: bool = False


@dataclass(frozen=True)
class Instr:
    text: str
    op: str
    mods: tuple
    operands: tuple
    guard: Optional[Operand] = None

    def types(self) -> list:
        return [m for m in self.mods if m in WIDTH]

    def has(self, mod: str) -> bool:
        return mod in self.mods


@dataclass
class Block:
    instrs: list
    registers: dict = field(default_factory=dict)      # declared name -> width


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DECL = re.compile(r"^\.reg\s+\.(\w+)\s+(.*)$", re.S)
_RANGE = re.compile(r"^(%?[\w$]+)<(\d+)>$")
_INT = re.compile(r"^-?(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)[uU]?$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def parse(asm: str) -> Block:
    """The statements of an inline asm string; raises PtxUnsupported on what cannot run."""
    block = Block([])
    for raw in _COMMENT.sub(" ", asm).split(";"):
        stmt = raw.strip()
        while stmt[:1] in ("{", "}"):            # scope braces: registers are named apart anyway
            stmt = stmt[1:].strip()
        if not stmt:
            continue
        if ":" in stmt.split()[0] and not stmt.startswith("@"):
            raise PtxUnsupported(f"label {stmt.split()[0]!r}: branches are not supported")
        decl = _DECL.match(stmt)
        if decl:
            _declare(block, decl.group(1), decl.group(2), stmt)
            continue
        if stmt.startswith("."):
            raise PtxUnsupported(f"directive {stmt!r}")
        block.instrs.append(_instruction(stmt))
    return block


def _declare(block: Block, type_name: str, names: str, stmt: str) -> None:
    if type_name not in WIDTH:
        raise PtxUnsupported(f"register type .{type_name} in {stmt!r}")
    for name in (n.strip() for n in names.split(",")):
        m = _RANGE.match(name)
        if m:
            for i in range(int(m.group(2))):
                block.registers[f"{m.group(1)}{i}"] = WIDTH[type_name]
        elif name:
            block.registers[name] = WIDTH[type_name]


def _instruction(stmt: str) -> Instr:
    guard = None
    if stmt.startswith("@"):
        g, stmt = stmt[1:].split(None, 1)
        guard = _operand(g)
    parts = stmt.split(None, 1)
    opcode = parts[0]
    operands = tuple(_operand(o) for o in _split_top(parts[1])) if len(parts) > 1 else ()
    op, *mods = opcode.split(".")
    return Instr(" ".join(stmt.split()), op, tuple(mods), operands, guard)


def _split_top(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [o.strip() for o in out if o.strip()]


def _operand(text: str) -> Operand:
    t = text.strip()
    if t.startswith("{") and t.endswith("}"):
        return Operand("vec", tuple(_operand(x) for x in _split_top(t[1:-1])))
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].replace(" ", "")
        m = re.match(r"^(.+?)(?:([+-])(0[xX][0-9a-fA-F]+|\d+))?$", inner)
        off = int(m.group(3), 0) * (-1 if m.group(2) == "-" else 1) if m.group(3) else 0
        return Operand("mem", (_operand(m.group(1)), off))
    if "|" in t:
        return Operand("pair", tuple(_operand(x) for x in t.split("|")))
    if t.startswith("!"):
        inner = _operand(t[1:])
        return Operand(inner.kind, inner.value, True)
    if t == "_":
        return Operand("sink")
    if re.fullmatch(r"\$\d+", t):
        return Operand("bind", int(t[1:]))
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
        return Operand("imm", ("f32bits", int(t[2:], 16)))
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
        return Operand("imm", ("f64bits", int(t[2:], 16)))
    if _INT.match(t):
        return Operand("imm", ("int", int(t.rstrip("uU"), 0)))
    if _FLOAT.match(t):
        return Operand("imm", ("float", float(t)))
    if re.fullmatch(r"%?[A-Za-z_][\w$]*(\.[xyz])?", t):
        return Operand("reg", t)
    raise PtxUnsupported(f"operand {t!r}")


def mask(width: int):
    return _U64((1 << width) - 1) if width < 64 else _U64(0xFFFFFFFFFFFFFFFF)


class Machine:
    """Runs a parsed block over ``n`` instances. ``slots[i]`` is the bits of operand ``$i`` (outputs first,
    then inputs, as Triton numbers them); ``alias`` maps a tied input's number onto its output's.
    ``memory`` (optional) provides ``load(addr, ptx_type, active)`` and ``store(addr, bits, ptx_type,
    active)`` for ld.global/st.global."""

    def __init__(self, n: int, slots: dict, widths: dict, alias: Optional[dict] = None, memory=None):
        self.n = n
        self.slots = slots
        self.widths = widths
        self.alias = alias or {}
        self.memory = memory
        self.regs: dict = {}
        self.reg_widths: dict = {}
        self.approximate: set = set()

    def run(self, block: Block, ops: dict) -> None:
        self.reg_widths.update(block.registers)
        for name, width in block.registers.items():
            self.regs[name] = np.zeros(self.n, dtype=_U64)
        for ins in block.instrs:
            fn = ops.get(ins.op)
            if fn is None:
                raise PtxUnsupported(f"instruction {ins.text!r}")
            self.active = None if ins.guard is None else self.predicate(ins.guard)
            try:
                fn(self, ins)
            except PtxUnsupported:
                raise
            except (KeyError, ValueError, IndexError) as e:
                raise PtxUnsupported(f"instruction {ins.text!r} ({e})") from None

    # --- operands -----------------------------------------------------------------------------------
    def _slot(self, index: int) -> int:
        return self.alias.get(index, index)

    def read(self, op: Operand, ptx_type: str) -> np.ndarray:
        """The operand's bits as ``ptx_type`` reads them: a register's low bits, an immediate encoded."""
        width = WIDTH[ptx_type]
        if op.kind == "imm":
            return np.full(self.n, _encode_imm(op.value, ptx_type), dtype=_U64)
        if op.kind == "bind":
            bits = self.slots[self._slot(op.value)]
        elif op.kind == "reg":
            bits = self._reg(op.value)
        else:
            raise PtxUnsupported(f"operand of kind {op.kind} where a value is read")
        bits = bits & mask(width)
        if op.negate:                 # !p
            bits = bits ^ _U64(1)
        return bits

    def _reg(self, name: str) -> np.ndarray:
        if name in _TIMERS:           # host time: a kernel that times itself still runs (the values are the CPU's)
            return np.full(self.n, _TIMERS[name](time.monotonic_ns()), dtype=_U64)
        if name not in self.regs:
            if name.startswith("%"):
                raise PtxUnsupported(f"special or undeclared register {name}: it depends on where the lane "
                                     f"runs on the GPU")
            raise PtxUnsupported(f"undeclared register {name}")
        return self.regs[name]

    def write(self, op: Operand, bits: np.ndarray, ptx_type: str, signed: bool = False) -> None:
        """Store ``bits`` (already ``ptx_type`` wide) into a register, zero- or sign-extended to its width;
        under a predicate guard only the active instances change."""
        if op.kind == "sink":
            return
        width = WIDTH[ptx_type]
        bits = np.broadcast_to(np.asarray(bits, dtype=_U64) & mask(width), (self.n,))
        if op.kind == "bind":
            key, table, reg_width = self._slot(op.value), self.slots, self.widths[self._slot(op.value)]
        elif op.kind == "reg":
            self._reg(op.value)
            key, table, reg_width = op.value, self.regs, self.reg_widths[op.value]
        else:
            raise PtxUnsupported(f"operand of kind {op.kind} where a value is written")
        if signed and width < reg_width:
            sign = (bits >> _U64(width - 1)) & _U64(1)
            bits = np.where(sign == 1, bits | (mask(reg_width) ^ mask(width)), bits)
        bits = bits & mask(reg_width)
        if self.active is not None:
            bits = np.where(self.active, bits, table[key])
        table[key] = bits.astype(_U64)

    def predicate(self, op: Operand) -> np.ndarray:
        return self.read(op, "pred").astype(bool)


# the timer registers, read from the host's monotonic clock in nanoseconds (%clock counts them as cycles)
_TIMERS = {"%globaltimer": lambda t: t, "%globaltimer_lo": lambda t: t & 0xFFFFFFFF,
           "%globaltimer_hi": lambda t: t >> 32 & 0xFFFFFFFF, "%clock64": lambda t: t, "%clock": lambda t: t & 0xFFFFFFFF}


def _encode_imm(value, ptx_type: str) -> int:
    form, number = value
    width = WIDTH[ptx_type]
    kind = ptx_type[0]
    if ptx_type.startswith("bf16") or kind == "f":
        fl = {"f32bits": lambda: np.uint32(number).view(np.float32).item(),
              "f64bits": lambda: np.uint64(number).view(np.float64).item()}.get(form, lambda: float(number))()
        if ptx_type == "f64":
            return int(np.float64(fl).view(np.uint64))
        if ptx_type in ("f32", "tf32"):
            if form == "f32bits":
                return number
            return int(np.float32(fl).view(np.uint32))
        if ptx_type in ("f16", "f16x2"):
            return int(np.float16(fl).view(np.uint16)) if form != "int" else number & 0xFFFF
        return number & 0xFFFF if form == "int" else int(np.float32(fl).view(np.uint32)) >> 16
    if form != "int":
        raise PtxUnsupported(f"float immediate for .{ptx_type}")
    return number & ((1 << width) - 1)


OpFn = Callable[[Machine, Instr], None]
