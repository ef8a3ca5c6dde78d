"""Layer norm forward and backward (Triton tutorial 05), including the lock-based dW/dB reduction.

Three kernels, three launches:

- forward: one program per row; the column loops load the row three times (mean, variance, output).
- backward dX: one program per row computes dX, then adds its partial dW/dB into one of GROUP_SIZE_M
  buffers. Rows that share a buffer take turns through a spin lock (tl.atomic_cas on Lock) and a
  first-writer flag (Count): the trace shows the atomics, and the loads and stores of the partial
  buffers between them.
- backward dW/dB: sums the GROUP_SIZE_M partial rows per column block.

The results are checked against torch autograd.

    python examples/layer_norm.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/layer_norm.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace


@triton_trace.trace(outputs=("Y", "Mean", "Rstd"))
@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        tl.store(Y + cols, x_hat * w + b, mask=mask)


@triton_trace.trace(outputs=("DX",))
@triton.jit
def layer_norm_bwd_dx(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                      GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:    # take the group's lock
        pass
    count = tl.load(Count)
    if count == 0:                            # the first row of the group only writes
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)                   # release it


@triton_trace.trace(outputs=("FINAL_DW", "FINAL_DB"))
@triton.jit
def layer_norm_bwd_dwdb(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0), mask=cols < N)


def forward(x, w, b, eps=1e-5, block=32):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, dtype=torch.float32)
    rstd = torch.empty(M, dtype=torch.float32)
    layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, eps, BLOCK_SIZE=block)
    return y, mean, rstd


def backward(dy, x, w, mean, rstd, group_size_m=4, block_m=8, block_n=16):
    M, N = x.shape
    locks = torch.zeros(2 * group_size_m, dtype=torch.int32)    # a lock and a "written" flag per group
    partial_dw = torch.zeros((group_size_m, N), dtype=w.dtype)
    partial_db = torch.zeros((group_size_m, N), dtype=w.dtype)
    dw = torch.empty((N,), dtype=w.dtype)
    db = torch.empty((N,), dtype=w.dtype)
    dx = torch.empty_like(dy)
    layer_norm_bwd_dx[(M,)](dx, dy, partial_dw, partial_db, x, w, mean, rstd, locks, x.stride(0), N,
                            GROUP_SIZE_M=group_size_m, BLOCK_SIZE_N=triton.next_power_of_2(N))
    layer_norm_bwd_dwdb[lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_N"]),)](
        partial_dw, partial_db, dw, db, group_size_m, N, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n)
    return dx, dw, db


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("-M", type=int, default=32, help="rows")
    ap.add_argument("-N", type=int, default=80, help="columns")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    x = torch.randn(args.M, args.N)
    w, b = torch.rand(args.N) + 0.5, torch.randn(args.N)
    dy = torch.randn(args.M, args.N)
    y, mean, rstd = forward(x, w, b)
    dx, dw, db = backward(dy, x, w, mean, rstd)

    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    yr = torch.nn.functional.layer_norm(xr, (args.N,), wr, br, eps=1e-5)
    yr.backward(dy)
    for name, got, want in (("y", y, yr), ("dx", dx, xr.grad), ("dw", dw, wr.grad), ("db", db, br.grad)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, msg=f"{name} differs from torch")
    print("forward and backward match torch.nn.functional.layer_norm")

    trace = triton_trace.current_trace()
    print(trace.summary())
    dx_launch = trace.launches[1]
    kinds = sorted({a.kind for a in dx_launch.accesses(program=0)})
    print(f"backward dX, program 0 memory ops: {', '.join(kinds)}")
    report = triton_trace.analyze(trace)
    print(report.summary())
    if not args.no_serve:
        triton_trace.launch(port=args.port)


if __name__ == "__main__":
    main()
