"""Kernels with bugs a GPU test would not see: each must fail under --tt-cuda, naming the kernel's line."""
import torch

from kernels import accumulate_kernel, shift_kernel


def test_shift_reads_past_the_end():
    x = torch.arange(100, dtype=torch.float32, device="cuda")
    out = torch.zeros_like(x)
    shift_kernel[(2,)](x, out, 100, BLOCK=64)
    torch.cuda.synchronize()
    assert torch.equal(out[:99], x[1:])


def test_accumulate_into_empty_reads_garbage():
    x = torch.ones(100, device="cuda")
    out = torch.empty(100, device="cuda")          # never initialised: the kernel reads it first
    accumulate_kernel[(2,)](x, out, 100, BLOCK=64)
    assert out.shape == x.shape


def test_accumulate_into_zeros_is_fine():
    x = torch.ones(100, device="cuda")
    out = torch.zeros(100, device="cuda")
    accumulate_kernel[(2,)](x, out, 100, BLOCK=64)
    assert torch.equal(out, x)
