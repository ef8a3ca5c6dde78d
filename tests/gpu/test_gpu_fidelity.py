"""The GPU fidelity check (benchmarks/fidelity/fidelity.py) under pytest.

On a machine without CUDA (CI) the GPU tests are skipped, saying so, and what can be checked without a
GPU is: the script's --help, that every kernel of the suite and of examples/ has a comparison spec, and
the comparison machinery itself (poisoning, tolerances, tracing a differing element back to its store).
On the GPU machine: ``python -m pytest -q tests/gpu``.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIDELITY = os.path.join(ROOT, "benchmarks", "fidelity")    # the measurement scripts this file checks
sys.path.insert(0, FIDELITY)

import output_check as oc  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_ncu = pytest.mark.skipif(not torch.cuda.is_available() or shutil.which("ncu") is None,
                               reason="needs a CUDA GPU and Nsight Compute (ncu)")


def _run(*args, timeout=120):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, os.path.join(FIDELITY, "fidelity.py"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_help_works_without_a_gpu():
    r = _run("--help")
    assert r.returncode == 0 and "Nsight Compute" in r.stdout


def test_every_kernel_of_the_suite_and_the_examples_has_a_spec():
    import output_compare
    entries = output_compare.enumerate_kernels()
    assert not [e.label for e in entries if e.spec is None]
    labels = {e.label for e in entries}
    assert {"tests/kernels:make_add", "tests/kernels:make_matmul", "examples/vector_add.py:add_kernel",
            "examples/layer_norm.py:layer_norm_bwd_dx"} <= labels


def test_poisoned_outputs_show_unwritten_elements():
    with oc.poisoned_allocations():
        f, i = torch.empty(4), torch.empty(3, dtype=torch.int32)
    assert torch.isnan(f).all() and (i == oc.POISON_INT).all()
    assert torch.empty(1).dtype == torch.float32          # torch.empty is itself again
    c = oc.compare(torch.ones(4), f, oc.EXACT)
    assert c["unwritten_trace"] == 4 and c["bad_elements"] == 4


def test_tolerances_follow_the_operation():
    x = torch.randn(1000, dtype=torch.float64)
    exact = x.float()
    assert oc.compare(exact, exact.clone(), oc.EXACT)["bad_elements"] == 0
    one_ulp = torch.nextafter(exact, torch.full_like(exact, float("inf")))
    assert oc.compare(one_ulp, exact, oc.EXACT)["bad_elements"] == 1000
    assert oc.compare(one_ulp, exact, oc.ELEMENTWISE)["bad_elements"] == 0
    assert oc.compare(exact * (1 + 1e-3), exact, oc.reduction(1000))["bad_elements"] > 0
    a, b = torch.randn(64, 300), torch.randn(300, 32)
    ref = a.double() @ b.double()
    assert oc.compare(a @ b, a @ b, oc.dot(300), ref)["bad_elements"] == 0
    assert oc.compare((a @ b) * 1.001, a @ b, oc.dot(300), ref)["bad_elements"] > 0


def test_a_differing_element_is_traced_to_the_program_and_store_that_wrote_it():
    import kernels as K
    import triton_trace
    x, y = torch.randn(1000), torch.randn(1000)
    kernel, logs = triton_trace.trace(K.make_add()), []
    with oc.recording_args(kernel, logs):
        out = K.add(x, y, kernel=kernel, block=128)
    gpu = out.clone()
    gpu[517] += 1
    c = oc.compare(gpu, out, oc.EXACT)
    assert c["bad_elements"] == 1
    (w,) = oc.who_wrote(list(triton_trace.current_trace().launches), logs, out,
                        np.flatnonzero(c["bad"].numpy()))
    assert (w["index"], w["program"], w["op"], w["tensor"]) == (517, [4, 0, 0], "store", "out_ptr")
    import inspect
    lines, first = inspect.getsourcelines(K.add_kernel)
    store = first + next(k for k, text in enumerate(lines) if "tl.store" in text)
    assert w["line"].endswith(":" + str(store))


@needs_gpu
@pytest.mark.gpu
@pytest.mark.slow
def test_every_kernel_agrees_with_its_trace_on_the_gpu(tmp_path):
    r = _run("--no-metrics", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


@needs_ncu
@pytest.mark.gpu
@pytest.mark.slow
def test_memory_metrics_of_a_vector_add_match_nsight_compute(tmp_path):
    r = _run("--no-outputs", "--cases", "add_4M", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| add_4M |")]
    assert rows and all("| yes |" in ln for ln in rows if "sectors" in ln or "requests" in ln), rows
