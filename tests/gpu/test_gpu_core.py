"""GPU checks of the recording core: skipped on machines without CUDA (CI has none).

Run on the GPU machine with: python -m pytest -q tests/gpu
"""
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _scale(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


@triton.jit
def _scale_untraced(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


def test_core_imports_without_web_dependencies():
    import triton_trace  # noqa: F401
    assert "flask" not in sys.modules and "plotly" not in sys.modules


def test_traced_cuda_tensors_match_compiled_kernel():
    import triton_trace
    from triton.runtime.jit import JITFunction
    n = 5000
    x = torch.randn(n, device="cuda")
    out_gpu = torch.empty_like(x)
    _scale_untraced[(triton.cdiv(n, 256),)](x, out_gpu, n, 3.0, BLOCK=256)   # compiled before tracing

    kernel = triton_trace.trace(_scale)
    out_tr = torch.empty_like(x)
    kernel[(triton.cdiv(n, 256),)](x, out_tr, n, 3.0, BLOCK=256)
    torch.testing.assert_close(out_tr, out_gpu)
    launch = triton_trace.current_trace().launches[-1]
    assert launch.tensors[0].device.startswith("cuda")
    a = launch.accesses(program=(3, 0, 0), kind="load")[0]
    assert (a.offsets == 3 * 256 + torch.arange(256).numpy()).all()

    # Triton is left as it was: an untraced kernel still compiles and runs on the GPU afterwards.
    assert type(_scale_untraced).run is JITFunction.run and "run" not in vars(_scale_untraced)
    out2 = torch.empty_like(x)
    _scale_untraced[(triton.cdiv(n, 256),)](x, out2, n, 2.0, BLOCK=256)
    torch.cuda.synchronize()
    torch.testing.assert_close(out2, x * 2.0)
