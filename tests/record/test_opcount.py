"""record/opcount.py: the interpreter's op dispatches counted by name, for the speed benchmark's column."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import TraceUsageError
from triton_trace.record.opcount import counting


@triton.jit
def _add(x, y, out, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    m = o < n
    tl.store(out + o, tl.load(x + o, mask=m) + tl.load(y + o, mask=m), mask=m)


@triton.jit
def _loop(x, out, TRIPS: tl.constexpr, B: tl.constexpr):
    o = tl.arange(0, B)
    acc = tl.zeros((B,), tl.float32)
    for i in range(TRIPS):
        acc += tl.load(x + i * B + o)
    tl.store(out + o, acc)


def test_counts_each_op_of_a_launch_once_per_chunk_or_per_program():
    x, y = torch.arange(100.0), torch.ones(100)
    out = torch.empty(100)
    for batch, per in ((False, 4), (True, 1)):          # 4 programs one by one; batched, the chunk runs once
        with counting() as c:
            triton_trace.trace(_add, batch=batch)[(4,)](x, y, out, 100, B=32)
        assert torch.equal(out, x + y)
        assert c["create_masked_load"] == 2 * per and c["create_masked_store"] == per, dict(c)
        assert c["create_fadd"] == per and c["create_get_program_id"] == per


def test_a_loop_body_counts_once_per_trip():
    x = torch.arange(5 * 16.0)
    out = torch.empty(16)
    with counting() as c:
        triton_trace.trace(_loop)[(1,)](x, out, TRIPS=5, B=16)
    assert torch.equal(out, x.view(5, 16).sum(0))
    assert c["create_load"] == 5 and c["create_store"] == 1


def test_the_builder_is_left_as_it_was_and_nesting_is_refused():
    from triton_trace.record.interp import access
    builder = access.builder()
    before = set(vars(builder))
    with counting():
        with pytest.raises(TraceUsageError, match="counting"):
            with counting():
                pass
    assert set(vars(builder)) == before
