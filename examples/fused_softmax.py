"""Fused softmax (Triton tutorial 02): one program per row, the whole row in one block.

Shows a kernel whose rows are narrower than its block: every program masks off the tail of its block
(the grid coloured by "masked-lane share" is uniform), reads its row through an explicit row stride,
and reduces it with tl.max and tl.sum. The input here is a padded view (each 100-element row sits in a
128-element storage row), so the tensor view shows the rows with the padding columns never touched.

    python examples/fused_softmax.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/fused_softmax.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace


@triton_trace.trace(outputs=("out_ptr",))
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # masked lanes read -inf, so they do not change the max and add exp(-inf) = 0 to the sum
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    assert x.stride(1) == 1, "rows must be contiguous"
    out = torch.empty(rows, cols, dtype=x.dtype)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--cols", type=int, default=100)
    args = ap.parse_args(argv)

    storage = torch.randn(args.rows, 128)
    x = storage[:, :args.cols]            # a padded view: row stride 128, not args.cols
    y = softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))

    trace = triton_trace.current_trace()
    print(trace.summary())
    launch = trace.launches[0]
    first = launch.accesses(program=0, kind="load")[0]
    print(f"program 0 loads {int(first.mask.sum())} of {first.mask.size} lanes "
          f"(block {first.mask.size} for a row of {args.cols}); row stride {x.stride(0)}")
    report = triton_trace.analyze(trace)
    print(report.summary())
    if not args.no_serve:
        triton_trace.launch(port=args.port)


if __name__ == "__main__":
    main()
