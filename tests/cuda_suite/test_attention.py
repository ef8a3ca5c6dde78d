"""Attention as FlagGems tests it: ``F.scaled_dot_product_attention`` on CUDA tensors inside a block where the
library's flash kernel is registered for aten::_scaled_dot_product_flash_attention's CUDA key. On a GPU,
torch's composite picks the flash backend and reaches the library's kernel; under ``pytest --tt-cuda`` it
must too (else the test passes hollow, having compared torch with torch)."""
import pytest
import torch
import torch.nn.functional as F

from kernels import use_library


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_runs_the_library_s_flash_kernel(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 32, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.cpu().float(), k.cpu().float(), v.cpu().float(), is_causal=causal)
    with use_library():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.is_cuda and out.dtype == torch.float16
    torch.testing.assert_close(out.cpu().float(), ref, rtol=2e-3, atol=2e-3)
