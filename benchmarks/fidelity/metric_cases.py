"""The launches whose memory metrics are compared with Nsight Compute: kernels, sizes and inputs.

A case builds its inputs from a generator seeded by its name, on the CPU, then moves them to the device:
the profiled GPU launch and the traced CPU launch see the same data (the gather's indices too). Kernels
come from the test suite (tests/kernels) where it has one; the strided load, the gather and the pure
store are defined here. Every case launches a fresh kernel made by its factory, with Triton's default
num_warps (4) and num_stages, which is what the analysis is told.

``MAIN`` are the cases of the issue; ``SWEEP`` are diagnostics for the L2's write-back behaviour (a pure
store and a vector add at growing footprints, below and above the 60 MB L2).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import torch
import triton
import triton.language as tl

import kernels as K

Mi = 1 << 20


@triton.jit
def stride2_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + 2 * offs, mask=m), mask=m)


@triton.jit
def gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.load(x_ptr + i, mask=m), mask=m)


@triton.jit
def fill_kernel(out_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], value, tl.float32), mask=offs < n)


def _jit(fn) -> Callable:
    """A factory of fresh kernels from an @triton.jit object (each trace or compile gets its own)."""
    return lambda: triton.jit(fn.fn)


@dataclass(frozen=True)
class Case:
    name: str
    kernel: str                      # the kernel's function name: what Nsight Compute reports
    factory: Callable                # () -> a fresh kernel
    prepare: Callable                # (generator, device) -> launch(kernel)
    what: str                        # one line for the results table
    cost: float = 1.0                # relative tracing time, to start the longest first
    num_warps: int = 4               # what the launch uses and the analysis is told

    def launcher(self, device: str) -> Callable:
        g = torch.Generator().manual_seed(zlib.crc32(self.name.encode()))
        return self.prepare(g, device)


def _randn(g, device, *shape):
    return torch.randn(*shape, generator=g).to(device)


def _add(n):
    def prepare(g, device):
        x, y = _randn(g, device, n), _randn(g, device, n)
        return lambda k: K.add(x, y, kernel=k, block=1024)
    return prepare


def _stride2(n):
    def prepare(g, device):
        x = _randn(g, device, 2 * n)

        def launch(k):
            out = torch.empty(n, device=device)
            k[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
            return out
        return launch
    return prepare


def _gather(n, table):
    def prepare(g, device):
        x = _randn(g, device, table)
        idx = torch.randint(0, table, (n,), generator=g, dtype=torch.int32).to(device)

        def launch(k):
            out = torch.empty(n, device=device)
            k[(triton.cdiv(n, 1024),)](x, idx, out, n, BLOCK=1024)
            return out
        return launch
    return prepare


def _fill(n):
    def prepare(g, device):
        def launch(k):
            out = torch.empty(n, device=device)
            k[(triton.cdiv(n, 1024),)](out, n, 1.5, BLOCK=1024)
            return out
        return launch
    return prepare


def _softmax(rows, cols):
    def prepare(g, device):
        x = _randn(g, device, rows, cols)
        return lambda k: K.softmax(x, kernel=k)
    return prepare


def _layer_norm(M, N, block):
    def prepare(g, device):
        x = _randn(g, device, M, N)
        w, b = (torch.rand(N, generator=g) + 0.5).to(device), _randn(g, device, N)
        return lambda k: K.layer_norm_fwd(x, w, b, kernel=k, block=block)
    return prepare


def _transpose(M, N, block):
    def prepare(g, device):
        x = _randn(g, device, M, N)
        return lambda k: K.transpose(x, kernel=k, block_m=block, block_n=block)
    return prepare


def _matmul(M, N, Kd, group):
    def prepare(g, device):
        a, b = _randn(g, device, M, Kd), _randn(g, device, Kd, N)
        # 64 x 64 tiles: a 128 x 128 fp32 accumulator over 4 warps takes 255 registers and spills to local
        # memory, whose L2 traffic the trace cannot show
        return lambda k: K.matmul(a, b, kernel=k, block_m=64, block_n=64, block_k=32, group_m=group)
    return prepare


def _matmul_tiles(size, block, warps, dtype):
    """A ``size``^3 matmul with ``block`` = (BM, BN, BK) tiles and ``warps`` warps, inputs in ``dtype``, fp32
    out: the large tiles whose compiled layouts (cp.async copies, replicated rows) the offsets alone miss."""
    def prepare(g, device):
        a = torch.randn(size, size, generator=g).to(dtype).to(device)
        b = torch.randn(size, size, generator=g).to(dtype).to(device)
        c = torch.empty(size, size, device=device)
        bm, bn, bk = block
        grid = (triton.cdiv(size, bm) * triton.cdiv(size, bn),)
        return lambda k: k[grid](a, b, c, size, size, size, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                 num_warps=warps)
    return prepare


MAIN = [
    Case("add_16M", "add_kernel", K.make_add, _add(16 * Mi), "vector add, 16 Mi fp32, BLOCK 1024", 20),
    Case("stride2_4M", "stride2_kernel", _jit(stride2_kernel), _stride2(4 * Mi),
         "out[i] = x[2i], 4 Mi fp32 out, BLOCK 1024"),
    Case("gather_4M", "gather_kernel", _jit(gather_kernel), _gather(4 * Mi, 16 * Mi),
         "out[i] = x[idx[i]], 4 Mi random int32 indices into 16 Mi fp32 (64 MiB)"),
    Case("softmax_16k_x_1000", "softmax_kernel", K.make_softmax, _softmax(16384, 1000),
         "row softmax, 16384 x 1000 fp32, BLOCK 1024", 20),
    Case("softmax_16k_x_1024", "softmax_kernel", K.make_softmax, _softmax(16384, 1024),
         "row softmax, 16384 x 1024 fp32 (a row stride Triton knows is a multiple of 16)", 20),
    Case("layer_norm_4k_x_2k", K.layer_norm_fwd_kernel.__name__, K.make_layer_norm_fwd, _layer_norm(4096, 2048, 1024),
         "layer norm forward, 4096 x 2048 fp32, BLOCK 1024 (three passes over each row)", 30),
    Case("transpose_4k", "transpose_kernel", K.make_transpose, _transpose(4096, 4096, 64),
         "4096 x 4096 fp32 transpose, 64 x 64 tiles"),
    Case("matmul_2k_g1", "matmul_kernel", K.make_matmul, _matmul(2048, 2048, 2048, 1),
         "2048^3 fp32 (A+B+C 48 MiB: fits L2), 64x64x32 tiles, GROUP_M 1", 50),
    Case("matmul_2k_g8", "matmul_kernel", K.make_matmul, _matmul(2048, 2048, 2048, 8),
         "as above, GROUP_M 8", 50),
    Case("matmul_big_g1", "matmul_kernel", K.make_matmul, _matmul(256, 32768, 1024, 1),
         "M 256, N 32768, K 1024 fp32 (B 128 MiB, A+B+C 161 MiB: well beyond L2), GROUP_M 1", 60),
    Case("matmul_big_g8", "matmul_kernel", K.make_matmul, _matmul(256, 32768, 1024, 8),
         "as above, GROUP_M 8 (both tile rows walk B together)", 60),
] + [
    Case(f"matmul_1k_128x128x32_{name}_w{w}", "matmul_kernel", K.make_matmul,
         _matmul_tiles(1024, (128, 128, 32), w, dtype),
         f"1024^3 {name} inputs, 128x128x32 tiles, {w} warps, GROUP_M 8 (large tiles: cp.async copies)", 40, w)
    for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)) for w in (4, 8)
] + [
    # held-out style, one more axis each: bf16, 1/2 warps (mma.sync instead of a warpgroup's wgmma), tiles of
    # 16 and 256, and masked edges (1000 is no multiple of any tile)
    Case(f"matmul_{n}_{bm}x{bn}x{bk}_{name}_w{w}", "matmul_kernel", K.make_matmul,
         _matmul_tiles(n, (bm, bn, bk), w, dtype),
         f"{n}^3 {name} inputs, {bm}x{bn}x{bk} tiles, {w} warps, GROUP_M 8" + (" (masked edges)" if n % 16 else ""),
         cost, w)
    for n, (bm, bn, bk), name, dtype, w, cost in (
        (1024, (128, 128, 32), "bf16", torch.bfloat16, 4, 40),
        (1024, (64, 256, 32), "bf16", torch.bfloat16, 4, 40),
        (1024, (256, 128, 64), "fp16", torch.float16, 8, 40),
        (512, (16, 16, 16), "fp16", torch.float16, 1, 60),
        (1024, (64, 64, 32), "fp16", torch.float16, 2, 40),
        (1024, (128, 64, 64), "bf16", torch.bfloat16, 2, 40),
        (1000, (128, 128, 32), "fp16", torch.float16, 4, 40),
        (1000, (64, 64, 32), "fp32", torch.float32, 4, 40),
        (1000, (32, 64, 16), "bf16", torch.bfloat16, 2, 40))
]

SWEEP = [Case(f"fill_{n}M", "fill_kernel", _jit(fill_kernel), _fill(n * Mi), f"pure store, {n} Mi fp32")
         for n in (4, 8, 16, 32)]
SWEEP += [Case(f"add_{n}M", "add_kernel", K.make_add, _add(n * Mi), f"vector add, {n} Mi fp32")
          for n in (1, 2, 4, 8)]

CASES = {c.name: c for c in MAIN + SWEEP}
