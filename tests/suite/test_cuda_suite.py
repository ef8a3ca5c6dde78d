"""``pytest --tt-cuda`` (triton_trace/pytest_plugin.py with triton_trace/suite) on a suite written for the
GPU (tests/cuda_suite: device="cuda" factories, .cuda(), synchronize, a persistent grid from the SM count,
an autotuned kernel pruned by the device, do_bench, a conftest that reads the device at import, torch.compile
on CUDA tensors, F.scaled_dot_product_attention reaching a library's flash kernel), run unchanged on the CPU in
child processes; and ``triton-trace pytest``
(triton_trace/suite/command.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.paths import TESTS
from helpers.suites import outcomes, run_suite

SUITE = os.path.join(TESTS, "cuda_suite")

EXPECTED = {
    "test_add[1]": "passed", "test_add[1000]": "passed", "test_add[4099]": "passed",
    "test_add_moved_with_cuda_and_to": "passed",
    "test_persistent_grid_uses_the_sm_count": "passed",
    "test_autotuned_softmax_pruned_by_the_device": "passed",
    "test_capability_read_at_import": "passed",
    "test_benchmark_style": "passed",
    "test_streams_events_and_memory": "passed",
    "test_seeded_inputs_repeat": "passed",
    "test_autocast_casts_the_matmul": "passed",
    "test_torch_only_is_hollow": "passed",
    "test_memory_stats_are_answered": "passed",
    "test_shift_reads_past_the_end": "failed",               # out_of_bounds, at its line
    "test_accumulate_into_empty_reads_garbage": "failed",    # uninitialized_read of a poisoned torch.empty
    "test_accumulate_into_zeros_is_fine": "passed",
    "test_compiled_function_runs_inductors_kernels": "passed",     # torch.compile: Inductor's CUDA kernels
    "test_compiled_module_for_inference": "passed",
    "test_inline_ptx_runs_traced": "passed",                 # ex2.approx.f32 in tl.inline_asm_elementwise
    "test_sdpa_runs_the_library_s_flash_kernel[False]": "passed",     # F.sdpa reaches the library's CUDA
    "test_sdpa_runs_the_library_s_flash_kernel[True]": "passed",      # registration (suite/attention.py)
}          # and test_cuda_graph_needs_a_gpu: skipped, "requires a GPU: ..."


def test_the_gpu_suite_runs_on_the_cpu_with_its_bugs_found():
    r = run_suite("--tt-cuda", cwd=SUITE)
    assert outcomes(r.stdout) == EXPECTED, r.stdout[-4000:]
    out = r.stdout
    assert "CUDA on the CPU: answering as NVIDIA H200 (H200: sm_90, 132 SMs" in out
    assert "18 test(s) launched 19 traced kernel launch(es); 2 failed on findings" in out
    assert "out_of_bounds in 'shift_kernel'" in out and "kernels.py:69" in out          # the buggy line
    assert "uninitialized_read in 'accumulate_kernel'" in out and "kernels.py:76" in out
    assert "never-written torch.empty result 'out_ptr'" in out
    assert "3 passed test(s) launched no Triton kernel (hollow" in out
    assert "test_ops.py::test_torch_only_is_hollow" in out
    assert "1 test(s) skipped, requires a GPU: CUDA graphs (torch.cuda.CUDAGraph) (1)" in out
    assert "SKIPPED [1] test_ops.py:96: requires a GPU: CUDA graphs" in out           # at the test's line
    assert "1 triton.testing.do_bench call(s) answered with a predicted time" in out
    assert "1 skipped" in out and "2 failed" in out


def test_the_gpu_is_chosen_and_a_path_after_the_flag_stays_a_path():
    r = run_suite("--tt-cuda=a100", "-k", "capability or persistent", cwd=SUITE)
    assert "answering as NVIDIA A100-SXM4-80GB (A100: sm_80, 108 SMs" in r.stdout, r.stdout[-3000:]
    assert r.returncode == 0
    r = run_suite("--tt-cuda", "test_bugs.py", cwd=SUITE)     # argparse takes the path for the GPU: given back
    assert outcomes(r.stdout) == {k: v for k, v in EXPECTED.items() if "accumulate" in k or "shift" in k}
    bad = run_suite("--tt-cuda=B9000", "-k", "hollow", cwd=SUITE)
    assert bad.returncode == 4 and "unknown GPU 'B9000'" in bad.stderr


def test_findings_warn_and_off():
    warn = run_suite("--tt-cuda", "--tt-findings=warn", "test_bugs.py", cwd=SUITE)
    assert warn.returncode == 0, warn.stdout[-3000:]
    assert "2 test(s) had findings (--tt-findings=warn: warned, not failed)" in warn.stdout
    assert "out_of_bounds in 'shift_kernel'" in warn.stdout          # in the warnings summary
    off = run_suite("--tt-cuda", "--tt-findings=off", "test_bugs.py", cwd=SUITE)
    assert off.returncode == 0 and "3 test(s) launched 3 traced kernel launch(es); 0 failed" in off.stdout


def test_poison_can_be_turned_off():
    """Without poison the empty buffer holds whatever the allocator left (NaN now and then): no
    uninitialised read is found, whatever else the garbage does."""
    r = run_suite("--tt-cuda", "--tt-poison=off", "-k", "accumulate", cwd=SUITE)
    assert "answering as NVIDIA H200" in r.stdout and "torch.empty poisoned" not in r.stdout, r.stdout[-3000:]
    assert "uninitialized_read" not in r.stdout
    assert outcomes(r.stdout)["test_accumulate_into_zeros_is_fine"] == "passed"


def test_torch_compile_runs_inductors_kernels_traced_and_saved(tmp_path):
    """tests/cuda_suite/test_compile.py: each compiled test launched Inductor's kernels (not hollow), traced
    under Inductor's names with the generated source, and --tt-save=all keeps them for triton-trace view."""
    r = run_suite("--tt-cuda", f"--triton-trace-dir={tmp_path}", "--tt-save=all", "test_compile.py", cwd=SUITE)
    assert outcomes(r.stdout) == {k: v for k, v in EXPECTED.items() if "compiled" in k}, r.stdout[-4000:]
    assert "2 test(s) launched 2 traced kernel launch(es); 0 failed on findings" in r.stdout
    assert "hollow" not in r.stdout and f"2 test(s) saved a trace and its findings in {tmp_path}" in r.stdout
    import triton_trace
    for name in ("test_compiled_function_runs_inductors_kernels", "test_compiled_module_for_inference"):
        trace = triton_trace.load(tmp_path / f"test_compile.py_{name}.ttrace")
        assert (tmp_path / f"test_compile.py_{name}.findings.json").is_file()
        for launch in trace.launches:
            assert launch.kernel_name.startswith("triton_"), launch.kernel_name
            assert f"def {launch.kernel_name}(" in launch.source and os.path.isfile(launch.source_file)
            assert "DeviceProperties(type='cuda'" in launch.source            # CUDA codegen for the H200
    names = [la.kernel_name for la in triton_trace.load(
        tmp_path / "test_compile.py_test_compiled_function_runs_inductors_kernels.ttrace").launches]
    assert names == ["triton_poi_fused_add_gelu_mul_0"], names


@pytest.mark.slow
def test_under_xdist_one_summary_from_the_workers():
    r = run_suite("--tt-cuda", "-n", "2", cwd=SUITE)
    assert outcomes(r.stdout) == EXPECTED, r.stdout[-4000:]
    assert r.stdout.count("= triton_trace =") == 1
    assert "18 test(s) launched 19 traced kernel launch(es); 2 failed on findings" in r.stdout
    assert "3 passed test(s) launched no Triton kernel (hollow" in r.stdout


def test_the_triton_trace_pytest_command():
    code = "import sys; from triton_trace.suite.command import main; sys.exit(main(sys.argv[1:]))"
    base = [sys.executable, "-c", code]
    r = subprocess.run(base + ["--gpu", "H100", "-p", "no:cacheprovider", f"--rootdir={SUITE}",
                               f"--confcutdir={SUITE}", "-rA", "test_bugs.py"],
                       cwd=SUITE, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:]          # the two planted bugs fail
    assert "answering as NVIDIA H100 80GB HBM3 (H100: sm_90, 132 SMs" in r.stdout
    assert outcomes(r.stdout)["test_accumulate_into_zeros_is_fine"] == "passed"
    usage = subprocess.run(base + ["--help"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0 and "triton-trace pytest [--gpu GPU]" in usage.stdout
