"""triton_trace.compare on a machine without CUDA: it says so in one line; the tolerance each traced
launch calls for; the element comparison; who stored an element that differs. The GPU runs themselves
are in tests/gpu/test_gpu_compare.py (they skip without CUDA)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import kernels as K
import triton_trace
from triton_trace import gpucheck as G


def traced(make, launcher, *args, **kw):
    triton_trace.reset()
    out = launcher(*args, kernel=triton_trace.trace(make()), **kw)
    lc = triton_trace.current_trace().launches[0]
    triton_trace.reset()
    return lc, out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_says_so_in_one_line():
    with pytest.raises(triton_trace.TraceUsageError, match=r"torch.cuda.is_available\(\) is False") as e:
        triton_trace.compare(K.make_add(), (1,), torch.randn(4), torch.randn(4), torch.empty(4), 4, BLOCK=4)
    assert "\n" not in str(e.value)


def test_the_tolerance_follows_the_ops():
    x = torch.randn(300)
    add, _ = traced(K.make_add, K.add, x, x, block=64)
    assert G.tolerance_for(add, True).kind == "elementwise" and G.tolerance_for(add, False).kind == "exact"
    copy, _ = traced(K.make_transpose, K.transpose, torch.randn(40, 24))
    assert G.tolerance_for(copy, True).kind == "exact"               # data movement: bit for bit
    sm, _ = traced(K.make_softmax, K.softmax, torch.randn(8, 100))
    tol = G.tolerance_for(sm, True)
    assert (tol.kind, tol.n) == ("reduction", 128)                # one row of BLOCK 128 summed per program
    mm, _ = traced(K.make_matmul, K.matmul, torch.randn(32, 48), torch.randn(48, 16), block_k=16)
    assert (G.tolerance_for(mm, True).kind, G.tolerance_for(mm, True).n) == ("dot", 16)
    gelu, _ = traced(K.make_gelu_tanh, K.gelu_tanh, torch.randn(256))
    assert G.tolerance_for(gelu, True).kind == "elementwise"        # tanh, *, +: math, no reduction


def test_differing_elements():
    t = torch.linspace(-2, 2, 100)
    exact, ew = G.Tolerance("exact"), G.Tolerance("elementwise")
    one_ulp = torch.nextafter(t, torch.full_like(t, float("inf")))
    assert int(G.differing(one_ulp, t, exact).sum()) == 100 and int(G.differing(one_ulp, t, ew).sum()) == 0
    assert int(G.differing(t * 1.001, t, ew).sum()) > 90
    g, tr = t.clone(), t.clone()
    g[5], tr[7] = float("nan"), float("nan")                    # each side left one element unwritten
    g[9] = tr[9] = float("nan")                                 # both left this one: not a difference
    assert np.flatnonzero(G.differing(g, tr, ew).numpy()).tolist() == [5, 7]
    i = torch.arange(10, dtype=torch.int32)
    j = i.clone()
    j[3] = G.POISON_INT
    assert np.flatnonzero(G.differing(j, i, ew).numpy()).tolist() == [3]      # integers: always exact


def test_an_element_that_differs_names_the_program_op_and_line_that_stored_it():
    x, y = torch.randn(1000), torch.randn(1000)
    lc, out = traced(K.make_add, K.add, x, y, block=128)
    gpu = out.clone()
    gpu[517] += 1
    r = G.compare_output("out_ptr", lc, lc.tensor_index("out_ptr"), gpu, out, G.Tolerance("exact"))
    assert (r.differing, r.elements) == (1, 1000)
    [e] = r.examples
    lines, first = inspect.getsourcelines(K.add_kernel)
    store = first + next(k for k, text in enumerate(lines) if "tl.store" in text)
    assert (e["index"], e["program"], e["line"]) == ([517], [517 // 128, 0, 0], store)
    assert e["gpu"] == pytest.approx(out[517].item() + 1) and e["trace"] == pytest.approx(out[517].item())


def test_a_comparison_reads_well():
    r = G.OutputComparison("out_ptr", "bit-exact", 240, 1, 0, 0, 0.5,
                           ({"index": [3, 7], "gpu": 1.0, "trace": "nan", "program": [3, 0, 0], "op": 2, "line": 16,
                             "file": "k.py"},))
    c = G.Comparison("softmax", (r,), triton_trace.Trace())
    assert not c.ok and c.to_dict()["outputs"][0]["differing"] == 1
    assert "out_ptr[3, 7]: gpu 1.0, trace nan; stored by program (3, 0, 0) op 2 at k.py:16" in c.summary()


def test_copies_keep_the_layout_and_never_share_memory():
    base = torch.randn(10, 12)
    view = base[2:, 1::2]                     # storage offset 25, strides (12, 2)
    c = G.to_device(view, "cpu")
    assert (c.shape, c.stride(), c.storage_offset()) == (view.shape, view.stride(), view.storage_offset())
    assert torch.equal(c, view) and c.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    c.fill_(0)
    assert base.abs().sum() > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_the_command_line_says_it_needs_cuda():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "triton_trace", "diff", "--gpu", "examples/vector_add.py"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "torch.cuda.is_available() is False" in r.stderr and r.stderr.count("\n") == 1
