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


@triton.jit
def attention_kernel(Q, K, V, O, LSE, scale, M, N, D, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr,
                     CAUSAL: tl.constexpr):
    """One (batch * head, block of query rows) a program, keys a block at a time with an online softmax."""
    bh = tl.program_id(1)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    dims = tl.arange(0, BD)
    q_mask = (rows[:, None] < M) & (dims[None, :] < D)
    q = tl.load(Q + bh * M * D + rows[:, None] * D + dims[None, :], mask=q_mask, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BD], tl.float32)
    for start in range(0, N, BN):
        cols = start + tl.arange(0, BN)
        kv_mask = (cols[:, None] < N) & (dims[None, :] < D)
        k = tl.load(K + bh * N * D + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(V + bh * N * D + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        keep = cols[None, :] < N
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.where(keep, tl.dot(q, tl.trans(k)) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(O + bh * M * D + rows[:, None] * D + dims[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=q_mask)
    tl.store(LSE + bh * M + rows, m_i + tl.log(l_i), mask=rows < M)


def flash_attention(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    """aten::_scaled_dot_product_flash_attention as a library registers it for the CUDA key: its nine
    results (output, logsumexp, no cumulative lengths, the sequence lengths, empty RNG state)."""
    q, k, v = (t.contiguous() for t in (query, key, value))
    B, H, M, D = q.shape
    N = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty((B, H, M), dtype=torch.float32, device=q.device)
    scale = 1.0 / D ** 0.5 if scale is None else scale
    attention_kernel[(triton.cdiv(M, 16), B * H)](q, k, v, out, lse, scale, M, N, D, BM=16, BN=16,
                                                  BD=max(16, triton.next_power_of_2(D)), CAUSAL=is_causal)
    empty = torch.empty(0, device=q.device)
    return out, lse, None, None, M, N, empty, empty, empty


class use_library:
    """The library's ops registered for the CUDA key inside the block, as FlagGems' ``use_gems()`` does."""

    def __enter__(self):
        self.lib = torch.library.Library("aten", "IMPL")
        self.lib.impl("_scaled_dot_product_flash_attention", flash_attention, "CUDA")
        return self

    def __exit__(self, *exc):
        self.lib._destroy()
