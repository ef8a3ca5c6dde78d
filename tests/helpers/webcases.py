"""Traces the web tests share: traced launches of tests/kernels, the index math to check them with, and
synthetic traces built directly as columnar arrays (a 4096-program launch through the interpreter would take
most of a minute, and the web app only reads the frozen Trace). Reading a page's canvases: helpers/web.py.
"""
from __future__ import annotations

import numpy as np
import torch
import triton

import kernels
from kernels.planted import make_shift
from triton_trace import trace
from triton_trace.model import KIND_CODE, MAX_RANK, Launch, TensorInfo, Trace, empty_ops


def traced_matmul(m=40, n=30, k=24, block=16, block_k=8, group_m=2, seed=0):
    """A traced blocked matmul (GROUP_M ordering) whose B is a transposed, non-contiguous view.
    Returns (a, b, c, launch arguments) for independent index math in the tests."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t()          # strides (1, k): not contiguous
    c = kernels.matmul(a, b, kernel=trace(kernels.make_matmul()), block_m=block, block_n=block, block_k=block_k,
                       group_m=group_m)
    return a, b, c, dict(M=m, N=n, K=k, BLOCK_M=block, BLOCK_N=block, BLOCK_K=block_k, GROUP_M=group_m)


def traced_shift(n=200, block=64):
    x = torch.arange(n, dtype=torch.float32)
    out = torch.empty(n)
    trace(make_shift())[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    return x, out


def matmul_program_tile(pid: int, M, N, K, BLOCK_M, BLOCK_N, GROUP_M, **_):
    """(pid_m, pid_n) of a linear program id under tutorial 03's grouped ordering, computed here in plain
    Python so the tests do not trust the kernel's own index math."""
    num_pid_m, num_pid_n = -(-M // BLOCK_M), -(-N // BLOCK_N)
    group = GROUP_M * num_pid_n
    first = (pid // group) * GROUP_M
    size = min(num_pid_m - first, GROUP_M)
    return first + (pid % group) % size, (pid % group) // size


def matmul_loaded_a(pid: int, args: dict) -> np.ndarray:
    """Boolean (M, K) mask of the elements of A that program ``pid`` loads."""
    pm, _ = matmul_program_tile(pid, **args)
    out = np.zeros((args["M"], args["K"]), dtype=bool)
    out[pm * args["BLOCK_M"]:(pm + 1) * args["BLOCK_M"], :] = True
    return out


def matmul_loaded_b(pid: int, args: dict) -> np.ndarray:
    """Boolean (K, N) mask of the elements of B that program ``pid`` loads."""
    _, pn = matmul_program_tile(pid, **args)
    out = np.zeros((args["K"], args["N"]), dtype=bool)
    out[:, pn * args["BLOCK_N"]:(pn + 1) * args["BLOCK_N"]] = True
    return out


SYNTH_SOURCE = '''@triton.jit
def tile_copy(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], x * 2, mask=mask)
'''


def synthetic_tiled(gx: int = 64, gy: int = 64, bm: int = 16, bn: int = 16, ragged: int = 5,
                    kernel_name: str = "tile_copy", source: str = SYNTH_SOURCE, names=("x_ptr", "y_ptr"),
                    file: str = "synthetic_tile_copy.py") -> Trace:
    """A launch of ``tile_copy`` over a (gx * bm, gy * bn - ragged) float32 matrix, one bm x bn tile per
    program: each program loads its tile of x (line 8) and stores twice it to y (line 9)."""
    M, N = gx * bm, gy * bn - ragged
    pm, pn = np.meshgrid(np.arange(gx), np.arange(gy), indexing="ij")
    pm, pn = pm.reshape(-1), pn.reshape(-1)
    P, L = len(pm), bm * bn
    rm = pm[:, None, None] * bm + np.arange(bm)[None, :, None]
    rn = pn[:, None, None] * bn + np.arange(bn)[None, None, :]
    off = (rm * N + rn).reshape(P, L).astype(np.int64)
    mask = ((rm < M) & (rn < N)).reshape(P, L)
    x = (np.arange(M * N, dtype=np.float32) % 97) / 10
    vals_x = np.where(mask, x[np.clip(off, 0, M * N - 1)], 0).astype(np.float32)
    ops = empty_ops(2 * P)
    ops["program"][:] = np.repeat(np.stack([pm, pn, np.zeros_like(pm)], axis=1), 2, axis=0)
    ops["seq"][:] = np.tile([0, 1], P)
    ops["kind"][:] = np.tile([KIND_CODE["load"], KIND_CODE["store"]], P)
    ops["file"][:] = 0
    ops["line"][:] = np.tile([8, 9], P)
    ops["tensor"][:] = np.tile([0, 1], P)
    ops["elem_bytes"][:] = 4
    ops["ndim"][:] = 2
    shape = np.zeros(MAX_RANK, dtype=np.int64)
    shape[:2] = (bm, bn)
    ops["shape"][:] = shape
    ops["lane_start"][:] = np.arange(2 * P) * L
    ops["lane_count"][:] = L
    ops["value_start"][:] = np.arange(2 * P) * L * 4
    ops["value_dtype"][:] = 0
    offsets = np.repeat(off, 2, axis=0).reshape(-1)
    masks = np.repeat(mask, 2, axis=0).reshape(-1)
    values = np.stack([vals_x, vals_x * 2], axis=1).reshape(-1).astype(np.float32).view(np.uint8)
    tensors = tuple(TensorInfo(nm, "float32", (M, N), (N, 1), 0, M * N, 4) for nm in names)
    launch = Launch.from_flat(kernel_name=kernel_name, source=source, source_file=file, source_line=2, grid=(gx, gy, 1),
                    args={"M": M, "N": N, "BM": bm, "BN": bn}, tensors=tensors, files=(file,),
                    value_dtypes=("<f4",), ops=ops, offsets=offsets, mask=masks, values=values,
                    recorded_programs=P)
    return Trace((launch,))


HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def hostile_trace() -> Trace:
    """A trace whose kernel name, source, file, tensor names and arguments try to run script in the page."""
    src = (SYNTH_SOURCE.replace("def tile_copy(", "def evil" + HOSTILE + "(") + "    # " + HOSTILE + "\n"
           + "    # </div><svg onload=\"window.__pwned = 3\">\n")
    t = synthetic_tiled(2, 2, 4, 4, ragged=1, kernel_name="evil" + HOSTILE, source=src,
                        names=("x" + HOSTILE, "<img src=x onerror=window.__pwned=4>"), file="/tmp/" + HOSTILE + ".py")
    lc = t.launches[0]
    from dataclasses import replace
    return Trace((replace(lc, args={"M<script>": "<img src=x onerror=window.__pwned=5>", **lc.args},
                          error="<img src=x onerror=window.__pwned=6>", completed=False),))


def synthetic_long(n_ops: int = 2500) -> Trace:
    """One program that loads x[i] once per loop iteration, ``n_ops`` times: more ops than one page."""
    ops = empty_ops(n_ops)
    ops["seq"][:] = np.arange(n_ops)
    ops["kind"][:] = KIND_CODE["load"]
    ops["line"][:] = 8
    ops["elem_bytes"][:] = 4
    ops["ndim"][:] = 1
    ops["shape"][:, 0] = 1
    ops["lane_start"][:] = np.arange(n_ops)
    ops["lane_count"][:] = 1
    ops["value_dtype"][:] = -1
    x = TensorInfo("x_ptr", "float32", (n_ops,), (1,), 0, n_ops, 4)
    launch = Launch.from_flat(kernel_name="long_loop", source=SYNTH_SOURCE, source_file="synthetic_tile_copy.py",
                    source_line=2, grid=(1, 1, 1), args={}, tensors=(x,), files=("synthetic_tile_copy.py",),
                    value_dtypes=(), ops=ops, offsets=np.arange(n_ops, dtype=np.int64),
                    mask=np.ones(n_ops, dtype=bool), values=np.zeros(0, np.uint8), recorded_programs=1)
    return Trace((launch,))
