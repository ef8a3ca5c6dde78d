"""Vector add: the smallest traced kernel. Shows the program grid, each program's loads and store, and the
masked tail of the last program.

    python examples/vector_add.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/vector_add.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace


@triton_trace.trace(outputs=("out_ptr",))
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("-n", type=int, default=10_000, help="number of elements")
    args = ap.parse_args(argv)

    x, y = torch.randn(args.n), torch.randn(args.n)
    out = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(args.n, meta["BLOCK"]),)](x, y, out, args.n, BLOCK=256)
    torch.testing.assert_close(out, x + y)

    trace = triton_trace.current_trace()
    print(trace.summary())
    launch = trace.launches[0]
    tail = launch.accesses(program=launch.grid[0] - 1, kind="store")[0]
    print(f"last program {tail.program} stores {int(tail.mask.sum())} of {tail.mask.size} lanes (the masked tail)")
    report = triton_trace.analyze(trace)
    print(report.summary())
    if not args.no_serve:
        triton_trace.launch(port=args.port)


if __name__ == "__main__":
    main()
