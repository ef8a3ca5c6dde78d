"""Triton kernels of the suite (a library's ops), each with the wrapper a library puts in front of it."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    assert x.is_cuda and y.is_cuda, "Only support CUDA tensors"
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    return out


@triton.jit
def persistent_sum_kernel(x_ptr, partial_ptr, n, NUM_PROGRAMS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(pid * BLOCK, n, NUM_PROGRAMS * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(acc))


def persistent_sum(x: torch.Tensor) -> torch.Tensor:
    programs = torch.cuda.get_device_properties(x.device).multi_processor_count
    partial = torch.empty(programs, device=x.device, dtype=torch.float32)
    persistent_sum_kernel[(programs,)](x, partial, x.numel(), NUM_PROGRAMS=programs, BLOCK=64)
    return partial.sum()


def _fits_shared_memory(configs, named_args, **kwargs):
    """Prune configs by the device, as libraries do: Triton's driver reports the shared memory."""
    smem = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())["max_shared_mem"]
    return [c for c in configs if c.kwargs["BLOCK_N"] * 4 * c.num_stages <= smem]


@triton.autotune(configs=[triton.Config({"BLOCK_N": 1 << 20}, num_warps=8, num_stages=4),   # pruned: too big
                          triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=2),
                          triton.Config({"BLOCK_N": 64}, num_warps=2, num_stages=2)],
                 key=["n_cols"], prune_configs_by={"early_config_prune": _fits_shared_memory})
@triton.jit
def row_softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    m = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=m)


def row_softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    row_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0))
    return out


@triton.jit
def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1), mask=m)          # BUG: reads one past the end


@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.load(out_ptr + offs, mask=m)                                 # BUG when out is torch.empty
    tl.store(out_ptr + offs, acc + tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def fast_exp_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.inline_asm_elementwise("ex2.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y, mask=m)
