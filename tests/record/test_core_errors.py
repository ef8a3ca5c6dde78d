"""Bad input gives a clear error naming what to fix, and what was recorded stays."""
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _ti

import triton_trace
from triton_trace import ProgramError, UnsupportedOp, UnsupportedTritonVersion, trace
from triton_trace.record.interp import seams
from helpers.paths import ROOT
from helpers.source import line_of
import kernels as K


def shape_mismatch_in_program_1_2(x_ptr, out_ptr, BLOCK: tl.constexpr):
    px = tl.program_id(0)
    py = tl.program_id(1)
    offs = (px * 3 + py) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if px * 3 + py == 5:
        x = x + tl.zeros([2 * BLOCK], dtype=tl.float32)
    tl.store(out_ptr + offs, x + 1)


def test_exception_in_a_program_names_kernel_program_and_line_and_keeps_completed_programs():
    x = torch.randn(9 * 8)
    out = torch.zeros_like(x)
    with pytest.raises(ProgramError) as ei:
        trace(triton.jit(shape_mismatch_in_program_1_2))[(3, 3)](x, out, BLOCK=8)
    err = ei.value
    bad_line = line_of(shape_mismatch_in_program_1_2, "tl.zeros([2 * BLOCK]")
    assert err.kernel == "shape_mismatch_in_program_1_2" and err.program == (1, 2, 0) and err.line == bad_line
    msg = str(err)
    assert "shape_mismatch_in_program_1_2" in msg and "(1, 2, 0)" in msg and f"test_core_errors.py:{bad_line}" in msg
    lc = triton_trace.current_trace().launches[0]
    assert not lc.completed and "(1, 2, 0)" in lc.error
    # programs run x-major: (0,0) .. (0,2), (1,0), (1,1) completed; (1,2) recorded its load before failing
    done = [(0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0)]
    assert [tuple(p) for p in lc.programs()] == done + [(1, 2, 0)]
    assert [a.kind for a in lc.accesses(program=(1, 2))] == ["load"]
    # what the completed programs stored reached the caller's tensor, as on a GPU
    torch.testing.assert_close(out[:40], x[:40] + 1)
    assert (out[40:] == 0).all()


def inline_asm_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, %laneid;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, y)


def test_unsupported_op_names_the_op_and_the_line():
    x = torch.randn(16)
    with pytest.raises(UnsupportedOp) as ei:
        trace(triton.jit(inline_asm_kernel))[(2,)](x, torch.empty_like(x), BLOCK=8)
    err = ei.value
    line = line_of(inline_asm_kernel, "inline_asm_elementwise")
    assert err.op == "inline_asm_elementwise" and err.line == line and err.program == (0, 0, 0)
    assert isinstance(err, ProgramError)
    msg = str(err)
    assert "tl.inline_asm_elementwise" in msg and f":{line}" in msg and "inline_asm_kernel" in msg
    lc = triton_trace.current_trace().launches[0]
    assert not lc.completed and [a.kind for a in lc.accesses()] == ["load"]


@pytest.mark.parametrize("version,ok", [("3.4.0", False), ("4.0.0", False), ("2.3.1", False),
                                        ("3.5.0", True), ("3.6.0+git1234", True), ("3.9.0", True)])
def test_check_version(monkeypatch, version, ok):
    monkeypatch.setattr(triton, "__version__", version)
    if ok:
        seams.check_version()
    else:
        with pytest.raises(UnsupportedTritonVersion, match=rf"supports Triton 3\.5\.x to 3\.9\.x; .*{version}") as ei:
            seams.check_version()
        assert "pip install" in str(ei.value)
        assert isinstance(ei.value, ImportError)


def test_unsupported_version_is_refused_when_the_recorder_loads():
    """``import triton_trace`` is inert (tests/project/test_import_cost.py); the first use of the recorder checks
    the release before any module that reaches Triton's private names loads."""
    code = "import triton; triton.__version__ = '3.4.1'\nimport triton_trace\ntriton_trace.trace"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode != 0
    assert "UnsupportedTritonVersion" in res.stderr and "supports Triton 3.5.x to 3.9.x" in res.stderr


def test_seams_are_present():
    assert seams.check_seams() == []


def test_a_moved_seam_is_named(monkeypatch):
    monkeypatch.delattr(_ti, "ScanOps")
    monkeypatch.delattr(_ti.InterpreterBuilder, "create_dot")
    assert set(seams.check_seams()) == {"triton.runtime.interpreter.ScanOps", "InterpreterBuilder.create_dot"}
    with pytest.raises(UnsupportedTritonVersion, match="ScanOps"):
        seams.require_seams()


def test_keyboard_interrupt_from_progress_keeps_completed_programs():
    seen = []

    def progress(done, total, kernel):
        seen.append((done, total, kernel))
        if done == 3:
            raise KeyboardInterrupt

    triton_trace.set_progress(progress)
    try:
        x, y = torch.randn(1000), torch.randn(1000)
        with pytest.raises(KeyboardInterrupt):
            K.add(x, y, kernel=trace(batch=False)(K.make_add()), block=128)
    finally:
        triton_trace.set_progress(None)
    assert seen == [(1, 8, "add_kernel"), (2, 8, "add_kernel"), (3, 8, "add_kernel")]
    lc = triton_trace.current_trace().launches[0]
    assert not lc.completed and "interrupted after 3 of 8 programs" in lc.error
    assert [tuple(p) for p in lc.programs()] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    offs = 256 + np.arange(128)
    np.testing.assert_array_equal(lc.accesses(program=2)[0].offsets, offs)
    # the interrupted launch restored Triton: the next one runs normally
    torch.testing.assert_close(K.add(x, y, kernel=trace(K.make_add())), x + y)
    assert triton_trace.current_trace().launches[1].completed


def test_keyboard_interrupt_between_batched_chunks_keeps_the_completed_chunks():
    seen = []

    def progress(done, total, kernel):
        seen.append(done)
        if done >= 4:
            raise KeyboardInterrupt

    triton_trace.set_progress(progress)
    try:
        x, y = torch.randn(1000), torch.randn(1000)
        with pytest.raises(KeyboardInterrupt):
            K.add(x, y, kernel=trace(batch=2)(K.make_add()), block=128)
    finally:
        triton_trace.set_progress(None)
    assert seen == [2, 4]
    lc = triton_trace.current_trace().launches[0]
    assert [tuple(p) for p in lc.programs()] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]
    np.testing.assert_array_equal(lc.accesses(program=3)[2].offsets, 384 + np.arange(128))


def test_progress_reports_every_program():
    seen = []
    triton_trace.set_progress(lambda done, total, kernel: seen.append(done))
    try:
        K.sub3d(torch.randn(2, 4, 8), torch.randn(2, 4, 8), kernel=trace(batch=False)(K.make_grid3d()),
                block_m=4, block_n=4)
    finally:
        triton_trace.set_progress(None)
    assert seen == list(range(1, 5))


@triton.jit
def _read_through_another_argument(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    # a pointer derived from x_ptr that lands inside out's memory (far past x's storage)
    delta = (out_ptr.to(tl.int64) - x_ptr.to(tl.int64)) // 4
    v = tl.load(x_ptr + delta + offs)
    tl.store(out_ptr + offs, v + 1)


@pytest.mark.parametrize("batch", [True, False])
def test_a_far_access_is_attributed_to_the_argument_its_pointer_came_from(batch):
    """Not to whichever storage lies at that address (out is a view into a larger buffer)."""
    buf = torch.zeros(64)
    out = buf[16:32]
    x = torch.randn(16)
    triton_trace.trace(_read_through_another_argument, batch=batch)[(2,)](x, out, N=16)
    launch = triton_trace.current_trace().launches[-1]
    load = next(iter(launch.accesses(kind="load")))
    offs = np.asarray(load.offsets)
    assert load.tensor == "x_ptr" and not ((offs >= 0) & (offs < 16)).any()     # relative to x: outside it
    report = triton_trace.analyze(launch)
    oob = [f for f in report.findings if f.kind == "out_of_bounds"]
    assert oob and all(f.tensor == "x_ptr" for f in oob)
    assert all(not 0 <= o < 16 for o in oob[0].offsets)      # offsets relative to x, outside its 16 elements
    with pytest.raises(triton_trace.OutOfBoundsAccess, match="load of 'x_ptr'"):
        triton_trace.trace(_read_through_another_argument, on_oob="raise", batch=False)[(1,)](x, out, N=16)
