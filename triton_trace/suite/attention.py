"""``F.scaled_dot_product_attention`` on CUDA tensors takes the backend CUDA's composite takes.

aten::scaled_dot_product_attention is CompositeImplicitAutograd: before any dispatch key is asked, its C++
picks a fused kernel through a stub keyed by the tensors' device type. On the redirect's CUDA tensors (CPU
memory) that is the CPU's stub, which picks aten::_scaled_dot_product_flash_attention_for_cpu, so a library's
CUDA registration of the op a GPU would call (aten::_scaled_dot_product_flash_attention: FlagGems'
``use_gems()``) is never reached and the test passes hollow. ``sdpa`` makes CUDA's choice instead: torch's
priority order, the backends ``torch.backends.cuda`` / ``sdpa_kernel`` leave enabled, and each backend's
constraints as torch's CUDA sdp_utils states them for dense inputs, for the GPU the redirect answers as. It
calls the chosen fused op, prepared as CUDA's composite prepares it, where a library registered that op for
the CUDA key, and the math backend's op where math is chosen (its matmuls and softmax reach the library's
kernels as on a GPU). Everywhere else (torch's own fused CUDA kernel would run on a GPU, or an input this
emulation does not cover) it returns None and torch's CPU kernel stands in for torch's CUDA one, as before.

Where inputs require grad, a fused op is called only if the library registered its backward for CUDA too:
on a GPU torch's CUDA backward would run, which a CPU cannot. The priority order is the one torch reports
(flash, efficient, math, cuDNN by default, or as ``sdpa_kernel`` set it): a CUDA build on sm90 with a cuDNN
newer than 9.15 moves cuDNN first by itself, which depends on the cuDNN a real machine has and is not
modelled (FlagGems registers both fused ops, so either way its kernel runs).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

from .cudatensor import CudaTensor

SDPA = F.scaled_dot_product_attention
MATH, FLASH, EFFICIENT, CUDNN = 0, 1, 2, 3        # torch's SDPBackend numbering (_get_sdp_priority_order)
_ORDER = (FLASH, EFFICIENT, MATH, CUDNN)         # torch's default where it cannot say

_FUSED = {FLASH: "aten::_scaled_dot_product_flash_attention",
          EFFICIENT: "aten::_scaled_dot_product_efficient_attention",
          CUDNN: "aten::_scaled_dot_product_cudnn_attention"}
_LOW = (torch.float16, torch.bfloat16)


def _registered(name: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA")


def _order() -> tuple:
    get = getattr(torch._C, "_get_sdp_priority_order", None)
    return tuple(get()) if get is not None else _ORDER


def _enabled(backend: int) -> bool:
    cuda = torch.backends.cuda
    return {FLASH: cuda.flash_sdp_enabled, EFFICIENT: cuda.mem_efficient_sdp_enabled,
            MATH: cuda.math_sdp_enabled, CUDNN: cuda.cudnn_sdp_enabled}.get(backend, lambda: False)()


def _stride_one(t: torch.Tensor) -> bool:
    return t.size(-1) == 1 or t.stride(-1) == 1


def _dense_ok(q, k, v, gqa: bool) -> bool:
    """The dense-input checks both fused kernels share: batch sizes, heads, non-empty sequences, the last
    dimension contiguous. Flash takes grouped heads; the efficient kernel does not (``gqa``)."""
    if not q.size(0) == k.size(0) == v.size(0) or min(q.size(-2), k.size(-2)) == 0:
        return False
    heads_ok = q.size(1) % k.size(1) == 0 and k.size(1) == v.size(1) if gqa else q.size(1) == k.size(1) == v.size(1)
    return heads_ok and all(_stride_one(t) for t in (q, k, v))


def _flash_ok(q, k, v, mask, causal: bool, gqa: bool, arch: int) -> bool:
    d = q.size(-1)
    return (mask is None and d == k.size(-1) == v.size(-1) and d <= 256 and arch >= 80 and q.dtype in _LOW
            and not (causal and q.size(-2) != k.size(-2)) and _dense_ok(q, k, v, gqa))


def _efficient_ok(q, k, v, arch: int) -> bool:
    half = q.dtype in _LOW
    align = max(4 if arch >= 80 else 1, 8 if half else 4)        # torch's minimum_gemm_alignment
    return (arch >= 50 and q.dtype in _LOW + (torch.float32,) and q.size(-1) == k.size(-1)
            and q.size(-1) % align == 0 and v.size(-1) % align == 0 and _dense_ok(q, k, v, False))


def _cudnn_ok(q, k, v, mask, arch: int) -> bool:
    """cuDNN's fused attention, narrowed to what every cuDNN 9 takes: no mask, equal heads, a head dimension
    of at most 128 and a multiple of 8 (a shape outside it is left to torch)."""
    d = q.size(-1)
    return (mask is None and arch >= 80 and q.dtype in _LOW and d == k.size(-1) == v.size(-1) and d <= 128
            and d % 8 == 0 and _dense_ok(q, k, v, False))


def choose(q, k, v, mask, causal: bool, enable_gqa: bool, arch: int) -> Optional[int]:
    """The backend CUDA's composite would run (FLASH, EFFICIENT, MATH, CUDNN), or None for one this does not
    model."""
    grouped = enable_gqa and q.size(1) != k.size(1)
    for backend in _order():
        if not _enabled(backend):
            continue
        if backend == FLASH and _flash_ok(q, k, v, mask, causal, enable_gqa, arch):
            return FLASH
        if backend == EFFICIENT and not grouped and _efficient_ok(q, k, v, arch):
            return EFFICIENT
        if backend == CUDNN and not grouped and _cudnn_ok(q, k, v, mask, arch):
            return CUDNN
        if backend == MATH:
            return MATH
    return None


def _parse(args, kwargs) -> dict:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    given = dict(zip(names, args), **kwargs)
    defaults = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
    return {**defaults, **given}


def sdpa(args: tuple, kwargs: dict):
    """The attention CUDA's composite computes for these arguments, through a library's CUDA registration or
    the math backend; None where torch's own call (on the CPU) stands in."""
    p = _parse(args, kwargs)
    q, k, v, mask = p["query"], p["key"], p["value"], p["attn_mask"]
    tensors = (q, k, v) + (() if mask is None else (mask,))
    if set(p) - {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"} or \
            not all(isinstance(t, CudaTensor) for t in tensors) or any(t.dim() != 4 for t in (q, k, v)) or \
            not q.dtype == k.dtype == v.dtype or (mask is not None and p["is_causal"]):
        return None
    arch = int("".join(map(str, torch.cuda.get_device_capability())))
    backend = choose(q, k, v, mask, bool(p["is_causal"]), bool(p["enable_gqa"]), arch)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if backend in _FUSED:
        name = _FUSED[backend]
        if not _registered(name) or (grad and not _registered(name + "_backward")):
            return None
        if backend == FLASH:
            return _flash(q, k, v, p)
        return _efficient(q, k, v, p, grad) if backend == EFFICIENT else _cudnn(q, k, v, p, grad)
    if backend == MATH:
        return _math(q, k, v, p)
    return None


def _flash(q, k, v, p: dict):
    """As CUDA's composite calls flash: the head dimension padded to a multiple of 8, the scale of the
    unpadded one, the output cut back."""
    d = q.size(-1)
    scale = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(d)
    pad = -d % 8
    if pad:
        q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
    out = torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, float(p["dropout_p"]), bool(p["is_causal"]), False, scale=scale)[0]
    return out[..., :d] if pad else out


def _efficient(q, k, v, p: dict, grad: bool):
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, grad, float(p["dropout_p"]), bool(p["is_causal"]), scale=p["scale"])[0]


def _cudnn(q, k, v, p: dict, grad: bool):
    return torch.ops.aten._scaled_dot_product_cudnn_attention(
        q, k, v, None, grad, float(p["dropout_p"]), bool(p["is_causal"]), False, scale=p["scale"])[0]


def _math(q, k, v, p: dict):
    mask = p["attn_mask"]
    if mask is not None and mask.dtype == torch.bool:          # as the composite converts it for every backend
        mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, float("-inf"))
    return torch.ops.aten._scaled_dot_product_attention_math(
        q, k, v, mask, float(p["dropout_p"]), bool(p["is_causal"]), None, scale=p["scale"],
        enable_gqa=bool(p["enable_gqa"]))[0]
