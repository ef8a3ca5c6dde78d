"""launch.touches(tensor, index): every access to one element, in execution order, checked against the
lanes each kernel line addresses (computed here from the kernel's own index arithmetic) and against the
values torch sees."""
from __future__ import annotations

import pytest
import torch

import triton_trace
from kernels import touches as K


def traced(kernel, grid, *args, batch=True, **kw):
    triton_trace.reset()
    triton_trace.trace(batch=batch)(kernel)[grid](*args, **kw)
    launch = triton_trace.current_trace().launches[0]
    triton_trace.reset()
    return launch


def source_line(kernel, text):
    import inspect
    lines, start = inspect.getsourcelines(kernel.fn)
    return next(start + k for k, ln in enumerate(lines) if text in ln)


@pytest.mark.parametrize("batch", [True, False])
def test_every_read_of_an_element_in_execution_order(batch):
    n, block = 200, 64
    x, y = torch.randn(n), torch.empty(n)
    lc = traced(K.stencil, (4,), x, y, n, BLOCK=block, batch=batch)
    e = 64
    # independently: program p reads x[i - 1], x[i], x[i + 1] for i = p * block + lane, in that op order
    want = []
    for p in range(4):
        for seq, shift, text in ((0, -1, "left ="), (1, 0, "mid ="), (2, 1, "right =")):
            for lane in range(block):
                i = p * block + lane
                active = (i - 1 >= 0 and i < n) if shift == -1 else (i < n if shift == 0 else i + 1 < n)
                if active and i + shift == e:
                    want.append(((p, 0, 0), seq, "load", source_line(K.stencil, text), (lane,), x[e].item()))
    got = [(t.program, t.seq, t.kind, t.line, t.lane, t.value) for t in lc.touches("x_ptr", e)]
    assert got == want and len(got) == 3
    [w] = lc.touches("y_ptr", e)
    assert (w.program, w.kind, w.line, w.value) == ((1, 0, 0), "store", source_line(K.stencil, "tl.store"), y[e].item())
    assert [t.order for t in lc.touches("x_ptr", e)] == [0, 1, 2]


@pytest.mark.parametrize("batch", [True, False])
def test_who_wrote_a_wrong_element(batch):
    n, block = 128, 32
    x, y = torch.ones(n), torch.zeros(n)
    lc = traced(K.overlapping_store, (4,), x, y, n, BLOCK=block, SPAN=64, batch=batch)
    writes = [t for t in lc.touches("y_ptr", 32) if t.kind == "store"]
    assert [(t.program, t.lane, t.value) for t in writes] == [((0, 0, 0), (32,), 1.0), ((1, 0, 0), (0,), 2.0)]
    assert writes[-1].value == y[32].item()          # the last writer's value is what memory holds
    assert [t.to_dict()["program"] for t in writes] == [[0, 0, 0], [1, 0, 0]]


def test_aliasing_views_reach_the_element_too():
    base = torch.arange(65, dtype=torch.float32)
    out = torch.empty(64)
    lc = traced(K.shifted_sum, (2,), base[:-1], base[1:], out, 64, BLOCK=32)
    got = [(t.tensor, t.program, t.lane) for t in lc.touches("a_ptr", 10)]
    assert got == [("a_ptr", (0, 0, 0), (10,)), ("b_ptr", (0, 0, 0), (9,))]     # b = a[1:]: b[9] is a[10]
    assert [t.tensor for t in lc.touches(1, 9)] == ["a_ptr", "b_ptr"]


def test_an_index_outside_the_tensor_names_it():
    lc = traced(K.stencil, (1,), torch.randn(64), torch.empty(64), 64, BLOCK=64)
    with pytest.raises(triton_trace.TraceUsageError, match=r"not an element of 'x_ptr' \(shape \(64,\)\)"):
        lc.touches("x_ptr", 64)
    with pytest.raises(triton_trace.TraceUsageError, match="not an element"):
        lc.touches("x_ptr", (1, 2))
    assert [t.lane for t in lc.touches("x_ptr", -1)] == [(63,), (62,)]      # x[63]: mid lane 63, right lane 62
