"""The PTX subset the tracer runs for ``tl.inline_asm_elementwise``, checked against the GPU bit for bit.

    PYTHONPATH=. python3 benchmarks/fidelity/inline_asm.py --out OUT [--n 65536]

Each case is one PTX snippet as real kernels write it; it runs compiled on the GPU over N inputs (random bit
patterns, ordinary values across magnitudes and the special values: zeros, infinities, NaNs, subnormals,
extremes), then through the tracer's emulation (record/gpu/inlineasm.run, the code a traced launch runs)
on the same inputs, and the output bits are compared. Approximate instructions (``.approx``, ``div.full``)
are reported with their largest ulp distance instead. Writes OUT/inline_asm.json and OUT/inline_asm.md;
prints the table. Needs a CUDA GPU; ``--help`` works anywhere.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib

import numpy as np

# name -> (asm, constraints, input kinds, output kind, pack)
CASES = {
    "add.s32": ("add.s32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "add.sat.s32": ("add.sat.s32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "mul.hi.s32": ("mul.hi.s32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "mul.hi.u32": ("mul.hi.u32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "mul.wide.s32": ("mul.wide.s32 $0, $1, $2;", "=l,r,r", ["i32", "i32"], "i64", 1),
    "mul.hi.u64": ("mul.hi.u64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", 1),
    "mul.hi.s64": ("mul.hi.s64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", 1),
    "mad.lo.s32": ("mad.lo.s32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "div.s32": ("div.s32 $0, $1, $2;", "=r,r,r", ["i32", "small"], "i32", 1),
    "div.u32": ("div.u32 $0, $1, $2;", "=r,r,r", ["i32", "small"], "i32", 1),
    "rem.s32": ("rem.s32 $0, $1, $2;", "=r,r,r", ["i32", "small"], "i32", 1),
    "min.s32": ("min.s32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "max.u32": ("max.u32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", 1),
    "abs.s32": ("abs.s32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "shl.b32": ("shl.b32 $0, $1, $2;", "=r,r,r", ["i32", "shift"], "i32", 1),
    "shr.s32": ("shr.s32 $0, $1, $2;", "=r,r,r", ["i32", "shift"], "i32", 1),
    "shr.u32": ("shr.u32 $0, $1, $2;", "=r,r,r", ["i32", "shift"], "i32", 1),
    "shf.l.wrap.b32": ("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "shift"], "i32", 1),
    "shf.r.clamp.b32": ("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "shift"], "i32", 1),
    "lop3.b32 0xEA": ("lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "lop3.b32 0x96": ("lop3.b32 $0, $1, $2, $3, 0x96;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "lop3.b32 0x6A": ("lop3.b32 $0, $1, $2, $3, 0x6A;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "prmt.b32": ("prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "prmt.b32.f4e": ("prmt.b32.f4e $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "prmt.b32.b4e": ("prmt.b32.b4e $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "prmt.b32.ecl": ("prmt.b32.ecl $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "prmt.b32.rc16": ("prmt.b32.rc16 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "i32", "i32"], "i32", 1),
    "bfe.u32": ("bfe.u32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "shift", "shift"], "i32", 1),
    "bfe.s32": ("bfe.s32 $0, $1, $2, $3;", "=r,r,r,r", ["i32", "shift", "shift"], "i32", 1),
    "bfi.b32": ("bfi.b32 $0, $1, $2, $3, 11;", "=r,r,r,r", ["i32", "i32", "shift"], "i32", 1),
    "popc.b32": ("popc.b32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "clz.b32": ("clz.b32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "brev.b32": ("brev.b32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "bfind.s32": ("bfind.s32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "bfind.shiftamt.u32": ("bfind.shiftamt.u32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "setp+selp": ("{ .reg .pred p; setp.lt.s32 p, $1, $2; selp.b32 $0, $1, $2, p; }", "=r,r,r", ["i32", "i32"],
                  "i32", 1),
    "setp.gtu.f32 guard": ("{ .reg .pred p; setp.gtu.f32 p, $1, $2; mov.b32 $0, 5; @p mov.b32 $0, $1; }",
                           "=r,r,r", ["f32", "f32"], "i32", 1),
    "packed and/shl (pack 4)": ("and.b32 $0, $1, 0x1F1F1F1F; shl.b32 $0, $0, 3;", "=r,r", ["u8"], "u8", 4),
    "add.f32": ("add.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "add.rz.f32": ("add.rz.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "add.rm.f32": ("add.rm.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "add.ftz.f32": ("add.ftz.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "mul.rp.f32": ("mul.rp.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "mul.sat.f32": ("mul.sat.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "fma.rn.f32": ("fma.rn.f32 $0, $1, $2, $3;", "=r,r,r,r", ["f32", "f32", "f32"], "i32", 1),
    "fma.rz.f32": ("fma.rz.f32 $0, $1, $2, $3;", "=r,r,r,r", ["f32", "f32", "f32"], "i32", 1),
    "div.rn.f32": ("div.rn.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "div.rz.f32": ("div.rz.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "rcp.rn.f32": ("rcp.rn.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "sqrt.rn.f32": ("sqrt.rn.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "sqrt.rp.f32": ("sqrt.rp.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "min.f32": ("min.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "max.f32": ("max.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "min.NaN.f32": ("min.NaN.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "abs.f32": ("abs.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "neg.f32": ("neg.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "add.f64": ("add.f64 $0, $1, $2;", "=l,l,l", ["f64", "f64"], "i64", 1),
    "fma.rn.f64": ("fma.rn.f64 $0, $1, $2, $3;", "=l,l,l,l", ["f64", "f64", "f64"], "i64", 1),
    "div.rn.f64": ("div.rn.f64 $0, $1, $2;", "=l,l,l", ["f64", "f64"], "i64", 1),
    "add.rz.f64": ("add.rz.f64 $0, $1, $2;", "=l,l,l", ["f64", "f64"], "i64", 1),
    "add.f16": ("add.f16 $0, $1, $2;", "=h,h,h", ["f16", "f16"], "i16", 1),
    "mul.f16": ("mul.f16 $0, $1, $2;", "=h,h,h", ["f16", "f16"], "i16", 1),
    "fma.rn.f16": ("fma.rn.f16 $0, $1, $2, $3;", "=h,h,h,h", ["f16", "f16", "f16"], "i16", 1),
    "add.f16x2": ("add.f16x2 $0, $1, $2;", "=r,r,r", ["f16x2", "f16x2"], "i32", 1),
    "fma.rn.f16x2": ("fma.rn.f16x2 $0, $1, $2, $3;", "=r,r,r,r", ["f16x2", "f16x2", "f16x2"], "i32", 1),
    "fma.rn.bf16x2": ("fma.rn.bf16x2 $0, $1, $2, $3;", "=r,r,r,r", ["bf16x2", "bf16x2", "bf16x2"], "i32", 1),
    "min.f16x2": ("min.f16x2 $0, $1, $2;", "=r,r,r", ["f16x2", "f16x2"], "i32", 1),
    "max.bf16x2": ("max.bf16x2 $0, $1, $2;", "=r,r,r", ["bf16x2", "bf16x2"], "i32", 1),
    "sub.f16x2 (AWQ)": ("lop3.b32 $0, $1, 0x000F000F, 0x64006400, 0xEA; sub.f16x2 $0, $0, $2;", "=r,r,r",
                        ["i32", "f16x2"], "i32", 1),
    "cvt.rn.f16.f32": ("cvt.rn.f16.f32 $0, $1;", "=h,r", ["f32"], "i16", 1),
    "cvt.rz.f16.f32": ("cvt.rz.f16.f32 $0, $1;", "=h,r", ["f32"], "i16", 1),
    "cvt.rm.f16.f32": ("cvt.rm.f16.f32 $0, $1;", "=h,r", ["f32"], "i16", 1),
    "cvt.rn.bf16.f32": ("cvt.rn.bf16.f32 $0, $1;", "=h,r", ["f32"], "i16", 1),
    "cvt.rz.bf16.f32": ("cvt.rz.bf16.f32 $0, $1;", "=h,r", ["f32"], "i16", 1),
    "cvt.rn.f16x2.f32": ("cvt.rn.f16x2.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "cvt.rn.bf16x2.f32": ("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "cvt.rn.relu.f16x2.f32": ("cvt.rn.relu.f16x2.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
    "cvt.rn.satfinite.e4m3x2.f32": ("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,r,r", ["f32", "f32"], "i16", 1),
    "cvt.rn.satfinite.e5m2x2.f32": ("cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,r,r", ["f32", "f32"], "i16", 1),
    "cvt.rn.f16x2.e4m3x2": ("cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", ["i16"], "i32", 1),
    "cvt.rn.f16x2.e5m2x2": ("cvt.rn.f16x2.e5m2x2 $0, $1;", "=r,h", ["i16"], "i32", 1),
    "cvt.rni.s32.f32": ("cvt.rni.s32.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "cvt.rzi.u32.f32": ("cvt.rzi.u32.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "cvt.rmi.s64.f64": ("cvt.rmi.s64.f64 $0, $1;", "=l,l", ["f64"], "i64", 1),
    "cvt.rn.f32.s32": ("cvt.rn.f32.s32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "cvt.rz.f32.u32": ("cvt.rz.f32.u32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "cvt.rn.f32.s64": ("cvt.rn.f32.s64 $0, $1;", "=r,l", ["i64"], "i32", 1),
    "cvt.rn.f32.f64": ("cvt.rn.f32.f64 $0, $1;", "=r,l", ["f64"], "i32", 1),
    "cvt.f64.f32": ("cvt.f64.f32 $0, $1;", "=l,r", ["f32"], "i64", 1),
    "cvt.f32.f16": ("cvt.f32.f16 $0, $1;", "=r,h", ["f16"], "i32", 1),
    "cvt.rni.f32.f32": ("cvt.rni.f32.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "cvt.rna.tf32.f32": ("cvt.rna.tf32.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "cvt.sat.s8.s32": ("cvt.sat.s8.s32 $0, $1;", "=r,r", ["i32"], "i32", 1),
    "mov.b32 unpack/pack": ("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, $1; mov.b32 $0, {hi, lo}; }", "=r,r", ["i32"],
                            "i32", 1),
    "ex2.approx.f32": ("ex2.approx.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "tanh.approx.f32": ("tanh.approx.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "rcp.approx.f32": ("rcp.approx.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "lg2.approx.f32": ("lg2.approx.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "sin.approx.f32": ("sin.approx.f32 $0, $1;", "=r,r", ["f32"], "i32", 1),
    "div.full.f32": ("div.full.f32 $0, $1, $2;", "=r,r,r", ["f32", "f32"], "i32", 1),
}
_NP = {"i32": np.uint32, "i16": np.uint16, "i64": np.uint64, "u8": np.uint8, "f32": np.uint32, "f16": np.uint16,
       "f64": np.uint64, "f16x2": np.uint32, "bf16x2": np.uint32, "small": np.uint32, "shift": np.uint32}


def inputs(kind: str, n: int, rs: np.random.RandomState) -> np.ndarray:
    """N inputs of a kind, as unsigned bit patterns: a quarter random bits, a half ordinary values over many
    magnitudes, a quarter special values."""
    q = n // 4
    if kind in ("i32", "i16", "i64", "u8"):
        bits = np.dtype(_NP[kind]).itemsize * 8
        r = rs.randint(0, 2 ** 63, n, dtype=np.uint64) & np.uint64((1 << bits) - 1 if bits < 64 else 2 ** 64 - 1)
        edge = np.array([0, 1, 2 ** (bits - 1), 2 ** (bits - 1) - 1, 2 ** bits - 1], dtype=object)
        r[:40] = np.array([int(edge[i % 5]) for i in range(40)], dtype=np.uint64)
        return r.astype(_NP[kind])
    if kind == "small":
        return (rs.randint(-300, 300, n)).astype(np.int64).astype(np.uint32)
    if kind == "shift":
        return rs.randint(0, 40, n).astype(np.uint32)
    if kind in ("f32", "f64", "f16"):
        ft = {"f32": np.float32, "f64": np.float64, "f16": np.float16}[kind]
        ut = _NP[kind]
        info = np.finfo(ft)
        rand_bits = rs.randint(0, 2 ** 63, q, dtype=np.uint64).astype(ut)
        normal = (rs.randn(2 * q) * 10.0 ** rs.randint(-8 if kind != "f16" else -4, 9 if kind != "f16" else 4,
                                                         2 * q)).astype(ft).view(ut)
        specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, float(info.max), float(-info.max),
                             float(info.tiny), float(info.tiny) / 4, -float(info.tiny) / 8, 2.5, 3.5, -2.5],
                            dtype=ft).view(ut)
        rest = specials[rs.randint(0, specials.size, n - 3 * q)]
        out = np.concatenate([rand_bits, normal, rest])
        return out[rs.permutation(n)]
    if kind in ("f16x2", "bf16x2"):
        if kind == "f16x2":
            halves = inputs("f16", 2 * n, rs).astype(np.uint32)
        else:
            halves = (inputs("f32", 2 * n, rs) >> np.uint32(16)).astype(np.uint32)
        return halves[:n] | (halves[n:] << np.uint32(16))
    raise ValueError(kind)


def emulate(asm, cons, xs, out_kind, pack):
    import triton.language as tl
    from triton_trace.record.gpu import inlineasm
    from triton_trace.record.interp.access import TensorHandle
    tl_of = {np.uint32: tl.int32, np.uint16: tl.int16, np.uint64: tl.int64, np.uint8: tl.int8}
    handles = [TensorHandle(x.view(x.dtype.str.replace("u", "i")), tl_of[x.dtype.type]) for x in xs]
    res = inlineasm.run(None, asm, cons, handles, [tl_of[_NP[out_kind]]], pack)
    return np.asarray(res.get_result(0).data).view(_NP[out_kind])


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ulp distance between two fp32 bit arrays (NaN to NaN: 0; NaN to a number: 2^31)."""
    fa, fb = a.view(np.float32), b.view(np.float32)
    ia = np.where(fa < 0, np.int64(-2 ** 31) - a.view(np.int32).astype(np.int64), a.view(np.int32).astype(np.int64))
    ib = np.where(fb < 0, np.int64(-2 ** 31) - b.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64))
    d = np.abs(ia - ib)
    return np.where(np.isnan(fa) & np.isnan(fb), 0, np.where(np.isnan(fa) | np.isnan(fb), 2 ** 31, d))


def _kernels():
    """One kernel per operand count; the asm's result type is the output pointer's element type."""
    import triton
    import triton.language as tl

    @triton.jit
    def k1(X, O, ASM: tl.constexpr, CONS: tl.constexpr, PACK: tl.constexpr, B: tl.constexpr):
        r = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(O + r, tl.inline_asm_elementwise(ASM, CONS, [tl.load(X + r)], dtype=O.dtype.element_ty,
                                                  is_pure=True, pack=PACK))

    @triton.jit
    def k2(X, Y, O, ASM: tl.constexpr, CONS: tl.constexpr, PACK: tl.constexpr, B: tl.constexpr):
        r = tl.program_id(0) * B + tl.arange(0, B)
        v = tl.inline_asm_elementwise(ASM, CONS, [tl.load(X + r), tl.load(Y + r)], dtype=O.dtype.element_ty,
                                      is_pure=True, pack=PACK)
        tl.store(O + r, v)

    @triton.jit
    def k3(X, Y, Z, O, ASM: tl.constexpr, CONS: tl.constexpr, PACK: tl.constexpr, B: tl.constexpr):
        r = tl.program_id(0) * B + tl.arange(0, B)
        v = tl.inline_asm_elementwise(ASM, CONS, [tl.load(X + r), tl.load(Y + r), tl.load(Z + r)],
                                      dtype=O.dtype.element_ty, is_pure=True, pack=PACK)
        tl.store(O + r, v)

    return k1, k2, k3


def compile_all(cases) -> int:
    """Compile every case's kernel for sm_90 here (no GPU needed): a harness or ptxas error shows before
    GPU time is spent. Returns how many failed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    kernels, bad = _kernels(), 0
    for name, (asm, cons, kinds, out_kind, pack) in cases.items():
        names = ["X", "Y", "Z"][:len(kinds)] + ["O"]
        sig = {n: f"*i{np.dtype(_NP[k]).itemsize * 8}" for n, k in zip(names, list(kinds) + [out_kind])}
        sig.update(ASM="constexpr", CONS="constexpr", PACK="constexpr", B="constexpr")
        src = ASTSource(fn=kernels[len(kinds) - 1], signature=sig,
                        constexprs={"ASM": asm, "CONS": cons, "PACK": pack, "B": 1024})
        try:
            triton.compile(src, target=GPUTarget("cuda", 90, 32))
        except Exception as e:
            bad += 1
            print(f"{name}: does not compile for sm_90: {str(e).strip().splitlines()[-1][:200]}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=1 << 16)
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("--dry-run", action="store_true", help="emulate every case on this machine only (no GPU)")
    ap.add_argument("--budget", type=float, default=0.0, help="seconds after which no new case starts (0: none)")
    args = ap.parse_args(argv)
    import torch
    if args.dry_run:
        bad = 0
        for name, (asm, cons, kinds, out_kind, pack) in CASES.items():
            rs = np.random.RandomState(zlib.crc32(name.encode()))
            try:
                emulate(asm, cons, [inputs(k, args.n, rs) for k in kinds], out_kind, pack)
            except Exception as e:
                bad += 1
                print(f"{name}: {type(e).__name__}: {e}")
        print(f"{len(CASES) - bad} of {len(CASES)} cases emulated")
        failed = compile_all(CASES)
        print(f"{len(CASES) - failed} of {len(CASES)} cases compile for sm_90")
        return 1 if bad or failed else 0
    if not torch.cuda.is_available():
        print("inline_asm.py: needs a CUDA GPU")
        return 2
    import triton
    k1, k2, k3 = _kernels()
    torch_of = {np.uint32: torch.int32, np.uint16: torch.int16, np.uint64: torch.int64, np.uint8: torch.int8}
    os.makedirs(args.out, exist_ok=True)
    rows, t0 = [], time.time()
    for name, (asm, cons, kinds, out_kind, pack) in CASES.items():
        if args.k and args.k not in name:
            continue
        if args.budget and time.time() - t0 > args.budget:
            rows.append({"case": name, "asm": asm, "n": args.n, "status": "not_run", "error": "time budget spent"})
            continue
        rs = np.random.RandomState(zlib.crc32(name.encode()))
        xs = [inputs(k, args.n, rs) for k in kinds]
        dev = [torch.from_numpy(x.view(x.dtype.str.replace("u", "i"))).cuda() for x in xs]
        o = torch.zeros(args.n, dtype=torch_of[_NP[out_kind]], device="cuda")
        kern = {1: k1, 2: k2, 3: k3}[len(xs)]
        row = {"case": name, "asm": asm, "n": args.n}
        try:
            kern[(args.n // 1024,)](*dev, o, ASM=asm, CONS=cons, PACK=pack, B=1024)
            gpu = o.cpu().numpy().view(_NP[out_kind])
        except Exception as e:          # a snippet ptxas refuses on this GPU: say so, go on
            row.update(status="gpu_error", error=str(e).splitlines()[0][:200])
            rows.append(row)
            continue
        try:
            cpu = emulate(asm, cons, xs, out_kind, pack)
        except Exception as e:
            row.update(status="emulation_error", error=f"{type(e).__name__}: {str(e)[:200]}")
            rows.append(row)
            continue
        diff = np.flatnonzero(gpu != cpu)
        row.update(mismatches=int(diff.size), status="bit-exact" if diff.size == 0 else "differs")
        if "approx" in asm or "div.full" in asm:
            u = _ulps(gpu.astype(np.uint32), cpu.astype(np.uint32))
            # an approximation the trace follows bit for bit (rcp.approx, div.full: numerics/mufu.py) is exact
            row.update(status="approximate" if diff.size else "bit-exact", max_ulps=int(u.max()),
                       within_1ulp=float((u <= 1).mean()),
                       within_2ulp=float((u <= 2).mean()))
        if diff.size:
            row["examples"] = [{"inputs": [hex(int(x[i])) for x in xs], "gpu": hex(int(gpu[i])), "trace": hex(int(cpu[i]))}
                               for i in diff[:6]]
        rows.append(row)
        print(f"{name:32s} {row['status']:12s} {row.get('mismatches', '')}", flush=True)
    exact = sum(r["status"] == "bit-exact" for r in rows)
    summary = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
               "n": args.n, "cases": len(rows), "bit_exact": exact, "seconds": round(time.time() - t0, 1),
               "rows": rows}
    with open(os.path.join(args.out, "inline_asm.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    lines = [f"# Inline PTX on the CPU against {summary['gpu']} (Triton {summary['triton']}), {args.n} inputs a case",
             "", f"{exact} of {len(rows)} cases bit-exact.", "", "| case | result | mismatches | note |",
             "| --- | --- | --- | --- |"]
    for r in rows:
        note = r.get("error", "") or (f"max {r['max_ulps']} ulp, {r['within_1ulp']:.2%} within 1 ulp"
                                      if r["status"] == "approximate" else "")
        lines.append(f"| `{r['case']}` | {r['status']} | {r.get('mismatches', '')} | {note} |")
    with open(os.path.join(args.out, "inline_asm.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines[:3]))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(main())
