"""torch.compile as GPU suites use it: a function and a module compiled on CUDA tensors, compared with eager.
Under ``pytest --tt-cuda`` Inductor writes its CUDA Triton kernels for the chosen GPU and each one runs on
the CPU, traced under Inductor's kernel name (inference: a compiled backward needs a real GPU)."""
import torch
import torch.nn.functional as F


def gelu_residual(x, y):
    return F.gelu(x) + 0.5 * y


def test_compiled_function_runs_inductors_kernels():
    x = torch.randn(64, 96, device="cuda")
    y = torch.randn(64, 96, device="cuda")
    out = torch.compile(gelu_residual)(x, y)
    torch.cuda.synchronize()
    assert out.is_cuda and out.shape == x.shape
    torch.testing.assert_close(out, gelu_residual(x, y))


def test_compiled_module_for_inference():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.LayerNorm(48), torch.nn.GELU()).cuda().eval()
    x = torch.randn(16, 64, device="cuda")
    with torch.no_grad():
        out = torch.compile(model)(x)
        ref = model(x)
    assert out.is_cuda
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
