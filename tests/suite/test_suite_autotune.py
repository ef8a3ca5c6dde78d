"""An autotuned kernel's config is chosen as Triton's autotuner chooses it on the GPU, less the timing:
a config that does not compile for the chosen GPU (a failed ``tl.static_assert``, more shared memory than
the GPU has) is dropped, as the autotuner drops it when it catches CompileTimeAssertionFailure or
OutOfResources while benchmarking; the launch's config says which were dropped and why (FlagGems'
``_attn_fwd`` asserts ``BLOCK_N <= HEAD_DIM`` on its first config)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis.gpus import GPUS
from triton_trace.errors import ProgramError
from triton_trace.suite import cuda_on_cpu


@triton.autotune(configs=[triton.Config({"BLOCK_N": 128}, num_warps=4),
                          triton.Config({"BLOCK_N": 32}, num_warps=2),
                          triton.Config({"BLOCK_N": 16}, num_warps=1)], key=["n"])
@triton.jit
def double_kernel(x_ptr, y_ptr, n, HEAD: tl.constexpr, BLOCK_N: tl.constexpr):
    tl.static_assert(BLOCK_N <= HEAD, "a block may not pass the head")
    offs = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def _grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK_N"]),)


def test_a_config_failing_its_static_assert_is_dropped():
    triton_trace.reset()
    x = torch.randn(100)
    y = torch.empty_like(x)
    traced = triton_trace.trace(double_kernel)
    traced[_grid](x, y, 100, HEAD=64)
    traced[_grid](x, y, 100, HEAD=64)          # the same key: the choice is made once, as Triton tunes once
    first, again = triton_trace.current_trace().launches
    assert torch.equal(y, x * 2)
    assert first.config["kwargs"] == {"BLOCK_N": 32} and first.config["index"] == 1
    assert first.config["num_warps"] == 2 and first.grid == (4, 1, 1)
    why = first.config["chosen_by"]
    assert "config 0 (BLOCK_N: 128" in why and "tl.static_assert(BLOCK_N <= HEAD" in why
    assert "a block may not pass the head" in why and "config 1" not in why
    assert again.config == first.config


def test_a_config_that_compiles_is_kept_and_nothing_said():
    triton_trace.reset()
    x = torch.randn(300)
    y = torch.empty_like(x)
    triton_trace.trace(double_kernel)[_grid](x, y, 300, HEAD=128)
    lc = triton_trace.current_trace().launches[-1]
    assert torch.equal(y, x * 2)
    assert lc.config["kwargs"] == {"BLOCK_N": 128} and lc.config["chosen_by"] == "first config"


def test_when_no_config_compiles_the_first_fails_at_its_assert_as_on_a_gpu():
    x = torch.randn(40)
    y = torch.empty_like(x)
    with pytest.raises(ProgramError, match="static_assert|AssertionError"):
        triton_trace.trace(double_kernel)[_grid](x, y, 40, HEAD=8)


@triton.autotune(configs=[triton.Config({"BM": 256, "BN": 256, "BK": 64}, num_stages=4, num_warps=8),
                          triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_stages=2, num_warps=4)], key=["M"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("gpu", ["H200", "A100"])
def test_a_config_needing_more_shared_memory_than_the_gpu_has_is_dropped(gpu):
    with cuda_on_cpu(gpu):
        triton_trace.reset()
        a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        c = torch.empty(64, 64, device="cuda", dtype=torch.float16)
        matmul_kernel[lambda m: (triton.cdiv(64, m["BM"]), triton.cdiv(64, m["BN"]))](a, b, c, 64, 64, 64)
        lc = triton_trace.current_trace().launches[-1]
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    assert lc.config["kwargs"] == {"BM": 64, "BN": 64, "BK": 32}
    why = lc.config["chosen_by"]
    assert f"sm_{GPUS[gpu].arch}" in why and "config 0 (BM: 256, BN: 256, BK: 64" in why
    assert "out of resource: shared memory" in why and f"Hardware limit: {GPUS[gpu].shared_mem_optin}" in why
    # at least the A and B tiles of (num_stages - 1) pipeline stages live in shared memory
    required = int(why.split("Required: ")[1].split(",")[0])
    assert required >= (256 * 64 + 64 * 256) * 2 * 3 and required > GPUS[gpu].shared_mem_optin
