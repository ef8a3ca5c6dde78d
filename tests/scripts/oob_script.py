"""An unmodified script whose kernel has no mask: the last program reads and writes past the end."""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_nomask(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


x = torch.randn(100)
out = torch.empty(100)
copy_nomask[(2,)](x, out, 100, BLOCK=64)
print("oob_script done")
