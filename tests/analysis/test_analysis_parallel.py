"""The analysis on two cores (analysis/parallel.py) reports exactly what it reports on one: the same report,
byte for byte, for every kernel of the broken-kernel suite and a grouped matmul whose what-if replays run
beside the launch's own cache simulation; an error in either half reaches the caller and never leaves a
thread running."""
import json
import threading
import time

import pytest
import torch

import triton_trace
from triton_trace import trace
from triton_trace.analysis import parallel
import kernels as K
from kernels.broken import CASES


def _trace():
    triton_trace.reset()
    torch.manual_seed(0)
    # a grouped matmul large enough for several cache windows: its GROUP_M replays run beside
    K.matmul(torch.randn(256, 64), torch.randn(64, 512), kernel=trace(K.make_matmul()), block_m=32, block_n=32,
             block_k=32, group_m=1)
    for case in CASES:
        if "block_pointer" in case.name:
            continue
        case.run(case.broken, False)
    return triton_trace.current_trace()


def _report(tr, threads, monkeypatch, **params) -> str:
    monkeypatch.setenv("TRITON_TRACE_THREADS", threads)
    return json.dumps(triton_trace.analyze(tr, **params).to_dict(), sort_keys=True, allow_nan=False)


def test_two_cores_report_what_one_reports(monkeypatch):
    tr = _trace()
    assert _report(tr, "2", monkeypatch) == _report(tr, "1", monkeypatch)
    small = {"l2_bytes": 64 << 10, "programs_in_flight": 8}      # an L2 the group size matters for
    assert _report(tr, "2", monkeypatch, **small) == _report(tr, "1", monkeypatch, **small)
    one = _report(tr, "1", monkeypatch, what_if=True, **small)
    assert _report(tr, "2", monkeypatch, what_if=True, **small) == one
    assert '"program_order"' in one and "GROUP_M=4" in one and '"other_gpu"' in one    # replays made hints


def test_cores_follows_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_THREADS", "1")
    assert parallel.cores() == 1
    monkeypatch.setenv("TRITON_TRACE_THREADS", "not a number")
    assert parallel.cores() >= 1


@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_error_beside_reaches_the_caller(threads, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_THREADS", threads)

    def fails():
        raise ValueError("side failed")
    with parallel.beside(fails) as side:
        pass
    with pytest.raises(ValueError, match="side failed"):
        side.result()


def test_an_error_in_the_block_waits_for_the_side_work(monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_THREADS", "2")
    done = threading.Event()

    def slow():
        time.sleep(0.2)
        done.set()
    with pytest.raises(KeyError):
        with parallel.beside(slow):
            raise KeyError("block failed")
    assert done.is_set()
