"""``pytest --tt-cuda`` on what GPU suites bring that a CPU cannot run (tests/cuda_suite_bad, run in child
processes): a test file or a folder's conftest that imports a CUDA extension or a module linked to CUDA's
libraries is skipped, "requires a GPU: ...", and the run goes on (collection errors would stop it); so are
tests that meet inline assembly (in a helper, in a fixture), build a CUDA extension or ask for the caching
allocator's history. The allocator's statistics, ``torch.version.cuda``, a loop variable's ``.to`` and a
bfloat16 output are answered. Ctrl-C, raised or a real SIGINT, keeps the traces: those of the failing tests
that finished, and the interrupted test's launches so far, and the summary names them."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import triton_trace
from helpers.paths import TESTS
from helpers.procs import popen_with_sigint
from helpers.suites import outcomes, run_suite

SUITE = os.path.join(TESTS, "cuda_suite_bad")

PASSED = {"test_memory_stats_mem_get_info_summary_and_peaks", "test_torch_version_cuda",
          "test_loop_variable_to_int64", "test_bf16_output_in_range", "test_bf16_output_overflows",
          "test_a_minus_inf_input_on_purpose_does_not_fail"}
EXTENSION = "requires a GPU: a CUDA extension (torch.utils.cpp_extension.load of 'tt_bad_suite_scale' from scale.cu)"
SKIPPED = [
    f"needs_ext/conftest.py:2: {EXTENSION}",
    f"test_cuda_extension.py:4: {EXTENSION}",
    "test_libcuda.py:2: requires a GPU: a module built for CUDA (OSError: libcuda.so.1: cannot open shared "
    "object file: No such file or directory)",
    "test_gpu_only.py:8: requires a GPU: inline assembly (tl.inline_asm_elementwise in kernel "
    "'warp_swap_kernel' at ",
    "test_gpu_only.py:13: requires a GPU: inline assembly (tl.inline_asm_elementwise in kernel "
    "'warp_swap_kernel' at ",
    "test_gpu_only.py:17: requires a GPU: a module built for CUDA (ImportError: libcudart.so.12: cannot open "
    "shared object file: No such file or directory)",
    "test_gpu_only.py:22: requires a GPU: a CUDA extension (torch.utils.cpp_extension.load_inline of "
    "'tt_bad_inline' from cuda_sources)",
    "test_gpu_only.py:26: requires a GPU: torch.cuda.memory._record_memory_history",
]


def _skipped(stdout: str) -> list:
    return [line.split("] ", 1)[1] for line in stdout.splitlines() if line.startswith("SKIPPED [1] ")]


def test_what_needs_a_gpu_is_skipped_and_the_rest_answered(tmp_path):
    # nothing may be built: a CUDA extension's build directory would appear here
    r = run_suite("--tt-cuda", cwd=SUITE, env={"TORCH_EXTENSIONS_DIR": str(tmp_path)})
    assert outcomes(r.stdout) == dict.fromkeys(PASSED, "passed"), r.stdout[-4000:]
    skipped = _skipped(r.stdout)
    assert len(skipped) == len(SKIPPED) and all(s.startswith(e) for s, e in zip(skipped, SKIPPED)), skipped
    assert r.returncode == 0 and "6 passed, 8 skipped" in r.stdout
    assert "error" not in r.stdout.splitlines()[-1]         # no collection error stopped the run
    assert "8 test(s) skipped, requires a GPU: " in r.stdout and "inline assembly" in r.stdout
    assert "4 test(s) launched 4 traced kernel launch(es); 0 failed on findings" in r.stdout
    assert not list(tmp_path.iterdir())


def test_collection_errors_without_the_redirect_are_left_to_pytest():
    """Without --tt-cuda the plugin changes nothing: the import error is pytest's own collection error."""
    r = run_suite("--triton-trace", "test_libcuda.py", cwd=SUITE)
    assert r.returncode == 2 and "ERROR test_libcuda.py - OSError: libcuda.so.1" in r.stdout, r.stdout[-3000:]


def test_the_redirect_answers_and_refuses_and_puts_everything_back(tmp_path, monkeypatch):
    import torch
    from triton_trace.errors import RequiresGPU
    from triton_trace.suite import cuda_on_cpu
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    before = (torch.version.cuda, torch.cuda.memory.memory_stats, torch.cuda.memory_stats, list(sys.meta_path))
    with cuda_on_cpu():
        import torch.utils.cpp_extension as ext         # (patched as it is imported, or at once if it was)
        assert torch.version.cuda == "12.8"
        assert torch.cuda.memory.memory_stats() == torch.cuda.memory_stats()
        # torch._dynamo's table of torch functions refuses one object under two names with different rules
        from torch._dynamo import trace_rules
        trace_rules.get_torch_obj_rule_map.cache_clear()
        try:
            assert trace_rules.get_torch_obj_rule_map()
        finally:
            trace_rules.get_torch_obj_rule_map.cache_clear()
        for build in (lambda: ext.load("tt_x", [str(tmp_path / "k.cu")]),
                      lambda: ext.load("tt_x", "k.cpp", with_cuda=True),
                      lambda: ext.load_inline("tt_x", "", cuda_sources="__global__ void k() {}")):
            try:
                build()
                raise AssertionError("a CUDA build was not refused")
            except RequiresGPU as e:
                assert e.what.startswith("a CUDA extension (torch.utils.cpp_extension.load") and "'tt_x'" in e.what
    after = (torch.version.cuda, torch.cuda.memory.memory_stats, torch.cuda.memory_stats, list(sys.meta_path))
    assert before == after and ext.load.__module__ == "torch.utils.cpp_extension"
    assert not list(tmp_path.iterdir())


def _saved(path: str):
    assert os.path.exists(path), path
    return triton_trace.load(path, trust=True)


def test_keyboard_interrupt_keeps_the_traces(tmp_path):
    r = run_suite("--tt-cuda", f"--triton-trace-dir={tmp_path}", "interrupt_cases.py", "-k",
                  "finished or raises or never", cwd=SUITE)
    assert r.returncode == 2 and "KeyboardInterrupt" in r.stdout, r.stdout[-3000:]
    assert outcomes(r.stdout) == {"test_finished_with_a_finding": "failed"}          # test_never_runs did not
    interrupted = tmp_path / "interrupt_cases.py_test_raises_keyboard_interrupt.interrupted.ttrace"
    assert ("interrupted (Ctrl-C) in interrupt_cases.py::test_raises_keyboard_interrupt after 1 traced launch(es): "
            f"its trace saved, open it with  triton-trace view {interrupted}") in r.stdout
    assert f"1 trace(s) of failing tests saved before it in {tmp_path}" in r.stdout
    assert [lc.kernel_name for lc in _saved(str(interrupted)).launches] == ["to_bf16_kernel"]
    finished = _saved(str(tmp_path / "interrupt_cases.py_test_finished_with_a_finding.ttrace"))
    assert [lc.kernel_name for lc in finished.launches] == ["shift_kernel"]


def test_sigint_during_a_launch_keeps_the_traces(tmp_path):
    marker = tmp_path / "slow_kernel_started"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={SUITE}", f"--confcutdir={SUITE}",
           "-rA", "--tt-cuda", f"--triton-trace-dir={tmp_path}", "interrupt_cases.py", "-k",
           "finished or sigint or never"]
    p = popen_with_sigint(cmd, cwd=SUITE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "TT_MARKER": str(marker)})
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), p.communicate(timeout=60)[0][-3000:] if p.poll() is not None else "no marker"
        p.send_signal(signal.SIGINT)              # the slow kernel is running its loop, a billion trips long
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 2 and "KeyboardInterrupt" in out, out[-3000:] + err[-2000:]
    assert outcomes(out) == {"test_finished_with_a_finding": "failed"}
    interrupted = tmp_path / "interrupt_cases.py_test_interrupted_by_sigint.interrupted.ttrace"
    assert "interrupted (Ctrl-C) in interrupt_cases.py::test_interrupted_by_sigint after 2 traced launch(es)" in out
    assert "= triton_trace =" in out and "1 test(s) launched 1 traced kernel launch(es); 1 failed" in out
    first, slow = _saved(str(interrupted)).launches
    assert first.kernel_name == "to_bf16_kernel" and first.completed
    assert first.meta["poisoned"] == ["out_ptr"]         # its torch.empty output: kept in the file
    assert slow.kernel_name == "slow_kernel" and not slow.completed and "interrupted" in slow.error
    assert (tmp_path / "interrupt_cases.py_test_finished_with_a_finding.ttrace").exists()
