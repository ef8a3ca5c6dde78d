"""Planted bugs on CUDA tensors, for tests/gpu/test_gpu_plugin.py (pytest --triton-trace traces them on CPU
copies and writes the results back to the GPU tensors)."""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_unmasked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)


@triton.jit
def copy_masked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def test_cuda_unmasked_bug():
    x = torch.randn(100, device="cuda")
    y = torch.zeros(100, device="cuda")
    copy_unmasked[(2,)](x, y, 100, BLOCK=64)


def test_cuda_masked_clean():
    x = torch.randn(100, device="cuda")
    y = torch.zeros(100, device="cuda")
    copy_masked[(2,)](x, y, 100, BLOCK=64)
    assert y.device.type == "cuda" and torch.equal(y, x * 2)      # written back to the GPU tensor
