"""A Triton kernel behind a PyTorch custom op: torch.library.triton_op + wrap_triton, with autograd.

``mylib::mul`` is defined with ``triton_op``: its body launches ``mul_kernel`` through ``wrap_triton``,
which is what lets torch.compile see into the kernel. ``register_autograd`` gives it a backward formula
(which calls the op again), and ``register_kernel("cpu")`` a plain-torch CPU fallback.

Two paths, both on CPU tensors and both in eager mode:

1. A plain call on CPU tensors takes the CPU fallback: no Triton kernel runs, nothing is traced.
2. Inside ``mul.set_kernel_enabled("cpu", False)`` the fallback is switched off, so the op runs its
   triton_op body: ``mul_kernel`` goes through the tracer (Triton's interpreter) on the CPU tensors.
   The forward and both backward products are traced: three launches of ``mul_kernel``.

The backward receives the incoming gradient as an expanded (stride 0) tensor when the loss is a
``sum()``; the kernel indexes its inputs as contiguous, so the op makes them contiguous first. Leave
that out and the trace shows the kernel reading past the one-element storage of the gradient.

    python examples/torch_custom_op.py            # trace, print the report, serve the UI at http://127.0.0.1:5001
    python examples/torch_custom_op.py --no-serve # trace and print only
"""
import argparse

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

import triton_trace


@triton_trace.trace(outputs=("out_ptr",))
@triton.jit
def mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton_op("mylib::mul", mutates_args={})
def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(mul_kernel)[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)
    return out


@mul.register_kernel("cpu")
def _mul_cpu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * y          # the CPU fallback: plain torch, no Triton


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, y = ctx.saved_tensors
    return mul(grad, y), mul(grad, x)     # d(x*y)/dx = y, d(x*y)/dy = x, through the op itself


mul.register_autograd(_backward, setup_context=_setup_context)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-serve", action="store_true", help="do not start the web UI")
    ap.add_argument("--port", type=int, default=None, help="port for the web UI (default 5001 or the next free)")
    ap.add_argument("-n", type=int, default=1000, help="number of elements")
    args = ap.parse_args(argv)

    x = torch.randn(args.n, requires_grad=True)
    y = torch.randn(args.n, requires_grad=True)

    # 1. CPU fallback: registered with register_kernel("cpu"), used for CPU tensors
    out = mul(x, y)
    out.sum().backward()
    torch.testing.assert_close(out, x * y)
    print(f"path 1, CPU fallback: {len(triton_trace.current_trace().launches)} Triton launches traced")

    # 2. the Triton kernel, traced: the fallback is switched off, so the triton_op body runs
    x.grad = y.grad = None
    with mul.set_kernel_enabled("cpu", False):
        out = mul(x, y)
        out.sum().backward()
    torch.testing.assert_close(out, x * y)
    torch.testing.assert_close(x.grad, y.detach())
    torch.testing.assert_close(y.grad, x.detach())
    trace = triton_trace.current_trace()
    print(f"path 2, Triton through wrap_triton: {len(trace.launches)} launches traced "
          f"(forward, then the two backward products)")

    print(trace.summary())
    report = triton_trace.analyze(trace)
    print(report.summary())
    if not args.no_serve:
        triton_trace.launch(port=args.port)


if __name__ == "__main__":
    main()
