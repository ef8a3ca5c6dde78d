"""Predicted (trace + analysis on the CPU interpreter) against measured (Nsight Compute on the GPU).

Run on the GPU machine from the repo root:

    python tests/gpu/fidelity.py --out results.json

For every case it traces the kernel through the interpreter, analyses the trace, then runs the same kernel
compiled for the GPU in a child process under ``ncu --clock-control none`` and reads the global-memory
sector counts and DRAM bytes. The table it prints (and the JSON it writes) is what tests/gpu/RESULTS.md
records.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import time

import torch
import triton
import triton.language as tl

NCU_METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
]


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def stride2_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + 2 * offs, mask=m), mask=m)


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, sxm, sxn, som, son, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=m)
    # transposed store: out[n, m] = x[m, n]
    tl.store(out_ptr + rn[None, :] * som + rm[:, None] * son, tile, mask=m)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    in_group = GROUP_M * num_n
    group = pid // in_group
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc)


def case_args(name, device):
    """(kernel, grid, args, kwargs) of each case, on ``device``."""
    g = torch.Generator().manual_seed(0)
    if name == "add":
        n = 1 << 22
        x, y = torch.randn(n, generator=g).to(device), torch.randn(n, generator=g).to(device)
        return add_kernel, (triton.cdiv(n, 1024),), (x, y, torch.empty_like(x), n), {"BLOCK": 1024}
    if name == "stride2":
        n = 1 << 21
        x = torch.randn(2 * n, generator=g).to(device)
        return stride2_kernel, (triton.cdiv(n, 1024),), (x, torch.empty(n, device=device), n), {"BLOCK": 1024}
    if name == "transpose":
        M = N = 4096
        x = torch.randn(M, N, generator=g).to(device)
        out = torch.empty(N, M, device=device)
        return (transpose_kernel, (M // 64, N // 64),
                (x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1)), {"BM": 64, "BN": 64})
    if name.startswith("matmul"):
        group = int(name.split("_g")[1])
        M = N = 2048
        K = 2048
        a, b = torch.randn(M, K, generator=g).to(device), torch.randn(K, N, generator=g).to(device)
        c = torch.empty(M, N, device=device)
        BM = BN = 128
        return (matmul_kernel, (triton.cdiv(M, BM) * triton.cdiv(N, BN),),
                (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
                {"BM": BM, "BN": BN, "BK": 32, "GROUP_M": group})
    raise KeyError(name)


CASES = ["add", "stride2", "transpose", "matmul_g1", "matmul_g8"]


def gpu_child(name):
    """Launch once to compile, once to be profiled (ncu --launch-skip 1)."""
    kernel, grid, args, kwargs = case_args(name, "cuda")
    for _ in range(2):
        kernel[grid](*args, num_warps=4, **kwargs)
    torch.cuda.synchronize()


def measure(name):
    cmd = ["ncu", "--clock-control", "none", "--launch-skip", "1", "--launch-count", "1", "--csv",
           "--metrics", ",".join(NCU_METRICS), sys.executable, __file__, "--child", name]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows = [row for row in csv.reader(io.StringIO(r.stdout)) if len(row) > 5]
    if not rows:
        return {"error": (r.stdout + r.stderr)[-2000:]}
    header, out = rows[0], {}
    for row in rows[1:]:
        rec = dict(zip(header, row))
        out[rec["Metric Name"]] = float(rec["Metric Value"].replace(",", ""))
    return out


def predict(name):
    import triton_trace
    triton_trace.reset()
    kernel, grid, args, kwargs = case_args(name, "cpu")
    t0 = time.perf_counter()
    triton_trace.trace(kernel, values=False)[grid](*args, **kwargs)
    t1 = time.perf_counter()
    report = triton_trace.analyze(triton_trace.current_trace(), gpu="H200", num_warps=4)
    t2 = time.perf_counter()
    m = report.to_dict()["launches"][0]["metrics"]
    keys = ["load_sectors", "store_sectors", "load_requests", "store_requests", "dram_read_bytes",
            "dram_write_bytes", "dram_write_bytes_evicted", "dram_bytes_predicted"]
    return {k: m[k] for k in keys} | {"trace_s": round(t1 - t0, 2), "analyze_s": round(t2 - t1, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--out", default="fidelity.json")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    if a.child:
        return gpu_child(a.child)
    results = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__, "cases": {}}
    for name in a.cases.split(","):
        pred = predict(name)
        meas = measure(name)
        results["cases"][name] = {"predicted": pred, "measured": meas}
        print(name, json.dumps(results["cases"][name], sort_keys=True), flush=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
