"""The held-out counter of issue 42: a 128x128x32 fp32 matmul, M = N = K = 1024, grid 64, 4 warps, no masks,
``tl.dot`` at its default (tf32). Measured by Nsight Compute on an H200 with Triton 3.6: 327,680 global load
requests and 5,242,880 sectors (l1tex__t_requests/sectors_pipe_lsu_mem_global_op_ld).

Why: the tf32 wgmma wants B K-major in shared memory (``nvmma_shared<transposed = true>``) while B is N-major
in global memory, so no two consecutive elements of a thread are consecutive on both sides and B is copied
with 4-byte ``cp.async.ca`` (32 per warp and K step, 16 sectors each: 128 requests, 2048 sectors per
program and step), A with 16-byte ``cp.async.cg`` (32 requests, 512 sectors): 160 requests a step against
the 64 of 16-byte copies everywhere, 2.5x. The prediction compiles the kernel for sm_90 on the CPU (no GPU
needed) and must give the measured numbers, whether the two loads sit on two source lines or on one.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_trace

MEASURED_H200 = {"load_requests": 327_680, "load_sectors": 5_242_880}


@triton.jit
def matmul_two_lines(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BLOCK_N), pid % tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc)


@triton.jit
def matmul_one_line(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = pid // tl.cdiv(N, BLOCK_N), pid % tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)     # both copies on one source line
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc)


@pytest.mark.skipif(not triton.__version__.startswith("3.6"), reason="measured with Triton 3.6's compiled layouts")
@pytest.mark.parametrize("kernel", [matmul_two_lines, matmul_one_line], ids=["two_lines", "one_line"])
def test_heldout_matmul_counts_as_measured(kernel):
    n = 1024
    a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    triton_trace.trace(values=False)(kernel)[(64,)](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                                   c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                                   num_warps=4)
    report = triton_trace.analyze(triton_trace.current_trace(), gpu="H200", what_if=False).to_dict()
    launch = report["launches"][0]
    assert launch["compiled"]["layouts"] == "compiler", launch["compiled"]
    loads = [op for op in launch["ops"] if op.get("kind") == "load"]
    got = {"load_requests": sum(op["requests"] for op in loads), "load_sectors": sum(op["sectors"] for op in loads)}
    assert got == MEASURED_H200
