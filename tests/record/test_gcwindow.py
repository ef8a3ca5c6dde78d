"""A traced launch runs with young collections every gcwindow.YOUNG allocations (its own objects die with it
instead of being promoted, which made CPython collect the whole heap every few launches) and leaves the
process's collector settings as it found them: nested, on another thread, after a failing launch, or when the
process set its own."""
import gc
import threading

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.record import executor, gcwindow


@triton.jit
def _scale(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 3.0)


@pytest.fixture
def thresholds():
    saved, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.set_threshold(*saved)
    (gc.enable if enabled else gc.disable)()


def test_a_traced_launch_defers_young_collections_and_puts_the_threshold_back(thresholds, monkeypatch):
    seen = []
    real = executor.run_grid
    monkeypatch.setattr(executor, "run_grid", lambda *a, **k: seen.append(gc.get_threshold()) or real(*a, **k))
    x, out = torch.randn(64), torch.empty(64)
    triton_trace.reset()
    trace(_scale)[(4,)](x, out, N=16)
    assert seen == [(gcwindow.YOUNG, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    assert torch.equal(out, x * 3.0)
    assert len(triton_trace.current_trace().launches) == 1


def test_a_failing_launch_puts_the_threshold_back(thresholds):
    with pytest.raises(triton_trace.TraceUsageError):
        trace(_scale)[(4,)](torch.randn(64))           # arguments missing
    with pytest.raises(triton_trace.OutOfBoundsAccess):
        trace(_scale, on_oob="raise")[(4,)](torch.randn(64), torch.empty(8), N=16)     # stops mid-launch
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_and_concurrent_windows_restore_once(thresholds):
    inner = threading.Event()
    release = threading.Event()

    def other_thread():
        with gcwindow.deferred():
            inner.set()
            release.wait(10)

    with gcwindow.deferred():
        with gcwindow.deferred():
            assert gc.get_threshold()[0] == gcwindow.YOUNG
        assert gc.get_threshold()[0] == gcwindow.YOUNG          # the outer window is still open
        t = threading.Thread(target=other_thread)
        t.start()
        assert inner.wait(10)
    assert gc.get_threshold()[0] == gcwindow.YOUNG              # the other thread's launch is still running
    release.set()
    t.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_the_process_settings_win(thresholds):
    gc.set_threshold(50_000, 5, 5)                              # higher than YOUNG: kept
    with gcwindow.deferred():
        assert gc.get_threshold() == (50_000, 5, 5)
    gc.set_threshold(700, 10, 10)
    gc.disable()                                                # off: stays off, threshold untouched
    with gcwindow.deferred():
        assert not gc.isenabled() and gc.get_threshold() == (700, 10, 10)
    gc.enable()
    with gcwindow.deferred():
        gc.set_threshold(1000, 10, 10)                          # set inside the window: not overwritten
    assert gc.get_threshold() == (1000, 10, 10)
