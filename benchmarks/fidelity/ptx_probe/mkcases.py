"""The inputs the H100 run left unmeasured (NaN payloads through f64 ops, abs/neg of other types, rem by zero of
other types, relu of -0, cvt NaN pairs), as hand-picked cases for probe.py: writes cases.json beside this file."""
import os
import json, struct
import numpy as np
def f32(x): return struct.unpack('<I', struct.pack('<f', x))[0]
def f64(x): return struct.unpack('<Q', struct.pack('<d', x))[0]
def f16(x): return int(np.float16(x).view(np.uint16))
N32 = [0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000, 0xffb98047, 0x7fffffff, 0xffffffff, 0x7fc12345, 0x7f812345]
V32 = N32 + [0, 0x80000000, 0x7f800000, 0xff800000, f32(1.5), f32(-2.5), 0x00000001, 0x80000001, f32(3e38), f32(-3e38)]
N64 = [0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001, 0xfff0000000000001, 0x7ff4000000000000,
       0x7ff8000012345678, 0xfffc0000deadbeef, 0x7fffffffffffffff, 0xffffffffffffffff, 0x7ff00000fff00000]
V64 = N64 + [0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, f64(1.5), f64(-2.5), 1, (1 << 63) | 1,
             f64(9.3e18), f64(-9.3e18)]
N16 = [0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7d00, 0xff31, 0x7fff, 0xffff, 0x7e55, 0x7c55]
V16 = N16 + [0, 0x8000, 0x7c00, 0xfc00, f16(1.5), f16(-2.5), 1, 0x8001, 0x7bff, 0xfbff]
NB16 = [0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7fa0, 0xffb9, 0x7fff, 0xffff, 0x7fc1, 0x7f82]
VB16 = NB16 + [0, 0x8000, 0x7f80, 0xff80, 0x3fc0, 0xc020, 1, 0x8001, 0x7f7f, 0xff7f]
def pair(lo, hi): return [(h << 16) | l for l, h in zip(lo, hi)]
VX2 = pair(V16, V16[::-1]); VBX2 = pair(VB16, VB16[::-1])
cases = []
def c(name, asm, cons, kinds, out, ins): cases.append([name, asm, cons, kinds, out, ins])
# integer division by zero
A32 = [0, 1, 0xffffffff, 0x80000000, 5, 0xfffffff9, 0x6c51c4ff, 0xa2dde784, 7, 0x80000000]
B32 = [0] * 8 + [0xffffffff, 0xffffffff]
A64 = [0, 1, 2**64 - 1, 1 << 63, 5, 2**64 - 7, 0x6c51c4ff12345678, 0xa2dde78400000001, 7, 1 << 63]
B64 = [0] * 8 + [2**64 - 1, 2**64 - 1]
A16 = [0, 1, 0xffff, 0x8000, 5, 0xfff9, 0x6c51, 0xa2dd, 7, 0x8000]
B16 = [0] * 8 + [0xffff, 0xffff]
for op in ("div", "rem"):
    for s in ("s", "u"):
        c(f"{op}.{s}32", f"{op}.{s}32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [A32, B32])
        c(f"{op}.{s}64", f"{op}.{s}64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [A64, B64])
        c(f"{op}.{s}16", f"{op}.{s}16 $0, $1, $2;", "=h,h,h", ["i16", "i16"], "i16", [A16, B16])
# abs / neg of NaN, every float type
for op in ("abs", "neg"):
    c(f"{op}.f32", f"{op}.f32 $0, $1;", "=r,r", ["i32"], "i32", [V32])
    c(f"{op}.ftz.f32", f"{op}.ftz.f32 $0, $1;", "=r,r", ["i32"], "i32", [V32])
    c(f"{op}.f64", f"{op}.f64 $0, $1;", "=l,l", ["i64"], "i64", [V64])
    c(f"{op}.f16", f"{op}.f16 $0, $1;", "=h,h", ["i16"], "i16", [V16])
    c(f"{op}.bf16", f"{op}.bf16 $0, $1;", "=h,h", ["i16"], "i16", [VB16])
    c(f"{op}.f16x2", f"{op}.f16x2 $0, $1;", "=r,r", ["i32"], "i32", [VX2])
    c(f"{op}.bf16x2", f"{op}.bf16x2 $0, $1;", "=r,r", ["i32"], "i32", [VBX2])
# f64 arithmetic on NaN payloads and invalid operations
ONE = [f64(1.0)] * 20
c("add.f64", "add.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [V64, ONE])
c("add.f64 inf-inf", "add.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [[0x7ff0000000000000] * 2, [0xfff0000000000000] * 2])
c("mul.f64", "mul.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [V64, V64[::-1]])
c("fma.rn.f64", "fma.rn.f64 $0, $1, $2, $3;", "=l,l,l,l", ["i64"] * 3, "i64", [ONE, V64, V64[::-1]])
c("div.rn.f64", "div.rn.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [V64, V64[::-1]])
c("sqrt.rn.f64", "sqrt.rn.f64 $0, $1;", "=l,l", ["i64"], "i64", [V64])
c("min.f64", "min.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [V64, N64 + N64])
c("max.f64", "max.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [V64, ONE])
c("rcp.rn.f64", "rcp.rn.f64 $0, $1;", "=l,l", ["i64"], "i64", [V64])
c("add.f32", "add.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [V32, [f32(1.0)] * 20])
c("add.f16", "add.f16 $0, $1, $2;", "=h,h,h", ["i16", "i16"], "i16", [V16, [f16(1.0)] * 20])
# cvt of NaN
c("cvt.f32.f16", "cvt.f32.f16 $0, $1;", "=r,h", ["i16"], "i32", [V16])
c("cvt.f32.bf16", "cvt.f32.bf16 $0, $1;", "=r,h", ["i16"], "i32", [VB16])
c("cvt.f64.f16", "cvt.f64.f16 $0, $1;", "=l,h", ["i16"], "i64", [V16])
c("cvt.f64.bf16", "cvt.f64.bf16 $0, $1;", "=l,h", ["i16"], "i64", [VB16])
c("cvt.f64.f32", "cvt.f64.f32 $0, $1;", "=l,r", ["i32"], "i64", [V32])
c("cvt.ftz.f64.f32", "cvt.ftz.f64.f32 $0, $1;", "=l,r", ["i32"], "i64", [V32])
c("cvt.rn.f32.f64", "cvt.rn.f32.f64 $0, $1;", "=r,l", ["i64"], "i32", [V64])
c("cvt.rz.f32.f64", "cvt.rz.f32.f64 $0, $1;", "=r,l", ["i64"], "i32", [V64])
c("cvt.rn.f16.f64", "cvt.rn.f16.f64 $0, $1;", "=h,l", ["i64"], "i16", [V64])
c("cvt.rn.bf16.f64", "cvt.rn.bf16.f64 $0, $1;", "=h,l", ["i64"], "i16", [V64])
c("cvt.rn.f16.f32", "cvt.rn.f16.f32 $0, $1;", "=h,r", ["i32"], "i16", [V32])
c("cvt.rn.bf16.f32", "cvt.rn.bf16.f32 $0, $1;", "=h,r", ["i32"], "i16", [V32])
c("cvt.rni.f32.f32", "cvt.rni.f32.f32 $0, $1;", "=r,r", ["i32"], "i32", [V32])
c("cvt.rmi.f64.f64", "cvt.rmi.f64.f64 $0, $1;", "=l,l", ["i64"], "i64", [V64])
c("cvt.ftz.f32.f32", "cvt.ftz.f32.f32 $0, $1;", "=r,r", ["i32"], "i32", [V32])
TF = V32 + [0x7f801000, 0x7f800fff, 0xff800001, 0x3f801000, 0x3f803000, 0x7f7fffff]
for mode in ("rna", "rn", "rz"):
    c(f"cvt.{mode}.tf32.f32", f"cvt.{mode}.tf32.f32 $0, $1;", "=r,r", ["i32"], "i32", [TF])
c("cvt.rna.satfinite.tf32.f32", "cvt.rna.satfinite.tf32.f32 $0, $1;", "=r,r", ["i32"], "i32", [TF])
# float to integer: NaN, infinities, out of range
I64 = N64[:4] + [0x7ff0000000000000, 0xfff0000000000000, f64(9.3e18), f64(-9.3e18), f64(2.0**63), f64(-2.0**63),
                 f64(1.9e19), f64(-1.5), f64(-0.5), f64(4.5e9), f64(-3e9), f64(2.5), 0, 1 << 63, f64(-2.0**31), f64(-2.0**31 - 1)]
I32 = N32[:4] + [0x7f800000, 0xff800000, f32(9.3e18), f32(-9.3e18), f32(2.0**63), f32(-2.0**63),
                 f32(1.9e19), f32(-1.5), f32(-0.5), f32(4.5e9), f32(-3e9), f32(2.5), 0, 0x80000000, f32(-2.0**31), f32(70000.0)]
for d in ("s64", "u64", "s32", "u32", "s16", "u16"):
    o, cc = ("i64", "l") if d.endswith("64") else (("i32", "r") if d.endswith("32") else ("i16", "h"))
    for mode in ("rmi", "rzi", "rni"):
        c(f"cvt.{mode}.{d}.f64", f"cvt.{mode}.{d}.f64 $0, $1;", f"={cc},l", ["i64"], o, [I64])
    c(f"cvt.rzi.{d}.f32", f"cvt.rzi.{d}.f32 $0, $1;", f"={cc},r", ["i32"], o, [I32])
    c(f"cvt.rmi.{d}.f32", f"cvt.rmi.{d}.f32 $0, $1;", f"={cc},r", ["i32"], o, [I32])
c("cvt.rzi.s32.f16", "cvt.rzi.s32.f16 $0, $1;", "=r,h", ["i16"], "i32", [V16])
c("cvt.rzi.s64.f16", "cvt.rzi.s64.f16 $0, $1;", "=l,h", ["i16"], "i64", [V16])
# relu
R32 = V32 + [f32(-1e-9), f32(-1.0), f32(1e-9), f32(-7e-8), 0x80000000, f32(-65520.0)]
c("cvt.rn.relu.f16x2.f32", "cvt.rn.relu.f16x2.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [R32, R32[::-1]])
c("cvt.rn.relu.bf16x2.f32", "cvt.rn.relu.bf16x2.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [R32, R32[::-1]])
c("cvt.rn.relu.f16.f32", "cvt.rn.relu.f16.f32 $0, $1;", "=h,r", ["i32"], "i16", [R32])
c("cvt.rn.relu.bf16.f32", "cvt.rn.relu.bf16.f32 $0, $1;", "=h,r", ["i32"], "i16", [R32])
c("fma.rn.relu.f16", "fma.rn.relu.f16 $0, $1, $2, $3;", "=h,h,h,h", ["i16"] * 3, "i16", [[f16(1.0)] * 20, V16, V16[::-1]])
c("fma.rn.relu.bf16x2", "fma.rn.relu.bf16x2 $0, $1, $2, $3;", "=r,r,r,r", ["i32"] * 3, "i32", [[0x3f803f80] * 20, VBX2, VBX2[::-1]])
c("min.relu.f16", "min.relu.f16 $0, $1, $2;", "=h,h,h", ["i16", "i16"], "i16", [V16, V16[::-1]])
# signed zeros
Z32 = [0, 0x80000000, f32(1.0), f32(-1.0), 0x7f7fffff, 0xff7fffff, 1, 0x80000001, f32(2.0), f32(-3.0)]
Z32b = [0x80000000, 0, f32(-1.0), f32(1.0), 0xff7fffff, 0x7f7fffff, 0x80000001, 1, 0x80000000, 0]
for mode in ("rn", "rz", "rm", "rp"):
    c(f"add.{mode}.f32", f"add.{mode}.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [Z32 + Z32, Z32b + Z32])
    c(f"sub.{mode}.f32", f"sub.{mode}.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [Z32 + Z32, Z32b + Z32])
    c(f"fma.{mode}.f32", f"fma.{mode}.f32 $0, $1, $2, $3;", "=r,r,r,r", ["i32"] * 3, "i32", [Z32 + Z32, Z32b + Z32, Z32 + Z32b])
    Z64 = [f64(struct.unpack('<f', struct.pack('<I', z))[0]) for z in Z32]
    Z64b = [f64(struct.unpack('<f', struct.pack('<I', z))[0]) for z in Z32b]
    c(f"add.{mode}.f64", f"add.{mode}.f64 $0, $1, $2;", "=l,l,l", ["i64", "i64"], "i64", [Z64 + Z64, Z64b + Z64])
    c(f"fma.{mode}.f64", f"fma.{mode}.f64 $0, $1, $2, $3;", "=l,l,l,l", ["i64"] * 3, "i64", [Z64 + Z64, Z64b + Z64, Z64 + Z64b])
c("add.rm.ftz.f32", "add.rm.ftz.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [Z32 + Z32, Z32b + Z32])
Z16 = [0, 0x8000, f16(1.0), f16(-1.0), 0x7bff, 0xfbff, 1, 0x8001, f16(2.0), f16(-3.0)]
Z16b = [0x8000, 0, f16(-1.0), f16(1.0), 0xfbff, 0x7bff, 0x8001, 1, 0x8000, 0]
c("add.f16 zeros", "add.f16 $0, $1, $2;", "=h,h,h", ["i16", "i16"], "i16", [Z16 + Z16, Z16b + Z16])
c("sub.f16 zeros", "sub.f16 $0, $1, $2;", "=h,h,h", ["i16", "i16"], "i16", [Z16 + Z16, Z16b + Z16])
c("fma.rn.f16 zeros", "fma.rn.f16 $0, $1, $2, $3;", "=h,h,h,h", ["i16"] * 3, "i16", [Z16 + Z16, Z16b + Z16, Z16 + Z16b])
c("mul.rm.f32 zeros", "mul.rm.f32 $0, $1, $2;", "=r,r,r", ["i32", "i32"], "i32", [Z32 + Z32, Z32b + Z32])
c("mad.rn.f32 zeros", "mad.rn.f32 $0, $1, $2, $3;", "=r,r,r,r", ["i32"] * 3, "i32", [Z32 + Z32, Z32b + Z32, Z32 + Z32b])
c("fma.rn.sat.f32 zeros", "fma.rn.sat.f32 $0, $1, $2, $3;", "=r,r,r,r", ["i32"] * 3, "i32", [Z32 + Z32, Z32b + Z32, Z32 + Z32b])
json.dump(cases, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json"), "w"))
print(len(cases))
