"""``F.scaled_dot_product_attention`` on the redirect's CUDA tensors takes the backend CUDA's composite takes
(triton_trace/suite/attention.py): a library's CUDA registration of aten::_scaled_dot_product_flash_attention
(what FlagGems' ``use_gems()`` registers) runs, as on a GPU, where torch's CPU stub would pick the CPU's fused
kernel and the test would pass hollow. Where a GPU would run torch's own CUDA kernel, torch's CPU one still
stands in. Results are compared with attention computed in float64 on the CPU."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from triton_trace.suite import cuda_on_cpu
from triton_trace.suite.attention import CUDNN, EFFICIENT, FLASH, MATH, choose

CALLS: list = []


def flash_forward(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """The library's aten::_scaled_dot_product_flash_attention (its nine results), computed in float32; the
    Triton kernel behind it and the whole suite run are tests/cuda_suite/test_attention.py."""
    CALLS.append(("flash", tuple(query.shape), is_causal, scale))
    s = query.float() @ key.float().transpose(-2, -1) * scale
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = (torch.softmax(s, -1) @ value.float()).to(query.dtype)
    empty = torch.empty(0, device=query.device)
    return out, lse, None, None, query.shape[2], key.shape[2], empty, empty, empty


@pytest.fixture
def library():
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_scaled_dot_product_flash_attention", flash_forward, "CUDA")
    CALLS.clear()
    yield lib
    lib._destroy()


def reference(q, k, v, scale=None, causal=False, mask=None):
    q, k, v = (t.cpu().double() for t in (q, k, v))
    s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        s = s + mask.cpu().double()
    return torch.softmax(s, -1) @ v


def _qkv(shape, dtype=torch.float16, kv_len=None, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    kv = shape[:2] + (kv_len or shape[2], shape[3])
    return [torch.randn(s, generator=g).to(dtype).cuda().requires_grad_(requires_grad) for s in (shape, kv, kv)]


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_reaches_the_library_s_flash_kernel(library, causal):
    with cuda_on_cpu():
        q, k, v = _qkv((2, 3, 40, 32))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert out.is_cuda and out.shape == q.shape and out.dtype == torch.float16
        torch.testing.assert_close(out.cpu().double(), reference(q, k, v, causal=causal), rtol=2e-3, atol=2e-3)
        assert CALLS == [("flash", (2, 3, 40, 32), causal, 1.0 / math.sqrt(32))]


def test_a_head_dimension_off_8_is_padded_and_scaled_by_the_unpadded_one(library):
    with cuda_on_cpu():
        q, k, v = _qkv((1, 2, 24, 12), kv_len=40)
        out = F.scaled_dot_product_attention(q, k, v)
        assert out.shape == (1, 2, 24, 12)
        torch.testing.assert_close(out.cpu().double(), reference(q, k, v), rtol=2e-3, atol=2e-3)
        assert CALLS == [("flash", (1, 2, 24, 16), False, 1.0 / math.sqrt(12))]


def test_where_a_gpu_runs_torch_s_own_kernel_torch_s_cpu_one_stands_in(library):
    """float32 (the efficient kernel: none registered), a mask, inputs that need a gradient the library has no
    backward for: no library call and no launch, torch's answer as before, gradients included."""
    with cuda_on_cpu():
        q, k, v = _qkv((1, 2, 16, 16), dtype=torch.float32)
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v).cpu().double(), reference(q, k, v),
                                   rtol=1e-5, atol=1e-6)
        q, k, v = _qkv((1, 2, 16, 16))
        mask = torch.randn(16, 16).half().cuda()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(out.cpu().double(), reference(q, k, v, mask=mask), rtol=2e-3, atol=2e-3)
        q, k, v = _qkv((1, 2, 16, 16), requires_grad=True)
        F.scaled_dot_product_attention(q, k, v).float().sum().backward()
        assert q.grad is not None and q.grad.is_cuda
        assert CALLS == []


def test_math_chosen_by_sdpa_kernel_runs_the_math_backend(library):
    with cuda_on_cpu():
        q, k, v = _qkv((1, 2, 16, 16))
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q, k, v, scale=0.3)
        torch.testing.assert_close(out.cpu().double(), reference(q, k, v, scale=0.3), rtol=2e-3, atol=2e-3)
        assert CALLS == []


def test_without_a_registration_nothing_changes():
    CALLS.clear()
    with cuda_on_cpu():
        q, k, v = _qkv((1, 2, 16, 16))
        out = F.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(out.cpu().double(), reference(q, k, v), rtol=2e-3, atol=2e-3)
        assert CALLS == []


def test_the_choice_follows_cuda_s_constraints():
    h = torch.zeros(1, 2, 8, 64, dtype=torch.float16)
    f = h.float()
    assert choose(h, h, h, None, False, False, 90) == FLASH
    assert choose(h, h, h, None, False, False, 75) == EFFICIENT              # flash needs sm80
    assert choose(f, f, f, None, False, False, 90) == EFFICIENT              # flash: fp16/bf16 only
    assert choose(h, h, h, h[0, 0, :, :8], False, False, 90) == EFFICIENT    # flash takes no mask
    long_k = torch.zeros(1, 2, 12, 64, dtype=torch.float16)
    assert choose(h, long_k, long_k, None, True, False, 90) == EFFICIENT     # causal, non-square: not flash
    odd = torch.zeros(1, 2, 8, 264, dtype=torch.float16)
    assert choose(odd, odd, odd, None, False, False, 90) == EFFICIENT        # head dim over 256 (a multiple of 8)
    odd = torch.zeros(1, 2, 8, 6, dtype=torch.float32)
    assert choose(odd, odd, odd, None, False, False, 90) == MATH             # not a multiple of 4
    grouped = torch.zeros(1, 1, 8, 64, dtype=torch.float16)
    assert choose(h, grouped, grouped, None, False, True, 90) == FLASH       # GQA: flash only
    assert choose(f, grouped.float(), grouped.float(), None, False, True, 90) == MATH
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        assert choose(h, h, h, None, False, False, 90) == EFFICIENT
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        assert choose(h, h, h, None, False, False, 90) == CUDNN
        assert choose(f, f, f, None, False, False, 90) is None                # no backend takes it: torch's error
