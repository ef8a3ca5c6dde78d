"""A small kernel test suite with planted bugs, each beside its correct twin, for tests/suite/test_pytest_plugin.py
(run with ``pytest --triton-trace``; not collected by the project's own test run)."""
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def copy_unmasked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs), mask=offs < n)      # the load lacks its mask


@triton.jit
def copy_masked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def sum_racy(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.load(out_ptr) + tl.sum(tl.load(x_ptr + offs)))   # every program writes out[0]


@triton.jit
def sum_atomic(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs)))


def _copy(kernel, n=100, block=64):
    x = torch.randn(n)
    y = torch.zeros(n)
    kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
    return x, y


def test_copy_unmasked_bug():
    x, y = _copy(copy_unmasked)
    assert torch.equal(x, y)


def test_copy_masked_clean():
    x, y = _copy(copy_masked)
    assert torch.equal(x, y)


def test_sum_racy_bug():
    x = torch.ones(256)
    out = torch.zeros(1)
    sum_racy[(4,)](x, out, BLOCK=64)
    assert out.item() > 0


def test_sum_atomic_clean():
    x = torch.ones(256)
    out = torch.zeros(1)
    sum_atomic[(4,)](x, out, BLOCK=64)
    assert out.item() == 256


@pytest.mark.triton_trace(expect="race")
def test_sum_racy_expected():
    test_sum_racy_bug()


@pytest.mark.triton_trace(skip=True)
def test_copy_unmasked_exempt():
    _copy(copy_masked)


@pytest.mark.triton_trace(expect="race")
def test_expected_race_missing():
    test_sum_atomic_clean()


def test_no_kernel_at_all():
    assert 1 + 1 == 2
