"""An unmodified user script: two Triton kernels, no triton_trace anywhere. Used by the CLI tests."""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


@triton.jit
def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    x = torch.arange(n, dtype=torch.float32)
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    scale_kernel[(triton.cdiv(n, 64),)](x, y, n, 2.0, BLOCK=64)
    shift_kernel[(triton.cdiv(n, 64),)](y, z, n, BLOCK=64)
    assert torch.equal(z, x * 2 + 1), "wrong result"
    print(f"plain_script ok n={n}")
    if "--fail" in sys.argv:
        raise RuntimeError("planted failure after the kernels ran")


if __name__ == "__main__":
    main()
