"""torch.compile through the tracer (triton_trace/suite/inductor.py): Inductor's Triton kernels, on CPU
tensors (``inductor_on_cpu``: ``cpu_backend="triton"``) and on CUDA tensors under ``cuda_on_cpu`` (CUDA
codegen for the redirect's GPU), compute what eager torch computes, and each launch is traced under
Inductor's kernel name with the generated source it ran, also after a save and load. One compile per case
and path, in module fixtures: Inductor's compile dominates the time."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import RequiresGPU, TritonTraceError
from triton_trace.suite import cuda_on_cpu, inductor, inductor_on_cpu


def _unsupported():
    problem = inductor.missing()
    return None if problem is None else str(problem)


pytestmark = pytest.mark.skipif(_unsupported() is not None,
                                reason=f"torch.compile is not traceable here: {_unsupported()}")


@triton.jit
def add_kernel(in_ptr0, in_ptr1, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(in_ptr0 + offsets, mask=mask) + tl.load(in_ptr1 + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


@triton.jit
def add_kernel_cuda(in_ptr0, in_ptr1, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # add_kernel under another name: Inductor copies a user kernel's body unchanged into each path's
    # generated file (test_one_body_in_two_files_keeps_each_source)
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    total = tl.load(in_ptr0 + offsets, mask=mask) + tl.load(in_ptr1 + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


def pointwise(x, y):
    return (x + y) * 2


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def user_kernel(x, y):
    """The seed recipe's "torch.compile with user-defined Triton kernels": an Inductor kernel (zeros_like)
    and the user's kernel in one graph."""
    out = torch.zeros_like(x)
    n = out.numel()
    kernel = add_kernel_cuda if x.is_cuda else add_kernel
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=64)
    return out


def _cases(device: str) -> list:
    # sizes differ per path, so no two kernels of the module share a body (test_one_body_in_two_files)
    n = 1000 if device == "cpu" else 1200
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)
    module = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU())
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    module = module.to(device)
    x = randn(n)
    return [("pointwise", pointwise, (x, randn(n))), ("softmax", softmax, (randn(16, n // 10),)),
            ("layer_norm", layer_norm, (randn(8, n // 10), randn(n // 10), randn(n // 10))),
            ("module", module, (randn(n // 100, 64),)), ("user_kernel", user_kernel, (x, randn(n)))]


def _run_cases(device: str) -> dict:
    runs = {}
    with torch.no_grad():        # under the redirect, inference only (test_training_is_refused)
        for name, fn, args in _cases(device):
            triton_trace.reset()
            out = torch.compile(fn, fullgraph=True)(*args)
            trace = triton_trace.current_trace()
            runs[name] = (out, fn(*args), trace)
    return runs


@pytest.fixture(scope="module")
def cpu_runs():
    with inductor_on_cpu():
        return _run_cases("cpu")


@pytest.fixture(scope="module")
def cuda_runs():
    if not torch.cuda._is_compiled() and isinstance(inductor._guard_library(), OSError):
        pytest.skip(f"CUDA codegen on a CPU-only torch needs a C++ compiler once: {inductor._guard_library()}")
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    run = CachingAutotuner.run
    with cuda_on_cpu(gpu="H100") as redirect:
        runs = _run_cases("cuda")
    runs["restored"] = CachingAutotuner.run is run
    runs["gpu"] = redirect.gpu
    return runs


def _stored_bytes(launch) -> int:
    return sum(int(np.count_nonzero(launch.access(i).mask)) * launch.access(i).elem_bytes
               for i in launch.rows(kind="store"))


CASES = ["pointwise", "softmax", "layer_norm", "module", "user_kernel"]


@pytest.mark.parametrize("case", CASES)
def test_cpu_values_match_eager(cpu_runs, case):
    out, ref, trace = cpu_runs[case]
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert trace.launches, "no Inductor kernel was traced"


@pytest.mark.parametrize("case", CASES)
def test_cuda_values_match_eager(cuda_runs, case):
    out, ref, trace = cuda_runs[case]
    assert out.is_cuda and out.device == torch.device("cuda", 0)
    torch.testing.assert_close(out.cpu(), ref.cpu(), rtol=1e-5, atol=1e-5)
    assert trace.launches, "no Inductor kernel was traced"


@pytest.mark.parametrize("runs", ["cpu_runs", "cuda_runs"])
def test_launches_carry_inductors_names_and_generated_source(runs, request):
    results = request.getfixturevalue(runs)
    launches = [launch for case in CASES for launch in results[case][2].launches]
    assert results["pointwise"][2].launches[0].kernel_name == "triton_poi_fused_add_mul_0"
    assert [launch.kernel_name for launch in results["user_kernel"][2].launches] == \
        ["triton_poi_fused_zeros_like_0", "add_kernel_cuda" if runs == "cuda_runs" else "add_kernel"]
    for launch in launches:
        assert launch.kernel_name.startswith(("triton_", "add_kernel")), launch.kernel_name
        # the generated module Inductor wrote, and the kernel's def at the recorded line
        assert os.path.isfile(launch.source_file) and launch.source_file != __file__
        lines = open(launch.source_file).read().splitlines()
        assert lines[launch.source_line - 1].startswith(f"def {launch.kernel_name}(")
        assert f"def {launch.kernel_name}(" in launch.source and "tl.store" in launch.source
        # every recorded op sits on a line of that source
        rows = launch.rows()
        files = {launch.files[f] for f in launch.ops["file"][rows]}
        assert files == {launch.source_file}
        first = launch.source_line - launch.source[:launch.source.index("def ")].count("\n")
        assert all(first <= n < first + len(launch.source.splitlines()) for n in launch.ops["line"][rows])
        assert launch.config["num_warps"] >= 1


@pytest.mark.parametrize("runs", ["cpu_runs", "cuda_runs"])
def test_stores_cover_the_output(runs, request):
    results = request.getfixturevalue(runs)
    for case in CASES:
        out, _, trace = results[case]
        assert _stored_bytes(trace.launches[-1]) == out.numel() * out.element_size(), case
    out, _, trace = results["pointwise"]
    (launch,) = trace.launches
    loads = sum(int(np.count_nonzero(launch.access(i).mask)) * 4 for i in launch.rows(kind="load"))
    assert loads == 2 * out.numel() * 4


def test_cuda_kernels_are_compiled_for_the_redirects_gpu(cuda_runs):
    gpu = cuda_runs["gpu"]
    source = cuda_runs["pointwise"][2].launches[0].source
    assert "DeviceProperties(type='cuda'" in source
    assert f"multi_processor_count={gpu.sms}," in source and f"cc={gpu.arch}," in source
    assert cuda_runs["restored"], "CachingAutotuner.run was not put back"


def test_a_saved_trace_keeps_names_and_source(cpu_runs, cuda_runs, tmp_path):
    launches = cpu_runs["softmax"][2].launches + cuda_runs["module"][2].launches
    path = tmp_path / "inductor.tt"
    triton_trace.Trace(tuple(launches)).save(path)
    back = triton_trace.load(path).launches
    assert [b.kernel_name for b in back] == [a.kernel_name for a in launches]
    for a, b in zip(launches, back):
        assert (b.source, b.source_file, b.source_line) == (a.source, a.source_file, a.source_line)
        assert _stored_bytes(b) == _stored_bytes(a)


def test_training_is_refused_under_the_redirect():
    if not torch.cuda._is_compiled() and isinstance(inductor._guard_library(), OSError):
        pytest.skip("needs the CUDA device guard (a C++ compiler)")
    with cuda_on_cpu():
        w = torch.randn(4, device="cuda", requires_grad=True)
        with pytest.raises(Exception) as caught:
            torch.compile(lambda x: (x * w).sum())(torch.randn(4, device="cuda"))
    cause = caught.value
    while cause is not None and not isinstance(cause, RequiresGPU):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, RequiresGPU) and "backward" in cause.what


def _in_device_of(x):
    # as fla's input_guard wraps every op: dynamo traces the context through its own bound functions
    with torch.cuda.device(x.device.index):
        return x.sin() * 2


def test_a_device_context_inside_a_compiled_function():
    with torch.no_grad(), cuda_on_cpu():
        triton_trace.reset()
        x = torch.randn(300, device="cuda")
        out = torch.compile(_in_device_of)(x)
        names = [launch.kernel_name for launch in triton_trace.current_trace().launches]
    assert out.is_cuda and torch.allclose(out.cpu(), x.cpu().sin() * 2)
    assert names == ["triton_poi_fused_mul_sin_0"]


LAZY = """
import sys, torch, triton_trace
from triton_trace.suite import cuda_on_cpu
assert "torch._dynamo" not in sys.modules
with cuda_on_cpu():
    x = torch.randn(300, device="cuda")
    out = torch.compile(lambda x: x.sin() * 2)(x)
    names = [launch.kernel_name for launch in triton_trace.current_trace().launches]
assert out.is_cuda and torch.allclose(out.cpu(), x.cpu().sin() * 2), out
print(names)
"""


def test_dynamo_loaded_by_the_first_compile_of_the_block():
    """Where dynamo is not loaded when the redirect starts (``pytest --tt-cuda``), the block's first
    torch.compile loads it with torch's own functions in place, then compiles for the GPU."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['triton_poi_fused_mul_sin_0']"


def test_a_moved_internal_is_named(monkeypatch):
    monkeypatch.setattr(inductor, "INTERNALS", inductor.INTERNALS + (("torch._inductor.runtime.triton_heuristics",
                                                                      "CachingAutotuner.no_such_method"),))
    with pytest.raises(TritonTraceError, match=r"CachingAutotuner\.no_such_method.*" + inductor.WRITTEN_AGAINST):
        with inductor_on_cpu():
            pass
    with cuda_on_cpu():
        with pytest.raises(TritonTraceError, match="no_such_method"):
            torch.compile(pointwise)


ONE_BODY = """
import triton
import triton.language as tl

{decorator}
@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
"""


def test_one_body_in_two_files_keeps_each_source(tmp_path):
    """Inductor writes one kernel body into several generated files (one per device, per metadata): the
    same function, line for line, with different decorators. Each launch shows its own file."""
    import importlib.util
    launched = []
    for i, decorator in enumerate(["# one", "# two"]):
        path = tmp_path / f"gen{i}.py"
        path.write_text(ONE_BODY.format(decorator=decorator))
        spec = importlib.util.spec_from_file_location(f"tt_gen{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        x, out = torch.arange(8.0), torch.zeros(8)
        with triton_trace.trace_all():
            module.copy_kernel[(1,)](x, out, BLOCK=8)
        launched.append((str(path), triton_trace.current_trace().launches[-1]))
    for path, launch in launched:
        assert launch.source_file == path


def test_bare_trace_all_with_the_cpu_triton_backend_names_inductor_on_cpu():
    """Without a GPU, Inductor's Triton backend asks Triton for a driver there is none of: the error says
    to compile inside ``triton_trace.inductor_on_cpu()`` instead of "0 active drivers"."""
    from triton_trace.errors import TraceUsageError
    torch.compiler.reset()
    with torch._inductor.config.patch(cpu_backend="triton"), pytest.raises(TraceUsageError, match="inductor_on_cpu"):
        with triton_trace.trace_all():
            torch.compile(lambda x: (x * 2 + 1).relu())(torch.randn(100))
    torch.compiler.reset()
