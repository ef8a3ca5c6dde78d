"""The tracer as a drop-in for Triton's interpreter: the same results, errors and prints as a plain run
(tests/scripts/dropin_plain.py runs the cases of tests/kernels/dropin.py under TRITON_INTERPRET=1 in a
child process), and torch's results where the plain interpreter is wrong. Never compared with the tracer."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError

import triton_trace
from helpers.paths import SCRIPTS
from kernels import dropin


def traced(kernel, **opts):
    """A traced copy of ``kernel`` (decorating it in place would change it for the other tests)."""
    return triton_trace.trace(triton.jit(kernel.fn, debug=getattr(kernel, "debug", None)), **opts)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "plain.pt"
    subprocess.run([sys.executable, os.path.join(SCRIPTS, "dropin_plain.py"), str(path)], check=True,
                   timeout=300)
    return torch.load(path, weights_only=False)


def run_traced(name, **opts):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tensors = dropin.CASES[name](traced, **opts)
    return tensors, out.getvalue()


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("name", sorted(set(dropin.CASES) - dropin.PLAIN_UNSAFE))
def test_same_outputs_and_prints_as_plain(plain, name, batch):
    expect = plain["cases"][name]
    assert expect["error"] is None, expect["error"]
    tensors, printed = run_traced(name, batch=batch)
    for key, ref in expect["tensors"].items():
        assert torch.equal(tensors[key], ref), f"{name}: output '{key}' differs from the plain interpreter"
    assert printed == expect["stdout"]


def test_atomics64_undo_matches_torch():
    """The batched chunk is undone (programs branch on their id) after 64-bit atomics wrote; the result is
    what the atomics compute, checked with torch's own arithmetic."""
    N, P = 8, 5
    torch.manual_seed(0)
    u0 = torch.randint(1 << 60, (4 * N,), dtype=torch.int64)
    f0 = torch.randn(3 * N, dtype=torch.float64) * 4
    res, _ = run_traced("atomics64")
    v = u0[:N]
    pids = torch.arange(P)
    assert torch.equal(res["u"][N:2 * N], u0[N:2 * N] + P * v)
    assert torch.equal(res["u"][2 * N:3 * N], torch.maximum(u0[2 * N:3 * N], v * P))
    assert torch.equal(res["u"][3 * N:], torch.minimum(u0[3 * N:], v))
    f = f0[:N][None, :] - pids[:, None].double()
    assert torch.equal(res["f"][N:2 * N], torch.maximum(f0[N:2 * N], f.max(0).values))
    assert torch.equal(res["f"][2 * N:], torch.minimum(f0[2 * N:], f.min(0).values))
    launch = triton_trace.current_trace().launches[-1]
    assert launch.meta["execution"]["fallbacks"], "the chunk was expected to be undone and re-run"


def test_rank9_store_records_values():
    res, _ = run_traced("rank9")
    assert torch.equal(res["out"], torch.arange(512, dtype=torch.float32) * 2)
    store = [a for a in triton_trace.current_trace().launches[-1].accesses(kind="store")][0]
    assert store.values is not None and store.mask.sum() == 512


def test_and_or_not_follow_the_compiler():
    """`a and b` on blocks is elementwise (the rows past M stay untouched); the report is clean."""
    res, _ = run_traced("and_or_not")
    assert torch.equal(res["y"], dropin.and_or_not_reference(res["x"], 0.5))
    report = triton_trace.analyze(triton_trace.current_trace())
    assert report.ok, report.summary()


def test_pointer_table_reads_and_writes_the_callers_tensors(plain):
    res, _ = run_traced("array_of_tensors")
    torch.manual_seed(1)
    ts = [torch.randn(n).half() for n in (5, 16, 9)]
    for i, t in enumerate(ts):
        assert torch.equal(res[f"t{i}"], t * 2)
        assert torch.equal(res["out"][i * 16: i * 16 + t.numel()], t.float())
    launch = triton_trace.current_trace().launches[-1]
    loaded = [t for t in launch.tensors if "loaded as a pointer" in t.name]
    assert len(loaded) == 3 and report_ok(launch)


def report_ok(launch) -> bool:
    report = triton_trace.analyze(launch)
    return report.ok or pytest.fail(report.summary())


def test_tensor_like_arguments():
    """Objects with data_ptr(), dtype, shape and stride() (what compiled Triton accepts)."""
    res = dropin.run_tensor_like(traced)          # the plain interpreter refuses them (no untyped_storage)
    base = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    assert torch.equal(res["y"], base[:, 8:] * 3)
    t = triton_trace.current_trace().launches[-1].tensors[0]
    assert (t.shape, t.strides, t.storage_offset) == ((4, 8), (16, 1), 8)


def test_tensor_like_without_memory_is_refused_by_name():
    class Loose:
        dtype = torch.float32

        def data_ptr(self):
            return 4096 * 1024

    with pytest.raises(triton_trace.TraceUsageError, match="argument 'x_ptr'"):
        traced(dropin.scale_rows)[(1,)](Loose(), torch.zeros(8), 8, 8, N=8)


def test_restrided_view_has_no_findings_but_real_oob_is_found():
    res, _ = run_traced("restrided")
    assert torch.equal(res["out"], torch.arange(64, dtype=torch.float32)[:48:3])
    assert triton_trace.analyze(triton_trace.current_trace()).ok
    triton_trace.reset()
    base = torch.arange(16, dtype=torch.float32)
    traced(dropin.gather_restrided)[(1,)](base.as_strided((4,), (0,)), torch.arange(16) * 3, torch.zeros(16), N=16)
    kinds = {f.kind for f in triton_trace.analyze(triton_trace.current_trace()).findings}
    assert kinds == {"out_of_bounds"}


def test_dot_edge_tiles_identical_batched_and_one_by_one():
    """A K loop over partial edge tiles (masked rows loaded as 0): numpy's matmul sums in an order that
    depends on where its operands sit in memory, which differed between a chunk and one program."""
    from kernels.tutorials import make_matmul, matmul
    torch.manual_seed(3)
    for M, N, K in ((100, 64, 96), (70, 50, 40)):
        a, b = torch.randn(M, K), torch.randn(K, N)
        outs = [matmul(a, b, kernel=triton_trace.trace(make_matmul(), batch=batch), block_m=32, block_n=32,
                       block_k=32) for batch in (True, False)]
        assert torch.equal(outs[0], outs[1])
        torch.testing.assert_close(outs[0], a @ b, rtol=1e-4, atol=1e-4)


# -- errors keep Triton's classes ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bad_arange", "bad_axis"])
def test_front_end_errors_keep_tritons_classes(plain, name):
    expect = plain["errors"][name]
    with pytest.raises(triton.TritonError) as ei:
        traced(getattr(dropin, name))[(1,)](torch.zeros(4))
    err = ei.value
    assert isinstance(err, InterpreterError) and isinstance(err, CompilationError)
    assert isinstance(err, triton_trace.ProgramError)
    assert type(err.__cause__).__name__ == expect["cause"] and str(err.__cause__) == expect["text"]
    assert f"{name}" in str(err) and "program (0, 0, 0)" in str(err) and "dropin.py:" in str(err)
    assert not triton_trace.current_trace().launches[-1].completed    # the launch is kept


def test_runtime_errors_are_interpreter_errors_not_compilation_errors():
    with pytest.raises(InterpreterError) as ei:
        triton_trace.trace(triton.jit(_raising.fn))[(1,)](torch.zeros(1), 3)
    assert not isinstance(ei.value, CompilationError)
    assert isinstance(ei.value.__cause__, RuntimeError)


@triton.jit
def _raising(x_ptr, n):
    tl.store(x_ptr, n)
    raise RuntimeError("raised by the kernel")


# -- device_assert -------------------------------------------------------------------------------------------
def test_device_assert_off_without_debug():
    x = torch.arange(16, dtype=torch.float32)
    traced(dropin.checked)[(2,)](x, 5.0, N=8)
    assert torch.equal(x, torch.arange(16, dtype=torch.float32) + 1)


@pytest.mark.parametrize("how", ["jit", "launch", "env"])
def test_device_assert_with_debug_stops_the_launch(how, monkeypatch):
    x = torch.arange(16, dtype=torch.float32) + 8          # program 0 passes (8..15 < 16), program 1 fails
    kernel = triton.jit(dropin.checked.fn, debug=True) if how == "jit" else triton.jit(dropin.checked.fn)
    kwargs = {"debug": True} if how == "launch" else {}
    if how == "env":
        monkeypatch.setattr(triton.knobs.runtime, "debug", True)
    with pytest.raises(InterpreterError) as ei:
        triton_trace.trace(kernel)[(2,)](x, 16.0, N=8, **kwargs)
    text = str(ei.value)
    assert "program (1, 0, 0)" in text and "x must stay below the limit" in text and "(x < limit)" in text
    assert "8 of 8 lane(s)" in text and "x=16.0" in text
    assert isinstance(ei.value.__cause__, AssertionError)
    assert torch.equal(x[:8], torch.arange(8, dtype=torch.float32) + 9)      # program 0's store is kept
    assert torch.equal(x[8:], torch.arange(8, dtype=torch.float32) + 16)     # program 1 stopped first
    report = triton_trace.analyze(triton_trace.current_trace())
    (finding,) = [f for f in report.findings if f.kind == "assert_failed"]
    assert finding.program == (1, 0, 0) and finding.count == 8 and finding.line > 0 and finding.severity == "error"


def test_int32_wrap_runs_without_debug_and_stops_the_launch_with_it():
    """Without debug an int32 product wraps, as on the GPU (and the report names it); with debug Triton's
    overflow check, which the compiler keeps only then, stops the launch."""
    x = torch.tensor([1, -7, 1 << 29, 1 << 30] * 2, dtype=torch.int32)
    y = torch.zeros_like(x)
    triton_trace.trace(triton.jit(dropin.scaled_index.fn))[(2,)](x, y, 3, N=4)
    assert torch.equal(y, (x.to(torch.int64) * 3).to(torch.int32))          # two's-complement wrap
    report = triton_trace.analyze(triton_trace.current_trace())
    assert [f.kind for f in report.findings if f.kind == "overflow"] == ["overflow"]
    with pytest.raises(InterpreterError) as ei:
        triton_trace.trace(triton.jit(dropin.scaled_index.fn, debug=True))[(2,)](x, torch.zeros_like(x), 3, N=4)
    assert "int32 overflow detected for operation mul" in str(ei.value)


def test_int32_operands_whose_range_could_wrap_but_whose_lanes_do_not():
    """x - y with x == y spans twice int32's range lane by lane, yet no lane wraps: no overflow reported;
    one lane made to wrap is the one reported."""
    x = torch.tensor([1 << 30, -(1 << 30), 5, -5], dtype=torch.int32)
    out = torch.empty_like(x)
    triton_trace.trace(triton.jit(dropin.difference.fn))[(1,)](x, x.clone(), out, N=4)
    assert torch.equal(out, torch.zeros_like(x))
    assert not [f for f in triton_trace.analyze(triton_trace.current_trace()).findings if f.kind == "overflow"]
    y = torch.tensor([-(1 << 30), -(1 << 30), 5, -5], dtype=torch.int32)
    triton_trace.trace(triton.jit(dropin.difference.fn))[(1,)](x, y, out, N=4)
    assert torch.equal(out, (x.to(torch.int64) - y).to(torch.int32))
    (f,) = [f for f in triton_trace.analyze(triton_trace.current_trace()).findings if f.kind == "overflow"]
    assert f.count == 1 and "1073741824 - -1073741824 = 2147483648" in f.message


def test_assert_finding_survives_save_and_load(tmp_path):
    kernel = triton.jit(dropin.checked.fn, debug=True)
    with pytest.raises(InterpreterError):
        triton_trace.trace(kernel)[(1,)](torch.arange(8, dtype=torch.float32), 3.0, N=8)
    path = tmp_path / "a.ttrace"
    triton_trace.current_trace().save(path)
    kinds = [f.kind for f in triton_trace.analyze(triton_trace.load(path)).findings]
    assert kinds == ["assert_failed"]


def test_pre_run_hooks_run_before_the_launch():
    kernel = triton.jit(dropin.option_names.fn)
    seen = []
    kernel.add_pre_run_hook(lambda *args, **kwargs: seen.append(args[0].sum().item()) or args[0].fill_(1.0))
    x = torch.zeros(16)
    triton_trace.trace(kernel)[(1,)](x, num_stages=0, num_warps=0, num_ctas=0)
    assert seen == [0.0] and torch.equal(x, torch.full((16,), 1.0))
