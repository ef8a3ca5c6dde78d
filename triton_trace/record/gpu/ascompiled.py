"""``numerics="compiled"``: the arithmetic the compiled kernel performs where it is deterministic and differs
from the interpreter's correctly rounded numpy, installed on the builder for one launch.

- **Contraction** (``fma.rn``), where the launch's ``enable_fp_fusion`` is on (Triton's default through 3.9;
  ``TRITON_DEFAULT_FP_FUSION``, as the compiler reads it, when the launch does not say). LLVM's NVPTX backend turns
  an fp32/fp64 ``fadd``/``fsub`` whose operand is an ``fmul`` into one ``fma.rn``, rounded once, even when
  the product has other uses (``p = a * b; p + c; p - d`` is two FMAs; read from the PTX of Triton 3.6 and
  3.9 for sm_80 and sm_90, which tests/record/test_ascompiled.py compiles on the CPU). Here each product
  remembers its operands; an add or subtract of one computes ``fma(a, b, +-c)`` instead. Where both
  operands are products LLVM fuses the one with fewer uses, the left one on a tie; the uses seen here are
  the adds and subtracts that consumed the product so far (products of the same two operand values share
  them, as common-subexpression elimination makes them one value). Not followed: a product that crosses a
  loop iteration or a branch (another basic block; LLVM does not fuse it, the trace does), fp16/bf16
  (``fma.rn.f16``/``.bf16``; the interpreter's fp16/bf16 math is left as is).
- **TF32 dots.** ``tl.dot`` of two fp32 blocks at ``input_precision="tf32"`` (the default) runs the tensor
  cores' TF32 path with the fp32 registers as they are: no ``cvt`` in the PTX, and "wgmma.mma_async
  operation involving type .tf32 will truncate lower 13 bits of the 32-bit input data" (PTX ISA; sm_80's
  ``mma.sync`` is taken to do the same). Here both inputs are truncated so, then multiplied: each product
  of two 11-bit significands is exact in fp32.
- **Tensor-core accumulation.** ``tl.dot`` of fp16, bf16, fp8 (e4m3, e5m2) and TF32 blocks sums its
  products as the H100's tensor cores do (numerics/tensorcore.py: blocks of 16, 8 or 32 products aligned to
  their largest exponent with the accumulator, truncated, and each step's sum truncated into the fp32
  accumulator), in the instruction the compiler picks: ``wgmma`` for 2-D tiles of M a multiple of 64 and N
  of 16 with whole warpgroups, else ``mma.sync`` (fp8 widened to fp16). The instruction matters for fp8
  only (the other formats' arithmetic is the same on both); the launch's ``num_warps`` decides
  it (wgmma wants whole warpgroups). fp8's ``max_num_imprecise_acc``: unset, sm_90's
  default (2^30: never promoted; set on the builder's options here, where the interpreter's 0 would read as
  an explicit 0); below 32, ``mma.sync``; else the compiler's groups of wgmma, each added into the
  accumulator with an fp32 add (read from the PTX; tests/record/test_tensorcore_order.py compiles it).
  fp32 blocks at ``input_precision="ieee"`` run no tensor core: one ``fma.rn`` per product along K.
  An H100's bits agree with both for every case of benchmarks/fidelity/fit_tensorcore.py.
- **Split dots.** ``input_precision="tf32x3"``, ``"bf16x3"``, ``"bf16x6"``: the operands split into parts and
  the partial dots summed in the compiler's order (numerics/splitdot.py).

- **MUFU approximations** (numerics/mufu.py, from tables measured on an H100). fp32 ``x / y`` and ``tl.fdiv``
  compile to ``div.full.f32`` (fp16/bf16 operands: converted to fp32 and the quotient rounded back),
  ``tl.sqrt`` to ``sqrt.approx.ftz.f32``, ``tl.rsqrt`` to ``rsqrt.approx.ftz.f32`` and Triton 3.9's
  ``tl.fdiv(..., approx=True)`` to ``div.approx.f32``; each computes the GPU's bits here. A divisor that is a
  compile-time constant (a literal or constexpr, splat or converted) is different: ``ptxas`` folds its
  reciprocal, correctly rounded, so ``x / 3.0`` is ``x * rn(1/3)`` (read from the SASS of both releases'
  ptxas). Constants are followed from the builder's ``get_*`` through splats, broadcasts and casts; a
  divisor LLVM folds from arithmetic on constants is taken for a run-time one.

``ex2.approx`` (``tl.exp``, ``tl.exp2``) stays correctly rounded: the tables do not cover its inputs
(docs/fidelity.md).
"""
from __future__ import annotations

import dataclasses
import re
import weakref

import numpy as np
import triton

from ...numerics import compiled, ex2, mufu, rounding, splitdot, tensorcore
from ..batch import running as batch
from ..interp.access import TensorHandle as _TH
from ..patching import carried
from . import asbuilt
from .lowp import inner_method
from .products import FUSED as _FUSED, Product as _Product, product as _product

def install(scope, builder, num_warps: int = 4) -> None:
    if asbuilt.current().fp_fusion:     # enable_fp_fusion=False (or TRITON_DEFAULT_FP_FUSION=0): no fma.rn
        _contraction(scope, builder)
    _constants(scope, builder)
    _approximate(scope, builder)
    _imprecise_default(scope, builder)
    if hasattr(builder, "create_dot"):
        inner = inner_method(builder, "create_dot")

        def create_dot(a, b, d, precision, *rest, **kw):
            split = _split(builder, a, b, d, precision, num_warps)
            if split is not None:
                return split
            a, b = _tf32_inputs(a, b, precision)
            # the interpreter's product still runs: the hooks under this one record the dot and its shape
            out = inner(a, b, d, precision, *rest, **kw)
            bits = _compiled_dot(builder, a, b, d, precision, rest, num_warps)
            if bits is None:
                return out
            out = _TH(bits.reshape(out.data.shape), out.dtype)
            if carried(d, _CONST) and not np.any(np.asarray(d.data)) and (not rest or not rest[0]):
                try:
                    out._tt_dot = _PendingDot(a, b, precision, rest)
                except AttributeError:
                    pass
            return out
        scope.set_attr(builder, "create_dot", create_dot)
        _dot_add(scope, builder, num_warps)


class _PendingDot:
    """A dot into a constant zero accumulator, which an add may still take as its accumulator."""

    def __init__(self, a, b, precision, rest):
        self.a, self.b, self.precision, self.rest, self.used = a, b, precision, rest, False


def _dot_add(scope, builder, num_warps: int) -> None:
    """``tl.dot(a, b) + d`` is ``tl.dot(a, b, d)``: Triton's combine pass folds an add into a dot whose
    accumulator is a constant zero (CombineDotAddFPattern, max_num_imprecise_acc 0: not fp8's default), the
    dot's one use; so ``acc += tl.dot(a, b)`` accumulates in the tensor cores. The add still runs beneath
    (its recording); the dot's first add takes it, the right operand first as the pattern looks."""
    inner = inner_method(builder, "create_fadd")

    def create_fadd(lhs, rhs):
        out = inner(lhs, rhs)
        for dot, acc in ((rhs, lhs), (lhs, rhs)):
            pending = getattr(dot, "_tt_dot", None) if isinstance(dot, _TH) else None
            if pending is None or pending.used or np.shape(acc.data) != np.shape(dot.data):
                continue
            pending.used = True
            bits = _compiled_dot(builder, pending.a, pending.b, acc, pending.precision, pending.rest, num_warps)
            if bits is not None:
                return _TH(bits.reshape(np.shape(out.data)), out.dtype)
        return out
    scope.set_attr(builder, "create_fadd", create_fadd)


# the N a wgmma tile must be a multiple of: 16 in Triton 3.6's PTX, 8 in 3.9's (3.7 and 3.8 taken as 3.6)
_WGMMA_N = 8 if tuple(int(x) for x in re.findall(r"\d+", triton.__version__)[:2]) >= (3, 9) else 16
_INPUTS = {"fp16": "fp16", "bf16": "bf16", "fp8e4nv": "e4m3", "fp8e5": "e5m2"}
_FP8 = {"fp8e4nv", "fp8e5"}
_SM90_IMPRECISE = 1 << 30      # sm_90's max_num_imprecise_acc_default (the NVIDIA backend's options)
_FP8_K = 32                    # the K of one fp8 wgmma: a smaller max_num_imprecise_acc gets mma.sync


def _imprecise_default(scope, builder) -> None:
    """An fp8 dot that leaves ``max_num_imprecise_acc`` unset gets sm_90's default, not the interpreter's 0,
    which compiles as an explicit 0 does (mma.sync): the two differ here as they do on the GPU."""
    opts = getattr(builder, "options", None)
    if dataclasses.is_dataclass(opts) and hasattr(opts, "max_num_imprecise_acc_default"):
        scope.set_attr(builder, "options", dataclasses.replace(opts, max_num_imprecise_acc_default=_SM90_IMPRECISE))


def _name(dtype) -> str:
    return getattr(getattr(dtype, "scalar", dtype), "name", "")


def _values(h, name: str) -> np.ndarray:
    if name == "bf16":
        return rounding.bf16_to_f32(h.data)
    if name in _FP8:
        return rounding.fp8_to_f32(h.data, name)
    return np.asarray(h.data)


def _compiled_dot(builder, a, b, d, precision, rest, num_warps: int):
    """The dot's result as the compiled kernel computes it on an H100, or None where it is the
    interpreter's already or the model does not cover it (fp64, integers, mixed input formats)."""
    na, nb, nd = (_name(h.dtype) for h in (a, b, d))
    if na != nb or nd not in ("fp32", "fp16"):
        return None
    if na == "fp32" and _precision(precision) == "ieee":
        return tensorcore.fma_dot(a.data, b.data, d.data)
    inputs = "tf32" if na == "fp32" and _precision(precision) == "tf32" else _INPUTS.get(na)
    if inputs is None:
        return None
    chunk = batch.running(builder)
    shape_a, shape_b = batch.program_shape(a.data, chunk), batch.program_shape(b.data, chunk)
    imprecise = rest[0] if na in _FP8 and nd == "fp32" and rest and isinstance(rest[0], (int, np.integer)) else None
    if imprecise is not None and imprecise < _FP8_K:
        instr = "mma"
    else:
        instr = tensorcore.instruction(len(shape_a), shape_a[-2], shape_b[-1], num_warps, _WGMMA_N)
    if instr != "wgmma" or (imprecise is not None and imprecise >= _SM90_IMPRECISE):
        imprecise = None           # mma.sync never promotes; wgmma only below the default
    unit = tensorcore.unit(inputs, nd, instr)
    return tensorcore.dot(_values(a, na), _values(b, nb), np.asarray(d.data), unit,
                          None if imprecise is None else int(imprecise))


def _shared_uses(a, b) -> list:
    """One use counter per pair of operand handles (either order), kept on the first operand by the second's
    id with a weak reference that proves the id still names that handle (handles are unhashable)."""
    for x, y in ((a, b), (b, a)):
        entry = getattr(x, "_tt_pairs", {}).get(id(y))
        if entry is not None and entry[0]() is y:
            return entry[1]
    uses = [0]
    pairs = vars(a).setdefault("_tt_pairs", {})
    if len(pairs) >= 256:      # a long-lived operand (a kernel argument times each trip's block): drop the dead
        for key in [k for k, (ref, _) in pairs.items() if ref() is None]:
            del pairs[key]
    pairs[id(b)] = (weakref.ref(b), uses)
    return uses


def _contraction(scope, builder) -> None:
    fmul = inner_method(builder, "create_fmul")
    fadd = inner_method(builder, "create_fadd")
    fsub = inner_method(builder, "create_fsub")

    def create_fmul(lhs, rhs):
        out = fmul(lhs, rhs)
        if isinstance(out, _TH) and np.asarray(out.data).dtype in _FUSED:
            try:
                out._tt_product = _Product(lhs, rhs, _shared_uses(lhs, rhs))
            except (AttributeError, TypeError):
                pass
        return out

    def fused(lhs, rhs, sign_c: float, sign_p: float):
        """lhs +- rhs with the product among them fused: (product, other, which side the product is on)."""
        pl, pr = _product(lhs), _product(rhs)
        if pl is not None and pr is not None and pr.uses[0] < pl.uses[0]:
            pl = None                   # both products: LLVM fuses the one with fewer uses (the left on a tie)
        if pl is not None:
            p, other = pl, rhs          # p.a * p.b + sign_c * rhs
            op = lambda _p, c: compiled.fma(p.a.data, p.b.data, sign_c * np.asarray(c))  # noqa: E731
            args = (lhs, rhs)
        elif pr is not None:
            p, other = pr, lhs          # sign_p * p.a * p.b + lhs
            op = lambda c, _p: compiled.fma(sign_p * np.asarray(p.a.data), p.b.data, c)  # noqa: E731
            args = (lhs, rhs)
        else:
            return None
        if np.asarray(other.data).dtype != np.asarray(p.a.data).dtype:
            return None
        p.uses[0] += 1
        # builder.binary_op at call time: the flop counter counts the add as it would unfused
        return builder.binary_op(*args, op)

    scope.set_attr(builder, "create_fmul", create_fmul)
    scope.set_attr(builder, "create_fadd", lambda lhs, rhs: fused(lhs, rhs, 1.0, 1.0) or fadd(lhs, rhs))
    scope.set_attr(builder, "create_fsub", lambda lhs, rhs: fused(lhs, rhs, -1.0, -1.0) or fsub(lhs, rhs))


def _precision(precision) -> str:
    return str(precision).split(".")[-1].lower()


def _split(builder, a, b, d, precision, num_warps: int):
    """A tf32x3 / bf16x3 / bf16x6 dot of fp32 blocks as the compiler splits it, each partial dot summed as
    the tensor cores sum it, else None."""
    p = _precision(precision)
    if p not in splitdot.SPLIT:
        return None
    ad, bd, dd = (np.asarray(h.data) for h in (a, b, d))
    if ad.dtype != np.float32 or bd.dtype != np.float32 or dd.dtype != np.float32:
        return None
    chunk = batch.running(builder)
    shape_a, shape_b = batch.program_shape(ad, chunk), batch.program_shape(bd, chunk)
    unit = tensorcore.unit("tf32" if p == "tf32x3" else "bf16", "fp32",
                           tensorcore.instruction(len(shape_a), shape_a[-2], shape_b[-1], num_warps, _WGMMA_N))
    return _TH(splitdot.split_dot(ad, bd, dd, p, lambda x, y, acc: tensorcore.dot(x, y, acc, unit)), d.dtype.scalar)


def _tf32_inputs(a, b, precision):
    if _precision(precision) != "tf32":
        return a, b
    ad, bd = np.asarray(a.data), np.asarray(b.data)
    if ad.dtype != np.float32 or bd.dtype != np.float32:
        return a, b
    return _TH(compiled.tf32_truncated(ad), a.dtype), _TH(compiled.tf32_truncated(bd), b.dtype)


def describe() -> str:
    """What ``numerics="compiled"`` changes, for a launch's meta and the report."""
    return ("fp32/fp64 a*b+c contracted to fma.rn; fp32 tl.dot inputs truncated to TF32; tl.dot summed as the "
            "H100's tensor cores sum (fp32 at ieee: an fma chain along K); tf32x3/bf16x3/bf16x6 dots split as "
            "compiled; fp32 division, tl.sqrt and tl.rsqrt as the GPU's MUFU approximations")


_CONST = "_tt_const"
_CONSTANT_GETTERS = ("get_fp16", "get_bf16", "get_fp32", "get_fp64", "get_int8", "get_uint8", "get_int16",
                     "get_uint16", "get_int32", "get_uint32", "get_int64", "get_uint64")
_CONSTANT_KEEPING = ("create_splat", "create_broadcast", "create_expand_dims", "cast_impl", "create_fp_to_fp")


def _constants(scope, builder) -> None:
    """Tag the handles that hold compile-time constants: what the builder's ``get_*`` make (literals and
    constexprs; a kernel's scalar arguments arrive otherwise), and splats, broadcasts and casts of them."""
    def tagging(inner, keeps):
        def run(*args, **kwargs):
            out = inner(*args, **kwargs)
            handles = [a for a in args if isinstance(a, _TH)]
            if isinstance(out, _TH) and (not keeps or (handles and all(carried(h, _CONST) for h in handles))):
                try:
                    setattr(out, _CONST, True)
                except AttributeError:
                    pass
            return out
        return run
    for names, keeps in ((_CONSTANT_GETTERS, False), (_CONSTANT_KEEPING, True)):
        for name in names:
            if hasattr(builder, name):
                scope.set_attr(builder, name, tagging(inner_method(builder, name), keeps))


def _divide_by(fn, constant: bool):
    """The numpy function ``binary_op`` applies for ``x / y``: ``fn`` on fp32 (fp16 widened to fp32 and the
    quotient rounded back, as the compiled kernel converts; bf16 arrives widened by lowp), numpy's division
    on anything else (fp64: ``div.rn.f64``; the float64 shadow)."""
    def divide(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype == np.float32 and b.dtype == np.float32:
            return fn(a, b, constant_divisor=constant)
        if a.dtype == np.float16 and b.dtype == np.float16:
            return fn(a.astype(np.float32), b.astype(np.float32), constant_divisor=constant).astype(np.float16)
        return np.divide(a, b)
    divide.__name__ = "divide"          # how the runtime checks know a division (nonfinite.DIVISIONS)
    return divide


def _sqrt(a):
    a = np.asarray(a)
    return mufu.sqrt_approx(a, ftz=True) if a.dtype == np.float32 else np.sqrt(a)


_sqrt.__name__ = "sqrt"                 # as np.sqrt, which the interpreter's create_sqrt passes


def _exp(a):
    a = np.asarray(a)
    return ex2.exp_approx(a) if a.dtype == np.float32 else np.exp(a)


def _exp2(a):
    a = np.asarray(a)
    return ex2.ex2_approx(a, ftz=True) if a.dtype == np.float32 else np.exp2(a)


_exp.__name__, _exp2.__name__ = "exp", "exp2"


def _approximate(scope, builder) -> None:
    rsqrt = inner_method(builder, "create_rsqrt")

    def division(fn):
        def create(lhs, rhs):
            # builder.binary_op at call time: the flop counter and the runtime checks see a division
            return builder.binary_op(lhs, rhs, _divide_by(fn, bool(carried(rhs, _CONST))))
        return create

    def create_rsqrt(arg):
        if np.asarray(arg.data).dtype != np.float32:
            return rsqrt(arg)
        return _TH(mufu.rsqrt_approx(arg.data, ftz=True), arg.dtype.scalar)

    scope.set_attr(builder, "create_fdiv", division(mufu.div_full))
    if hasattr(builder, "create_approx_divf"):
        scope.set_attr(builder, "create_approx_divf", division(mufu.div_approx))
    scope.set_attr(builder, "create_sqrt", lambda arg: builder.unary_op(arg, _sqrt))
    # tl.exp: mul.f32 by log2(e), ex2.approx.f32; tl.exp2: ex2.approx.ftz.f32 (numerics/ex2.py)
    scope.set_attr(builder, "create_exp", lambda arg: builder.unary_op(arg, _exp))
    scope.set_attr(builder, "create_exp2", lambda arg: builder.unary_op(arg, _exp2))
    scope.set_attr(builder, "create_rsqrt", create_rsqrt)
