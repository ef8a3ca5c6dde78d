"""Kernels as GPU libraries write them (flash-linear-attention's int64 offsets from loop variables, a
bfloat16 output, PTX in a helper), with their wrappers."""
import torch
import triton
import triton.language as tl


@triton.jit
def chunk_sum_kernel(x_ptr, out_ptr, T, BT: tl.constexpr, NT: tl.constexpr):
    """Each row's chunks summed, offsets in int64 as flash-linear-attention computes them."""
    i_b = tl.program_id(0)
    base = x_ptr + i_b.to(tl.int64) * T
    acc = tl.zeros([BT], tl.float32)
    for i_t in range(NT):
        o_t = i_t.to(tl.int64) * BT + tl.arange(0, BT)
        acc += tl.load(base + o_t, mask=o_t < T, other=0.0)
    for i_t in tl.range(0, tl.cdiv(T, BT) - NT):      # a runtime bound: chunks past NT (none here)
        acc += (i_t * 0).to(tl.float32)
    tl.store(out_ptr + i_b * BT + tl.arange(0, BT), acc)


def chunk_sum(x: torch.Tensor, BT: int = 16) -> torch.Tensor:
    B, T = x.shape
    out = torch.empty(B, BT, device=x.device, dtype=torch.float32)
    chunk_sum_kernel[(B,)](x, out, T, BT=BT, NT=triton.cdiv(T, BT))
    return out


@triton.jit
def to_bf16_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 1.0, mask=m)


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, device=x.device, dtype=torch.bfloat16)
    to_bf16_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@triton.jit
def _lane_swap(x):
    # a warp shuffle: lanes trade values, which only a GPU's warps can do (the tracer runs PTX arithmetic)
    return tl.inline_asm_elementwise("shfl.sync.bfly.b32 $0, $1, 1, 0x1f, -1;", "=r,r", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)


@triton.jit
def warp_swap_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, _lane_swap(tl.load(x_ptr + offs, mask=m)), mask=m)


def warp_swap(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    warp_swap_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
