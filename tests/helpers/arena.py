"""What the arena's tests share (tests/record/test_arena.py, also in the child processes it starts): numpy's
allocator of the moment, a launch that allocates much, and whether an array's memory has huge-page advice."""
import numpy as np
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.native import arena


def numpy_handler() -> str:
    return arena._numpy_modules()[1].get_handler_name()


@triton.jit
def _acc_kernel(a_ptr, b_ptr, out_ptr, K, M: tl.constexpr, BK: tl.constexpr, N: tl.constexpr):
    pid = tl.program_id(0)
    rm, rk, rn = tl.arange(0, M), tl.arange(0, BK), tl.arange(0, N)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + pid * M * K + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    acc = tl.where(acc > 0, acc, acc * 0.5)
    tl.store(out_ptr + pid * M * N + rm[:, None] * N + rn[None, :], tl.exp(acc * 1e-2))


def run_acc(P=64, M=64, K=256, BK=64, N=64):
    torch.manual_seed(0)
    a, b = torch.randn(P * M, K).half(), torch.randn(K, N).half()
    out = torch.empty(P * M, N)
    triton_trace.trace(_acc_kernel)[(P,)](a, b, out, K, M, BK, N)
    return out


def numpy_advises() -> bool:
    setter = arena._madvise_setter()
    before = setter(True)
    setter(before)
    return bool(before)


def advised_huge(a: np.ndarray) -> bool:
    """Whether the kernel holds huge-page advice ("hg" in VmFlags) for the mapping under the middle of a's
    data (numpy advises from the first whole page on)."""
    addr, flags, inside = a.ctypes.data + a.nbytes // 2, "", False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                flags = line.split()[1:]
    return "hg" in flags
