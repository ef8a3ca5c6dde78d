"""Blocked matmul (Triton tutorial 03) with and without GROUP_M program reordering, and what it does to L2.

The same kernel is launched twice on the same matrices: GROUP_M=1 walks the output tiles row by row,
so consecutive programs share a row of A but each needs a different column of B; GROUP_M=4 walks them
in groups of 4 tile-rows, so the programs running at the same time share both rows of A and columns of
B. Both launches load exactly the same bytes; the analysis' L2 simulation (programs run in the GPU's
dispatch order, several at a time, through an LRU cache) predicts how many of them reach DRAM
(``dram_bytes_predicted``). The matrices here are small, so the simulated L2 is shrunk to match
(``--l2-kib``), to show at CPU-traceable sizes what happens at real sizes.

    python examples/matmul_grouped.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/matmul_grouped.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis.units import change, nbytes, percent


@triton_trace.trace(outputs=("c_ptr",))
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # programs are numbered down a group of GROUP_M tile-rows, then across; GROUP_M=1 is plain row order
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, group_m, block=16):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=torch.float32)
    grid = (triton.cdiv(M, block) * triton.cdiv(N, block),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=block, BLOCK_N=block, BLOCK_K=block, GROUP_M=group_m)
    return c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("--size", type=int, default=96, help="M = N = K")
    ap.add_argument("--l2-kib", type=int, default=16, help="simulated L2 size in KiB")
    ap.add_argument("--in-flight", type=int, default=8, help="programs the simulated GPU runs at once")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    a, b = torch.randn(args.size, args.size), torch.randn(args.size, args.size)
    for group_m in (1, 4):
        torch.testing.assert_close(matmul(a, b, group_m), a @ b, atol=1e-3, rtol=1e-3)

    trace = triton_trace.current_trace()
    print(trace.summary())
    # the page must show what this printout says: the same simulated L2 (the server's default is the GPU's
    # real L2, which holds these small matrices whole, so GROUP_M would change nothing there)
    # what_if=True replays GROUP_M 1, 4, 8 and 16: the row-order launch gets the hint "GROUP_M=4 instead of 1"
    options = {"l2_bytes": args.l2_kib * 1024, "programs_in_flight": args.in_flight, "what_if": True}
    report = triton_trace.analyze(trace, **options)
    print(report.summary())
    print(f"\nL2 traffic (simulated L2 of {nbytes(args.l2_kib * 1024)}, {args.in_flight} programs in flight):")
    dram = {}
    for launch, entry in zip(trace.launches, report.to_dict()["launches"]):
        m = entry["metrics"]
        dram[launch.args["GROUP_M"]] = m["dram_bytes_predicted"]
        print(f"  GROUP_M={launch.args['GROUP_M']}: loads {nbytes(m['load_bytes'])}, "
              f"predicted DRAM traffic {nbytes(m['dram_bytes_predicted'])}")
    print(f"GROUP_M=4 moves {percent(1 - dram[4] / dram[1])} fewer bytes between L2 and DRAM than GROUP_M=1 "
          f"({change(dram[1], dram[4])})")
    if not args.no_serve:
        triton_trace.launch(port=args.port, analysis=options)


if __name__ == "__main__":
    main()
