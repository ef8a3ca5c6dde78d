"""A kernel with a planted out-of-bounds bug, and the report that finds it.

``stencil_kernel`` computes y[i] = x[i-1] + x[i] + x[i+1] but masks only ``offs < n``: the first
program reads x[-1] and the last reads x[n], one element outside each end of ``x``. On a GPU this
reads whatever lies next to the tensor, silently. Traced (``on_oob="skip"``, the default), every
out-of-bounds lane is recorded and skipped, so the process never touches foreign memory, and the
analysis reports each one with its program, source line and tensor. Finding the bug is the point:
the script prints the findings and exits 0. ``stencil_fixed`` is the corrected kernel; its report is
clean.

    python examples/out_of_bounds.py            # trace, print the findings, serve the UI at http://127.0.0.1:5001
    python examples/out_of_bounds.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace


@triton_trace.trace(outputs=("y_ptr",))
@triton.jit
def stencil_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n                                    # BUG: the neighbours need their own masks
    left = tl.load(x_ptr + offs - 1, mask=mask)        # reads x[-1] in program 0
    mid = tl.load(x_ptr + offs, mask=mask)
    right = tl.load(x_ptr + offs + 1, mask=mask)       # reads x[n] in the last program
    tl.store(y_ptr + offs, left + mid + right, mask=mask)


@triton_trace.trace(outputs=("y_ptr",))
@triton.jit
def stencil_fixed(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    left = tl.load(x_ptr + offs - 1, mask=mask & (offs >= 1), other=0.)
    mid = tl.load(x_ptr + offs, mask=mask)
    right = tl.load(x_ptr + offs + 1, mask=(offs + 1) < n, other=0.)
    tl.store(y_ptr + offs, left + mid + right, mask=mask)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("-n", type=int, default=1000, help="number of elements")
    args = ap.parse_args(argv)

    x = torch.randn(args.n)
    y = torch.empty_like(x)
    grid = (triton.cdiv(args.n, 128),)
    stencil_kernel[grid](x, y, args.n, BLOCK=128)      # runs to the end: bad lanes are skipped, not executed
    trace = triton_trace.current_trace()
    print(trace.summary())
    report = triton_trace.analyze(trace)
    print(report.summary())
    findings = report.to_dict()["findings"]
    print(f"\n{len(findings)} finding(s) in the buggy kernel, as data (report.to_dict()['findings']):")
    for f in findings:
        print(f"  {f['kind']}: program {f['program']}, line {f['line']}, tensor {f['tensor']}, "
              f"element offsets {f['offsets']}")

    triton_trace.reset()
    y2 = torch.empty_like(x)
    stencil_fixed[grid](x, y2, args.n, BLOCK=128)
    padded = torch.nn.functional.pad(x, (1, 1))
    torch.testing.assert_close(y2, padded[:-2] + padded[1:-1] + padded[2:])
    fixed = triton_trace.analyze(triton_trace.current_trace())
    print(f"\nthe fixed kernel: {len(fixed.to_dict()['findings'])} finding(s)")

    if not args.no_serve:
        triton_trace.launch(port=args.port, trace=trace)     # the buggy trace, to look at its findings


if __name__ == "__main__":
    main()
