"""``D = A @ B + C`` as an NVIDIA H100's tensor cores compute it, on numpy.

A tensor core does not round each product and sum as an IEEE fma chain would. The model here is the one
Khattak and Mikaitis fitted bit for bit to the H100 ("Accurate Models of NVIDIA Tensor Cores", ACM TACO,
2025/26; their MATLAB models: github.com/north-numerical-computing/MATLAB-tensor-core, ``H100TC.m`` and
``tools/Generic_BFMA_TC.m``), which refines Fasi, Higham, Mikaitis and Pranesh's ("Numerical behavior of
NVIDIA tensor cores", PeerJ CS 2021) for V100/T4/A100. One step of an instruction fuses ``block`` products
with the accumulator:

1. each product of two inputs is exact; its exponent is the sum of the inputs' exponents (a subnormal input
   counts as the format's smallest normal exponent), its significand in [1, 4) left unnormalised;
2. every nonzero product and the accumulator (when nonzero) are aligned to the largest of those exponents,
   keeping ``frac`` bits below it (23 + 2 extra alignment bits for fp16/bf16/tf32; 13 for fp8 on wgmma);
   the bits shifted out are dropped (truncation toward zero of each magnitude);
3. the aligned terms are summed exactly and the sum normalised and rounded once: toward zero into an fp32
   accumulator (for fp8's wgmma to 13 fraction bits), to nearest-even into an fp16 one.

Steps follow each other along K, each taking the previous result as its accumulator. So does the
instruction sequence the compiler emits (``wgmma`` m64nNk16 for fp16/bf16, k8 for tf32, k32 for fp8;
``mma.sync`` m16n8k16 / m16n8k8; fp8 operands of an ``mma.sync`` on sm_90 are widened to fp16 first).

Computed in float64 without integers: the aligned, truncated term is ``trunc(t * 2^(frac - e_max))`` (an
integer below 2^27, exact), their sum is exact (fewer than 2^32 per step), and ``2^e`` of each product is
the product of its inputs' ``2^e``, so the largest exponent comes from one multiply and a max.
``tests/record/test_tensorcore_order.py`` checks the model against an H100's bits
(``benchmarks/fidelity/fit_tensorcore.py`` fits it: every recorded case exact). ``fma_dot`` is the dot
that runs no tensor core, fp32 at ``input_precision="ieee"``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from .compiled import fma_f32
from .ptx_formats import NAN

_ROWS = 1 << 18            # elements of a (rows, N, block) intermediate at a time: bounds the memory a step takes


@dataclass(frozen=True)
class Unit:
    """One tensor-core instruction's arithmetic."""
    block: int         # products fused in one step with the accumulator
    frac: int          # bits kept below the step's largest exponent when aligning
    emin: int          # the input format's smallest normal exponent
    out: str           # the accumulator: "fp32" or "fp16"
    out_frac: int      # fraction bits the result keeps (23 for fp32; 13 for fp8's wgmma; 10 for fp16)
    rounding: str      # "rz" (toward zero) or "rn" (nearest-even), once per step
    min_exp: int       # the floor of the alignment exponent


# the input formats' smallest normal exponents
EMIN = {"fp16": -14, "bf16": -126, "tf32": -126, "e4m3": -6, "e5m2": -14}


def unit(inputs: str, acc: str, instruction: str) -> Unit:
    """The H100 arithmetic for ``inputs`` ("fp16", "bf16", "tf32", "e4m3", "e5m2") accumulated in ``acc``
    ("fp32"/"fp16") by ``instruction`` ("wgmma" or "mma": mma.sync)."""
    if inputs in ("e4m3", "e5m2") and instruction == "mma":
        inputs = "fp16"                         # sm_90's mma.sync has no fp8: the operands are widened (exact)
    if inputs in ("e4m3", "e5m2"):
        u = Unit(32, 13, EMIN[inputs], "fp32", 13, "rz", -133)
    else:
        u = Unit(8 if inputs == "tf32" else 16, 25, EMIN[inputs], "fp32", 23, "rz", -133)
    if acc == "fp16":
        u = replace(u, out="fp16", out_frac=10, rounding="rn", min_exp=-21 if inputs == "fp16" else u.min_exp)
    return u


def instruction(rank: int, m: int, n: int, num_warps: int, n_multiple: int = 16) -> str:
    """What Triton emits for a ``tl.dot`` on sm_90 (its AccelerateMatmul pass, checked against the PTX it
    compiles on the CPU): ``wgmma`` for a 2-D tile whose M is a multiple of 64 and N of ``n_multiple`` (16
    in Triton 3.6, 8 in 3.9) with whole warpgroups (num_warps a multiple of 4), else ``mma.sync`` (3-D dots
    always)."""
    if rank == 2 and num_warps % 4 == 0 and m % 64 == 0 and n % n_multiple == 0:
        return "wgmma"
    return "mma"


_ZERO = -(1 << 14)          # the exponent a zero gets: below every other, so it never sets the alignment
_NARROW = 63                # exponent spread an operand may have for the sums of two to fit in int8
_F32 = 50                   # exponent bound under which products and their scaling are exact in float32


def _exponents(x: np.ndarray, emin: int) -> np.ndarray:
    """Each value's exponent as int16, at least ``emin`` (subnormals align from the smallest normal one);
    zeros get ``_ZERO``."""
    e = np.maximum(np.frexp(x)[1] - 1, emin).astype(np.int16)
    e[x == 0] = _ZERO
    return e


class _Slab:
    """One slab's operands, K leading (the reductions over a step's products then run across whole
    slabs), in the cheapest exact form: exponents as int8 offset so that sums of two stay in [0, 126] (a
    zero's -64 makes its sums negative) and values as float32 where every product and its scaling is exact
    there; else int16 and float64."""

    def __init__(self, a, b, emin: int):
        ea, eb = _exponents(a, emin), _exponents(b, emin)
        nz_a, nz_b = ea[ea != _ZERO], eb[eb != _ZERO]
        wide = [int(abs(e).max()) if e.size else 0 for e in (nz_a, nz_b)]
        work = np.float32 if max(wide) <= _F32 else np.float64
        self.a, self.b = a.astype(work), b.astype(work)
        self.offset = None
        if nz_a.size and nz_b.size and nz_a.max() - nz_a.min() <= _NARROW and nz_b.max() - nz_b.min() <= _NARROW:
            oa, ob = int(nz_a.min()), int(nz_b.min())
            ea = np.where(ea == _ZERO, -64, ea - oa).astype(np.int8)
            eb = np.where(eb == _ZERO, -64, eb - ob).astype(np.int8)
            self.offset = oa + ob
        self.ea, self.eb = ea, eb
        self.finite = bool(np.isfinite(self.a).all() and np.isfinite(self.b).all())

    def top(self, k: slice) -> np.ndarray:
        """The largest product exponent of the step ``k`` at each output (int32; ``_ZERO`` or less where
        every product is zero). A loop over the step's products: numpy's max over the leading axis of an
        int8 array is several times slower."""
        ea, eb = self.ea[k], self.eb[k]
        top = ea[0][..., :, None] + eb[0][..., None, :]
        term = np.empty_like(top)
        for j in range(1, ea.shape[0]):
            np.add(ea[j][..., :, None], eb[j][..., None, :], out=term)
            np.maximum(top, term, out=top)
        if self.offset is None:
            return top.astype(np.int32)
        return np.where(top < 0, _ZERO, top.astype(np.int32) + self.offset)


def _round(v: np.ndarray, u: Unit) -> np.ndarray:
    """The exact step result ``v`` (float64) in the accumulator's format, as the unit rounds it."""
    if u.out == "fp16":
        return v.astype(np.float16)                            # numpy rounds float64 to half to nearest-even
    # toward zero: the float64's bits past the kept ones cleared, then exact in float32 (2^128 and up: Inf,
    # the model's overflow, not the largest finite value of IEEE's rz)
    keep = np.uint64(~((1 << (52 - u.out_frac)) - 1) & 0xFFFFFFFFFFFFFFFF)
    f = (np.ascontiguousarray(v).view(np.uint64) & keep).view(np.float64).astype(np.float32)
    tiny = (np.abs(v) < 2.0 ** -126) & (v != 0)
    if tiny.any():         # fp32 subnormals: cleared bits are not enough, step the nearest back toward zero
        t = v[tiny].astype(np.float32)
        t = np.where(np.abs(t.astype(np.float64)) > np.abs(v[tiny]), np.nextafter(t, np.float32(0)), t)
        f[tiny] = (t.view(np.uint32) & np.uint32((0xFFFFFFFF << (23 - u.out_frac)) & 0xFFFFFFFF)).view(np.float32)
    return f


def _step(slab: _Slab, k: slice, c: np.ndarray, u: Unit) -> np.ndarray:
    """One step over the products ``k`` of ``slab`` with the accumulator ``c`` (..., m, n) (float64)."""
    top = np.maximum(np.maximum(slab.top(k), _exponents(c, -126)), u.min_exp)
    shift = u.frac - top
    a, b = slab.a[k], slab.b[k]
    # in float32 the shift is at most 125 wherever a product is nonzero; the cap keeps the others 0, not NaN
    scale_p = np.ldexp(a.dtype.type(1), np.minimum(shift, 126) if a.dtype == np.float32 else shift)
    total = np.zeros(shift.shape)
    term = np.empty(shift.shape, dtype=a.dtype)
    for j in range(a.shape[0]):        # each product exact, aligned and truncated, summed exactly
        np.multiply(a[j][..., :, None], b[j][..., None, :], out=term)
        term *= scale_p
        np.trunc(term, out=term)
        total += term
    scale = np.ldexp(1.0, shift)
    v = (total + np.trunc(c * scale)) / scale
    if not slab.finite or not np.isfinite(c).all():
        bad = ~np.isfinite(v)       # Inf or NaN among the terms: IEEE's sum of them (Inf - Inf is NaN)
        plain = (a[..., :, None].astype(np.float64) * b[..., None, :]).sum(0) + c
        v = np.where(bad, plain, v)
    return v


def _chain(a, b, c, u: Unit, imprecise: Optional[int]) -> np.ndarray:
    """Steps along K of one slab: ``a`` (..., m, K), ``b`` (..., n, K) (B transposed), ``c`` (..., m, n) in
    the accumulator's dtype."""
    K = a.shape[-1]
    slab = _Slab(np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0), u.emin)
    if imprecise is None:
        acc = c
        for k0 in range(0, K, u.block):
            acc = _round(_step(slab, slice(k0, k0 + u.block), acc.astype(np.float64), u), u)
        return acc
    # fp8's max_num_imprecise_acc on wgmma: the compiler groups ceil(imprecise / 32) instructions, the
    # first of a group not reading the accumulator (scale-d 0), and adds each group's result with add.f32
    group = max(-(-imprecise // u.block), 1) * u.block
    acc = c.astype(np.float32)
    for g0 in range(0, K, group):
        part = np.zeros_like(acc)
        for k0 in range(g0, min(g0 + group, K), u.block):
            part = _round(_step(slab, slice(k0, k0 + u.block), part.astype(np.float64), u), u)
        acc = acc + part
    return acc


def dot(a, b, c, u: Unit, imprecise: Optional[int] = None) -> np.ndarray:
    """``a @ b + c`` computed by ``u`` step after step along K. ``a`` (..., M, K) and ``b`` (..., K, N) hold
    the inputs' exact values (any float dtype), ``c`` (..., M, N) the accumulator (float32 or float16, its
    dtype kept); leading axes broadcast as numpy's matmul does. ``imprecise``: fp8's
    ``max_num_imprecise_acc`` on wgmma, at least the instruction's 32 (None: never promoted, sm_90's
    default; below 32 the compiler picks mma.sync, ``unit(..., "mma")``)."""
    a = np.asarray(a, dtype=np.float64)
    bt = np.swapaxes(np.asarray(b, dtype=np.float64), -1, -2)
    c = np.asarray(c, dtype=np.float16 if u.out == "fp16" else np.float32)
    lead = np.broadcast_shapes(a.shape[:-2], bt.shape[:-2], c.shape[:-2])
    M, N, K = a.shape[-2], bt.shape[-2], a.shape[-1]
    a = np.broadcast_to(a, lead + (M, K)).reshape(-1, M, K)
    bt = np.broadcast_to(bt, lead + (N, K)).reshape(-1, N, K)
    c = np.broadcast_to(c, lead + (M, N)).reshape(-1, M, N)
    out = np.empty(c.shape, dtype=c.dtype)
    rows = max(_ROWS // max(N * u.block, 1), 1)                 # output rows per slab
    per = max(rows // M, 1) if rows >= M else 1                 # whole blocks per slab, or rows of one
    with np.errstate(all="ignore"):
        for l0 in range(0, a.shape[0], per):
            for m0 in range(0, M, rows if per == 1 else M):
                sl = (slice(l0, l0 + per), slice(m0, m0 + rows))
                out[sl] = _chain(a[sl], bt[l0:l0 + per], c[sl], u, imprecise)
    if u.out == "fp32":
        nan = np.isnan(out)
        if nan.any():      # the GPU's canonical NaN
            out[nan] = np.array(NAN["f32"], dtype=np.uint32).view(np.float32)
    return out.reshape(lead + (M, N))


def fma_dot(a, b, c) -> np.ndarray:
    """``a @ b + c`` of fp32 blocks at ``input_precision="ieee"``, where no tensor core runs: Triton lowers
    the dot to one ``fma.rn.f32`` per product, k = 0, 1, ... into the accumulator (its FMA dot lowering;
    an H100's bits agree, benchmarks/fidelity/fit_tensorcore.py). Shapes as ``dot``'s."""
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    acc = np.asarray(c, dtype=np.float32)
    for k in range(a.shape[-1]):
        acc = fma_f32(a[..., :, k:k + 1], b[..., k:k + 1, :], acc)
    nan = np.isnan(acc)
    if nan.any():
        acc = np.where(nan, np.array(NAN["f32"], dtype=np.uint32).view(np.float32), acc)
    return acc
