"""unwritten_output judged over every launch of a trace that writes one storage (a host loop over chunks)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.findings import runs

N, CHUNK, BLOCK = 1000, 256, 128


@triton.jit
def scale_chunk(x_ptr, out_ptr, start, n, BLOCK: tl.constexpr):
    """out[start + i] = 2 * x[start + i] for i < n (the chunk a host loop hands this launch)."""
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < start + n
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=m), mask=m)


def _chunks(x, out, starts, kernel, whole=True):
    for s in starts:
        n = min(CHUNK, N - s)
        if whole:      # the whole tensors and a start offset
            kernel[(triton.cdiv(n, BLOCK),)](x, out, s, n, BLOCK=BLOCK)
        else:          # a slice per launch: another storage offset in each launch's view
            kernel[(triton.cdiv(n, BLOCK),)](x[s:s + n], out[s:s + n], 0, n, BLOCK=BLOCK)


def _analysed(starts, whole=True):
    x, out = torch.randn(N), torch.full((N,), -7.0)
    triton_trace.reset()
    _chunks(x, out, starts, triton_trace.trace(outputs=("out_ptr",))(scale_chunk), whole)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace, triton_trace.analyze(trace, layouts="model", what_if=False), x, out


def _unwritten(report):
    return [f for f in report.findings if f.kind == "unwritten_output"]


@pytest.mark.parametrize("whole", [True, False])
def test_chunks_that_cover_the_output_leave_nothing_unwritten(whole):
    trace, report, x, out = _analysed(range(0, N, CHUNK), whole)
    assert len(trace.launches) == 4 and torch.equal(out, 2 * x)
    assert len({t.buffer for lc in trace.launches for t in lc.tensors if t.name == "out_ptr"}) == 1
    assert _unwritten(report) == []


def test_a_loop_that_stops_one_chunk_early_is_one_finding_with_the_missing_tail():
    starts = range(0, N - CHUNK, CHUNK)          # the off-by-one: 0, 256, 512; the tail [768, 1000) is never run
    trace, report, x, out = _analysed(starts)
    never = np.flatnonzero((out == -7.0).numpy())             # independently: what still holds the fill
    assert list(never) == list(range(768, N))
    found = _unwritten(report)
    assert len(found) == 1, [f.message for f in found]
    f = found[0]
    assert f.count == len(never) == 232 and f.launch == 0
    assert f.extent["elements"]["ranges"] == runs(never)
    assert "any of the 3 launches that use its storage (launches 0-2)" in f.message


def test_slices_judge_only_what_they_declare():
    """A slice per launch declares only its slice: the tail no launch's view holds is nobody's output."""
    _, report, _, out = _analysed(range(0, N - CHUNK, CHUNK), whole=False)
    assert (out[768:] == -7.0).all() and _unwritten(report) == []


def test_each_launch_judged_alone_when_the_storages_differ():
    """Two outputs, one chunk each, the second made after the first is freed (torch may give it the same
    address): different storages, each launch's unwritten rest is its own finding."""
    kernel = triton_trace.trace(outputs=("out_ptr",))(scale_chunk)
    triton_trace.reset()
    x = torch.randn(N)
    out = torch.zeros(N)
    kernel[(2,)](x, out, 0, CHUNK, BLOCK=BLOCK)
    del out
    out = torch.zeros(N)
    kernel[(2,)](x, out, CHUNK, CHUNK, BLOCK=BLOCK)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    a, b = (next(t for t in lc.tensors if t.name == "out_ptr") for lc in trace.launches)
    assert a.buffer != b.buffer
    found = _unwritten(triton_trace.analyze(trace, layouts="model", what_if=False))
    assert sorted((f.launch, f.count) for f in found) == [(0, N - CHUNK), (1, N - CHUNK)]
    assert all("any program" in f.message for f in found)


def test_the_judgement_survives_a_trace_file(tmp_path):
    trace, report, _, _ = _analysed(range(0, N - CHUNK, CHUNK))
    path = tmp_path / "chunks.tt"
    triton_trace.save(trace, str(path))
    again = triton_trace.analyze(triton_trace.load(str(path)), layouts="model", what_if=False)
    assert [(f.count, f.message) for f in _unwritten(again)] == [(f.count, f.message) for f in _unwritten(report)]


def test_a_reading_launch_does_not_excuse_the_writer():
    """The same storage read by a later launch (x of the second launch is the first's out): the rest the
    writer left stays its finding."""
    kernel = triton_trace.trace(outputs=("out_ptr",))(scale_chunk)
    triton_trace.reset()
    x, mid, out = torch.randn(N), torch.zeros(N), torch.zeros(N)
    kernel[(2,)](x, mid, 0, CHUNK, BLOCK=BLOCK)                 # writes mid[0:256] only
    kernel[(8,)](mid, out, 0, N, BLOCK=BLOCK)                   # reads all of mid, writes all of out
    trace = triton_trace.current_trace()
    triton_trace.reset()
    found = _unwritten(triton_trace.analyze(trace, layouts="model", what_if=False))
    assert [(f.launch, f.tensor, f.count) for f in found] == [(0, "out_ptr", N - CHUNK)]
