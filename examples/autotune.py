"""An autotuned kernel: which config does the tracer run?

Timing Triton's interpreter on a CPU says nothing about which config a GPU would pick, so the tracer
never benchmarks. It runs the config the autotuner already chose for this key (for example after a GPU
run in the same process), else the first config left after the autotuner's pruning, unless you pin one
with ``@triton_trace.trace(config=...)``. ``launch.config`` records the config and why it was chosen.

Here ``scale_kernel`` is traced with the default choice, and ``scale_kernel_pinned`` (the same kernel
body under the same autotuner) with ``config={"BLOCK": 256}``. The grid is a lambda of the config, so
the two launches have different grids.

    python examples/autotune.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/autotune.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl

import triton_trace

CONFIGS = [
    triton.Config({"BLOCK": 64}, num_warps=2),
    triton.Config({"BLOCK": 128}, num_warps=4),
    triton.Config({"BLOCK": 256}, num_warps=8),
]


@triton_trace.trace(outputs=("out_ptr",))
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


@triton_trace.trace(outputs=("out_ptr",), config={"BLOCK": 256})
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def scale_kernel_pinned(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def scale(kernel, x, alpha):
    out = torch.empty_like(x)
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, alpha)   # BLOCK comes from the config
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("-n", type=int, default=3000, help="number of elements")
    args = ap.parse_args(argv)

    x = torch.randn(args.n)
    for kernel in (scale_kernel, scale_kernel_pinned):
        torch.testing.assert_close(scale(kernel, x, 0.5), 0.5 * x)

    trace = triton_trace.current_trace()
    print(trace.summary())
    for launch in trace.launches:
        cfg = launch.config
        print(f"{launch.kernel_name}: traced config {cfg['kwargs']} (num_warps={cfg.get('num_warps')}), "
              f"chosen by: {cfg['chosen_by']}; grid {launch.grid}")
    report = triton_trace.analyze(trace)
    print(report.summary())
    if not args.no_serve:
        triton_trace.launch(port=args.port)


if __name__ == "__main__":
    main()
