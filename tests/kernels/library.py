"""Kernels in the style of widely used Triton kernel libraries (Liger-Kernel, Unsloth, FlagGems, vLLM, apex),
with the constructs Triton's plain interpreter (TRITON_INTERPRET=1) gets wrong or cannot run:

- float arguments used as tensors inside the kernel (``eps = eps.to(tl.float32)``), and a float scale
  multiplying a float16 block (compiled, the fp32 argument promotes the product to fp32);
- libdevice math reached every way libraries reach it: ``from triton.language.extra.libdevice import
  tanh`` (the stub module), ``libdevice.rsqrt`` on the stub module, ``tl.extra.cuda.libdevice.erf``;
- integer hashes that overflow int32/uint32 on purpose (murmur3's finaliser, a Philox round with umulhi);
- bfloat16 arithmetic and float32 -> bfloat16 stores (round to nearest even on the GPU);
- loops whose bound is a runtime argument (Triton 3.6 with numpy >= 2.4).

Each ``make_<name>()`` returns a fresh ``@triton.jit`` kernel; each launcher takes torch tensors (CPU, or
CUDA to run compiled) and ``kernel=``, and returns the outputs; ``<name>_reference`` is the torch
expression the output is compared with. ``LIBRARY`` lists them for tests and scripts.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import tanh

_cuda_libdevice = tl.extra.cuda.libdevice

__all__ = ["LIBRARY"] + [f"{part}{name}" for name in (
    "rms_norm", "layer_norm", "gelu_tanh", "gelu_erf", "softplus_pow", "scale_bias_fp16", "residual_bf16")
    for part in ("make_", "")] + [f"{name}_reference" for name in (
        "rms_norm", "layer_norm", "gelu_tanh", "gelu_erf", "softplus_pow", "hash_ints", "scale_bias_fp16",
        "residual_bf16")] + ["make_hash", "hash_ints"]


# ------------------------------------------------------------------------------------------------------
# RMSNorm (Liger / Unsloth style): float eps cast inside the kernel, libdevice rsqrt, runtime loop bound
# ------------------------------------------------------------------------------------------------------
def rms_norm_kernel(Y, X, W, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    eps = eps.to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = libdevice.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def make_rms_norm():
    return triton.jit(rms_norm_kernel)


def rms_norm(x, w, eps=1e-6, kernel=None, block=64):
    kernel = kernel or make_rms_norm()
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](y, x, w, x.stride(0), x.shape[1], eps, BLOCK=block)
    return y


def rms_norm_reference(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


# ------------------------------------------------------------------------------------------------------
# LayerNorm forward (FlagGems / apex style): eps.to(tl.float32), mean and rstd outputs
# ------------------------------------------------------------------------------------------------------
def layer_norm_kernel(X, Y, W, B, Mean, Rstd, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    eps = eps.to(tl.float32)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask)
    b = tl.load(B + cols, mask=mask)
    tl.store(Y + row * N + cols, xc * rstd * w + b, mask=mask)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)


def make_layer_norm():
    return triton.jit(layer_norm_kernel)


def layer_norm(x, w, b, eps=1e-5, kernel=None):
    kernel = kernel or make_layer_norm()
    m, n = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(m, dtype=torch.float32, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    kernel[(m,)](x, y, w, b, mean, rstd, n, eps, BLOCK=triton.next_power_of_2(n))
    return y, mean, rstd


def layer_norm_reference(x, w, b, eps=1e-5):
    mean = x.mean(-1)
    var = x.var(-1, unbiased=False)
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps), mean, torch.rsqrt(var + eps)


# ------------------------------------------------------------------------------------------------------
# GELU, tanh approximation (Liger's GEGLU): ``from triton.language.extra.libdevice import tanh``
# ------------------------------------------------------------------------------------------------------
def gelu_tanh_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    sqrt_2_over_pi = 0.7978845608028654
    a_cubed = a * a * a
    tanh_result = tanh(sqrt_2_over_pi * (a + 0.044715 * a_cubed))
    tl.store(Y + offs, (0.5 * a * (1 + tanh_result)).to(Y.dtype.element_ty), mask=mask)


def make_gelu_tanh():
    return triton.jit(gelu_tanh_kernel)


def gelu_tanh(x, kernel=None, block=128):
    kernel = kernel or make_gelu_tanh()
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


def gelu_tanh_reference(x):
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)


# ------------------------------------------------------------------------------------------------------
# GELU, erf form (FlagGems / vLLM style): ``tl.extra.cuda.libdevice.erf``
# ------------------------------------------------------------------------------------------------------
def gelu_erf_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + _cuda_libdevice.erf(x * 0.7071067811865476))
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def make_gelu_erf():
    return triton.jit(gelu_erf_kernel)


def gelu_erf(x, kernel=None, block=128):
    kernel = kernel or make_gelu_erf()
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


def gelu_erf_reference(x):
    return torch.nn.functional.gelu(x.float()).to(x.dtype)


# ------------------------------------------------------------------------------------------------------
# softplus and a p-th power (libdevice exp2, log1p, pow with a float argument)
# ------------------------------------------------------------------------------------------------------
def softplus_pow_kernel(X, Y, n, p, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    softplus = tl.where(x > 20.0, x, libdevice.log1p(libdevice.exp2(x * 1.4426950408889634)))
    tl.store(Y + offs, softplus + libdevice.pow(tl.abs(x), p), mask=mask)


def make_softplus_pow():
    return triton.jit(softplus_pow_kernel)


def softplus_pow(x, p=1.5, kernel=None, block=128):
    kernel = kernel or make_softplus_pow()
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), p, BLOCK=block)
    return y


def softplus_pow_reference(x, p=1.5):
    return torch.nn.functional.softplus(x) + x.abs().pow(p)


# ------------------------------------------------------------------------------------------------------
# integer hashing that overflows on purpose (murmur3 fmix32, a Philox-style round, an int32 mix)
# ------------------------------------------------------------------------------------------------------
def hash_kernel(X, OUT_MURMUR, OUT_PHILOX, OUT_MIX, n, seed, n_rounds, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0)                   # int32
    h = x.to(tl.uint32, bitcast=True) ^ seed.to(tl.uint32, bitcast=True)
    h ^= h >> 16
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16
    tl.store(OUT_MURMUR + offs, h.to(tl.int32, bitcast=True), mask=mask)
    c0 = x.to(tl.uint32, bitcast=True)
    k0 = seed.to(tl.uint32, bitcast=True)
    for _ in range(n_rounds):                                   # a loop bound that is a runtime argument
        hi = tl.umulhi(c0, 0xD2511F53)
        c0 = hi ^ (c0 * 0xD2511F53) ^ k0
        k0 += 0x9E3779B9
    tl.store(OUT_PHILOX + offs, c0.to(tl.int32, bitcast=True), mask=mask)
    k = x * -862048943                                          # int32 multiply that wraps
    k = (k << 15) | ((k >> 17) & 0x7FFF)
    k = k * 461845907 + offs * 2147483647
    tl.store(OUT_MIX + offs, k, mask=mask)


def make_hash():
    return triton.jit(hash_kernel)


def hash_ints(x, seed=0x5EED1234, rounds=4, kernel=None, block=128):
    kernel = kernel or make_hash()
    outs = [torch.empty_like(x) for _ in range(3)]
    kernel[(triton.cdiv(x.numel(), block),)](x, *outs, x.numel(), seed, rounds, BLOCK=block)
    return tuple(outs)


def _wrap32(v):
    v = v & 0xFFFFFFFF
    return torch.where(v >= 2**31, v - 2**32, v)


def hash_ints_reference(x, seed=0x5EED1234, rounds=4):
    """The same arithmetic in int64 torch ops, masked to 32 bits (bit-exact)."""
    m = 0xFFFFFFFF
    xs = x.to(torch.int64)
    h = (xs & m) ^ (seed & m)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    c0, k0 = xs & m, seed & m
    for _ in range(rounds):
        t = c0 * (0xD2511F53 & 0xFFFF)                           # 32x32-bit product without int64 overflow
        u = c0 * (0xD2511F53 >> 16) + (t >> 16)
        hi, lo = u >> 16, (((u & 0xFFFF) << 16) | (t & 0xFFFF)) & m
        c0, k0 = hi ^ lo ^ k0, (k0 + 0x9E3779B9) & m
    philox = c0
    k = _wrap32(xs * -862048943)
    k = _wrap32((k << 15) | ((k >> 17) & 0x7FFF))
    offs = torch.arange(x.numel(), device=x.device, dtype=torch.int64)
    k = _wrap32(k * 461845907 + offs * 2147483647)
    return tuple(_wrap32(v).to(torch.int32) for v in (h, philox, k))


# ------------------------------------------------------------------------------------------------------
# float16: a fused scale-and-bias with a float argument (compiled: fp16 * fp32 argument is fp32)
# ------------------------------------------------------------------------------------------------------
def scale_bias_fp16_kernel(X, B, Y, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    b = tl.load(B + offs, mask=mask, other=0.0)
    tl.store(Y + offs, x * scale + b, mask=mask)               # fp32 sum, rounded once by the store


def make_scale_bias_fp16():
    return triton.jit(scale_bias_fp16_kernel)


def scale_bias_fp16(x, b, scale=0.1, kernel=None, block=128):
    kernel = kernel or make_scale_bias_fp16()
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, b, y, x.numel(), scale, BLOCK=block)
    return y


def scale_bias_fp16_reference(x, b, scale=0.1):
    scale32 = torch.tensor(scale, dtype=torch.float32, device=x.device)
    return (x.float() * scale32 + b.float()).to(torch.float16)


# ------------------------------------------------------------------------------------------------------
# bfloat16: residual add and scale in bf16 (Unsloth / Liger style), output rounded to nearest even
# ------------------------------------------------------------------------------------------------------
def residual_bf16_kernel(X, R, Y, S, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    r = tl.load(R + offs, mask=mask, other=0.0)
    h = x + r                                                  # bf16 + bf16: one rounding to bf16
    tl.store(Y + offs, h, mask=mask)
    s = h.to(tl.float32) * 1.7                                 # fp32, stored as bf16: nearest even
    tl.store(S + offs, s.to(tl.bfloat16), mask=mask)


def make_residual_bf16():
    return triton.jit(residual_bf16_kernel)


def residual_bf16(x, r, kernel=None, block=128):
    kernel = kernel or make_residual_bf16()
    y, s = torch.empty_like(x), torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, r, y, s, x.numel(), BLOCK=block)
    return y, s


def residual_bf16_reference(x, r):
    h = x + r
    return h, (h.float() * torch.tensor(1.7, dtype=torch.float32)).to(torch.bfloat16)


# name -> (make, launcher, reference, inputs(device) -> args, tolerance: None for bit-exact, else (rtol, atol))
# Float32 tolerances: libdevice functions are within 1-4 ulp on the GPU and correctly rounded here, torch's
# CPU functions within 1-2 ulp; row reductions add one rounding per partial sum (rtol ~ log2(N) * 2**-24).
def _randn(*shape, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).to(device)


LIBRARY = {
    "rms_norm": (make_rms_norm, rms_norm, rms_norm_reference,
                 lambda d: (_randn(8, 200, device=d), _randn(200, device=d, seed=1) + 1), (1e-5, 1e-6)),
    "layer_norm": (make_layer_norm, layer_norm, layer_norm_reference,
                   lambda d: (_randn(6, 100, device=d) * 3 + 1, _randn(100, device=d, seed=1),
                              _randn(100, device=d, seed=2)),
                   (1e-5, 1e-5)),
    "gelu_tanh": (make_gelu_tanh, gelu_tanh, gelu_tanh_reference, lambda d: (_randn(1000, device=d) * 3,),
                  (4e-6, 1e-6)),
    "gelu_erf": (make_gelu_erf, gelu_erf, gelu_erf_reference, lambda d: (_randn(1000, device=d) * 3,),
                 (4e-6, 1e-6)),
    "softplus_pow": (make_softplus_pow, softplus_pow, softplus_pow_reference,
                     lambda d: (_randn(1000, device=d) * 8,), (4e-6, 1e-6)),
    "hash": (make_hash, hash_ints, hash_ints_reference,
             lambda d: (torch.randint(-2**31, 2**31 - 1, (1000,), generator=torch.Generator().manual_seed(1),
                                      dtype=torch.int32).to(d),), None),
    "scale_bias_fp16": (make_scale_bias_fp16, scale_bias_fp16, scale_bias_fp16_reference,
                        lambda d: (_randn(1000, dtype=torch.float16, device=d) * 4,
                                   _randn(1000, dtype=torch.float16, device=d, seed=1)), None),
    "residual_bf16": (make_residual_bf16, residual_bf16, residual_bf16_reference,
                      lambda d: (_randn(1000, dtype=torch.bfloat16, device=d) * 4,
                                 _randn(1000, dtype=torch.bfloat16, device=d, seed=1)), None),
}
