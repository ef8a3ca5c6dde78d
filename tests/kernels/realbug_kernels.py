"""Our own kernels with the defects triton_trace found in public libraries (benchmarks/realbugs/REALBUGS.md),
each beside its fixed twin. No upstream code: the same mistake, written small.

- depth_mix_*: a weighted sum over a stack of N blocks, out[r] = sum_i w[i] * x[i, r] and dx[i, r] = w[i] * g[r]
  (Liger-Kernel's AttnRes): the capped twin unrolls a constexpr MAX_BLOCKS loop that the host caps, so blocks
  past the cap are dropped from out and their dx rows are never written; it also forms the block offset
  i * n_rows * D in int32, which wraps once (N - 1) * n_rows * D reaches 2**31.
- norm_*: group normalisation; the one-pass twin takes the variance as E[x^2] - E[x]^2, which cancels to a
  negative number for groups of nearly equal values (Liger-Kernel's GroupNorm): rsqrt of it is NaN.
- rows_*: a program owns BS rows but computes a BT-row tile (flash-linear-attention's layer norm backward):
  the overlapping twin stores the whole tile, masked by the row count only, so BT / BS programs write each row.
- triangle_*: a tile whose upper triangle gets exp2 of a large positive number (inf) and is then overwritten
  by zeros by the same program before the kernel ends (GLA's intra-chunk A): no bug, the final values are
  finite; what triton_trace says about it is a false finding (see REALBUGS.md).
- softcap_lse_*: a cross entropy whose logits are softcapped, cap * tanh(z / cap), before the logsumexp, and
  loaded with other=-inf for the lanes past the vocabulary (unsloth's cross entropy with softcapping): the
  padded twin caps the padding too, tanh(-inf) = -1 turns it into -cap, and the sum of exp counts every padded
  lane; the re-masked twin puts -inf back after the cap.
- online_lse_softcap_*: the same softcap mistake in an online (looped) logsumexp over blocks of the row
  (Liger-Kernel's cross entropy): only the last, partial block has padded lanes, and each counts once per row.
- row_softmax_int*: a softmax over rows whose start is row * row_stride, row = tl.program_id(0) in int32
  (Liger-Kernel's softmax and sparsemax): once the row's offset reaches 2**31 it wraps and the load reads
  2 GiB before the tensor; the int64 twin casts the row id first.
- padded_through / padded_max_tanh: a padded value carried through one op of each kind the builder computes
  (libdevice, the math ops that are builder methods of their own, conversions, join/split/cat) into a sum,
  and through libdevice tanh into a max: what the padded_reduction check must follow to find the above.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

# ---------------------------------------------------------------- depth mix: dropped blocks, int32 offsets


@triton.jit
def depth_mix_capped(x_ptr, w_ptr, g_ptr, out_ptr, dx_ptr, n_blocks, n_rows, D,
                     MAX_BLOCKS: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    g = tl.load(g_ptr + r * D + cols, mask=m, other=0.0)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in tl.static_range(0, MAX_BLOCKS):           # blocks past MAX_BLOCKS are never visited
        if i < n_blocks:
            off = i * n_rows * D + r * D                 # int32: wraps when i * n_rows * D >= 2**31
            w = tl.load(w_ptr + i)
            acc += w * tl.load(x_ptr + off + cols, mask=m, other=0.0).to(tl.float32)
            tl.store(dx_ptr + off + cols, w * g, mask=m)
    tl.store(out_ptr + r * D + cols, acc, mask=m)


@triton.jit
def depth_mix_fixed(x_ptr, w_ptr, g_ptr, out_ptr, dx_ptr, n_blocks, n_rows, D,
                    MAX_BLOCKS: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    g = tl.load(g_ptr + r * D + cols, mask=m, other=0.0)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in range(0, n_blocks):                         # every block, whatever N
        off = i.to(tl.int64) * n_rows * D + r * D
        w = tl.load(w_ptr + i)
        acc += w * tl.load(x_ptr + off + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(dx_ptr + off + cols, w * g, mask=m)
    tl.store(out_ptr + r * D + cols, acc, mask=m)


def depth_mix(kernel, x, w, g, cap=8):
    """out [n_rows, D] and dx [N, n_rows, D] (float32); the host caps the unrolled loop at ``cap`` blocks, as
    a wrapper that rounds N up to one of a few sizes and stops at the largest does."""
    N, n_rows, D = x.shape
    out = torch.empty(n_rows, D, dtype=torch.float32)
    dx = torch.empty(N, n_rows, D, dtype=torch.float32)
    kernel[(n_rows,)](x, w, g, out, dx, N, n_rows, D, MAX_BLOCKS=min(triton.next_power_of_2(N), cap),
                      BLOCK_D=triton.next_power_of_2(D))
    return out, dx


@triton.jit
def depth_sum_int32(x_ptr, out_ptr, n_blocks, n_rows, D, MAX_BLOCKS: tl.constexpr, BLOCK_D: tl.constexpr):
    """out[r] = sum_i x[i, r]: the int32 block offset alone (no dx), for the large-size test."""
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in tl.static_range(0, MAX_BLOCKS):
        if i < n_blocks:
            acc += tl.load(x_ptr + i * n_rows * D + r * D + cols, mask=m, other=0).to(tl.float32)
    tl.store(out_ptr + r * D + cols, acc, mask=m)


@triton.jit
def depth_sum_int64(x_ptr, out_ptr, n_blocks, n_rows, D, MAX_BLOCKS: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for i in tl.static_range(0, MAX_BLOCKS):
        if i < n_blocks:
            acc += tl.load(x_ptr + tl.full((), i, tl.int64) * n_rows * D + r * D + cols, mask=m, other=0).to(tl.float32)
    tl.store(out_ptr + r * D + cols, acc, mask=m)


# ---------------------------------------------------------------- group norm: one-pass variance


@triton.jit
def norm_onepass(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr, RSQRT: tl.constexpr):
    """One program per group of n values."""
    base = tl.program_id(0) * n
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + base + offs, mask=m, other=0.0)
    mean = tl.sum(x) / n
    var = tl.sum(x * x) / n - mean * mean              # cancels for nearly equal values: can be < -eps
    if RSQRT:
        r = tl.rsqrt(var + eps)
    else:
        r = 1.0 / tl.sqrt(var + eps)
    tl.store(y_ptr + base + offs, (x - mean) * r, mask=m)


@triton.jit
def norm_twopass(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr, RSQRT: tl.constexpr):
    base = tl.program_id(0) * n
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + base + offs, mask=m, other=0.0)
    mean = tl.sum(x) / n
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d) / n                              # a sum of squares: never negative
    if RSQRT:
        r = tl.rsqrt(var + eps)
    else:
        r = 1.0 / tl.sqrt(var + eps)
    tl.store(y_ptr + base + offs, d * r, mask=m)


def group_norm(kernel, x, eps=1e-5, rsqrt=True):
    """x [groups, n] -> normalised per group."""
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](x, y, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]), RSQRT=rsqrt)
    return y


# ---------------------------------------------------------------- rows: a tile wider than the rows owned


@triton.jit
def rows_overlap(x_ptr, y_ptr, T, D, BS: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    """Program p owns rows [p*BS, p*BS+BS) and computes y = 2x on a BT-row tile from its first row."""
    t = tl.program_id(0) * BS + tl.arange(0, BT)
    cols = tl.arange(0, BD)
    m = (t < T)[:, None] & (cols < D)[None, :]           # masked by T only: rows of the next programs too
    x = tl.load(x_ptr + t[:, None] * D + cols[None, :], mask=m, other=0.0)
    tl.store(y_ptr + t[:, None] * D + cols[None, :], 2 * x, mask=m)


@triton.jit
def rows_owned(x_ptr, y_ptr, T, D, BS: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    start = tl.program_id(0) * BS
    t = start + tl.arange(0, BT)
    cols = tl.arange(0, BD)
    m = ((t < T) & (t < start + BS))[:, None] & (cols < D)[None, :]     # only the rows this program owns
    x = tl.load(x_ptr + t[:, None] * D + cols[None, :], mask=m, other=0.0)
    tl.store(y_ptr + t[:, None] * D + cols[None, :], 2 * x, mask=m)


def rows_double(kernel, x, BS=1, BT=16):
    T, D = x.shape
    y = torch.empty_like(x)
    kernel[(triton.cdiv(T, BS),)](x, y, T, D, BS=BS, BT=BT, BD=triton.next_power_of_2(D))
    return y


# ---------------------------------------------------------------- triangle: inf stored, then overwritten


@triton.jit
def triangle_overwritten(g_ptr, a_ptr, BC: tl.constexpr):
    """a[i, j] = exp2(g[i] - g[j]) for j <= i, 0 above the diagonal; g decreases, so g[i] - g[j] > 0 above it."""
    i = tl.arange(0, BC)
    g = tl.load(g_ptr + i)
    for j in range(0, BC):
        gj = tl.load(g_ptr + j)
        tl.store(a_ptr + i * BC + j, tl.exp2(g - gj))        # every row: inf above the diagonal when large
    tl.debug_barrier()
    tl.store(a_ptr + i[:, None] * BC + i[None, :], tl.zeros((BC, BC), dtype=tl.float32),
             mask=i[:, None] < i[None, :])                   # the same program zeroes the upper triangle


@triton.jit
def triangle_half_zeroed(g_ptr, a_ptr, BC: tl.constexpr):
    """As triangle_overwritten, but the zeroing store misses the right half: those infs stay in memory."""
    i = tl.arange(0, BC)
    g = tl.load(g_ptr + i)
    for j in range(0, BC):
        gj = tl.load(g_ptr + j)
        tl.store(a_ptr + i * BC + j, tl.exp2(g - gj))
    tl.debug_barrier()
    tl.store(a_ptr + i[:, None] * BC + i[None, :], tl.zeros((BC, BC), dtype=tl.float32),
             mask=(i[:, None] < i[None, :]) & (i[None, :] < BC // 2))


def triangle(kernel, g):
    BC = g.shape[0]
    a = torch.empty(BC, BC, dtype=torch.float32)
    kernel[(1,)](g, a, BC=BC)
    return a


# ---------------------------------------------------------------- softcapped logsumexp over padded lanes


@triton.jit
def softcap_lse_padded(z_ptr, label_ptr, loss_ptr, lse_ptr, V, CAP: tl.constexpr, BLOCK: tl.constexpr):
    """One row of V logits per program: lse = logsumexp(cap * tanh(z / cap)), loss = lse - capped[label]."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < V
    z = tl.load(z_ptr + row * V + cols, mask=inside, other=-float("inf"))
    capped = CAP * libdevice.tanh(z / CAP)              # the lanes past V: CAP * tanh(-inf) = -CAP, not -inf
    top = tl.max(capped, 0)                             # unchanged: no capped real lane is below -CAP
    total = tl.sum(tl.exp(capped - top), 0)  # BUG
    lse = top + tl.log(total)
    label = tl.load(label_ptr + row)
    picked = CAP * libdevice.tanh(tl.load(z_ptr + row * V + label) / CAP)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def softcap_lse_remasked(z_ptr, label_ptr, loss_ptr, lse_ptr, V, CAP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    inside = cols < V
    z = tl.load(z_ptr + row * V + cols, mask=inside, other=-float("inf"))
    capped = tl.where(inside, CAP * libdevice.tanh(z / CAP), -float("inf"))    # the padding is -inf again
    top = tl.max(capped, 0)
    total = tl.sum(tl.exp(capped - top), 0)
    lse = top + tl.log(total)
    label = tl.load(label_ptr + row)
    picked = CAP * libdevice.tanh(tl.load(z_ptr + row * V + label) / CAP)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, lse - picked)


def softcap_cross_entropy(kernel, z, labels, cap=30.0):
    """z [rows, V] float32, labels [rows] int32 -> (loss [rows], lse [rows])."""
    rows, V = z.shape
    loss, lse = torch.empty(rows), torch.empty(rows)
    kernel[(rows,)](z, labels, loss, lse, V, CAP=cap, BLOCK=triton.next_power_of_2(V))
    return loss, lse


# ---------------------------------------------------------------- padding carried through each kind of op

PAD_OPS = ("abs", "erf", "rsqrt", "sqrt", "sqrt_rn", "div_rn", "fdiv", "exp2", "log", "cos", "ceil", "fma",
           "minimum", "maximum", "clamp", "sigmoid", "libdevice_tanh", "libdevice_pow", "join_split", "cat",
           "int_umulhi", "int_floordiv", "int_shift")

# tl.cat: Triton 3.6 supports only can_reorder=True, 3.9 deprecates it (its concatenation keeps the order)
CAT_REORDER = tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 9)


@triton.jit
def padded_through(x_ptr, out_ptr, n, OTHER: tl.constexpr, OP: tl.constexpr, BLOCK: tl.constexpr,
                   REORDER: tl.constexpr = CAT_REORDER):
    """out[0] = sum of OP(x) over a block of BLOCK lanes, n of them real (the rest padded with OTHER)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    y = x                                               # OP is a constexpr: one branch below runs
    if OP == "abs":
        y = tl.abs(x)
    if OP == "erf":
        y = tl.erf(x)
    if OP == "rsqrt":
        y = tl.rsqrt(x)
    if OP == "sqrt":
        y = tl.sqrt(x)
    if OP == "sqrt_rn":
        y = tl.sqrt_rn(x)
    if OP == "div_rn":
        y = tl.div_rn(x, tl.full((BLOCK,), 3.0, tl.float32))
    if OP == "fdiv":
        y = x / 3.0
    if OP == "exp2":
        y = tl.exp2(x)
    if OP == "log":
        y = tl.log(x)
    if OP == "cos":
        y = tl.cos(x)
    if OP == "ceil":
        y = tl.ceil(x)
    if OP == "fma":
        y = tl.fma(x, x, x)
    if OP == "minimum":
        y = tl.minimum(x, 2.0)
    if OP == "maximum":
        y = tl.maximum(x, 0.125)
    if OP == "clamp":
        y = tl.clamp(x, 0.0, 2.0)
    if OP == "sigmoid":
        y = tl.sigmoid(x)
    if OP == "libdevice_tanh":
        y = libdevice.tanh(x)
    if OP == "libdevice_pow":
        y = libdevice.pow(x, x)
    if OP == "join_split":
        a, b = tl.split(tl.join(x, 2.0 * x))
        y = a + b
    if OP == "cat":
        y = tl.cat(x, x, can_reorder=REORDER)
    if OP == "int_umulhi":
        y = tl.umulhi((x * 28.0).to(tl.int32), tl.full((BLOCK,), 1 << 30, tl.int32))
    if OP == "int_floordiv":
        y = (x * 28.0).to(tl.int32) // 2
    if OP == "int_shift":
        y = (x * 28.0).to(tl.int32) >> 1
    tl.store(out_ptr, tl.sum(y, 0))  # REDUCE


@triton.jit
def padded_max_tanh(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[0] = max of libdevice tanh(x) over n real lanes, padded with 0: tanh(0) = 0 beats a row of negatives."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.max(libdevice.tanh(x), 0))  # REDUCE


# ---------------------------------------------------------------- softcapped online logsumexp (several blocks)


@triton.jit
def online_lse_softcap_padded(z_ptr, lse_ptr, V, CAP: tl.constexpr, BLOCK: tl.constexpr):
    """lse[row] = logsumexp(cap * tanh(z[row] / cap)) by blocks of BLOCK, with a running max and sum."""
    row = tl.program_id(0).to(tl.int64)
    m = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(z_ptr + row * V + cols, mask=cols < V, other=-float("inf"))
        capped = CAP * libdevice.tanh(z / CAP)          # past V: CAP * tanh(-inf) = -CAP, a finite value
        m_new = tl.maximum(m, tl.max(capped, 0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(capped - m_new), 0)  # BUG
        m = m_new
    tl.store(lse_ptr + row, m + tl.log(d))


@triton.jit
def online_lse_softcap_remasked(z_ptr, lse_ptr, V, CAP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(z_ptr + row * V + cols, mask=cols < V, other=-float("inf"))
        capped = tl.where(cols < V, CAP * libdevice.tanh(z / CAP), -float("inf"))
        m_new = tl.maximum(m, tl.max(capped, 0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(capped - m_new), 0)
        m = m_new
    tl.store(lse_ptr + row, m + tl.log(d))


def online_softcap_lse(kernel, z, cap=30.0, block=256):
    """z [rows, V] float32 -> lse [rows]."""
    rows, V = z.shape
    lse = torch.empty(rows)
    kernel[(rows,)](z, lse, V, CAP=cap, BLOCK=block)
    return lse


# ---------------------------------------------------------------- row softmax: row * row_stride in int32


@triton.jit
def row_softmax_int32(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    """y[row] = softmax(x[row]) for int8 scores x; row = program id, the row starts at row * x_row_stride."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0).to(tl.float32)  # BUG
    x = tl.where(mask, x, -float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * y_row_stride + cols, e / tl.sum(e, 0), mask=mask)


@triton.jit
def row_softmax_int64(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0).to(tl.float32)
    x = tl.where(mask, x, -float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * y_row_stride + cols, e / tl.sum(e, 0), mask=mask)


def row_softmax(kernel, x):
    """x [rows, n_cols] int8 (any row stride) -> y [rows, n_cols] float32, contiguous."""
    rows, n = x.shape
    y = torch.zeros(rows, n)
    kernel[(rows,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
