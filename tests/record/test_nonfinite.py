"""Where a NaN or an Inf was born: findings only when a non-finite value reaches memory, naming the store
and the first operation that made it from finite operands (or the argument that already held it).
Births in masked-off lanes, and non-finite constants written on purpose, are not findings."""
from __future__ import annotations

import inspect

import numpy as np

import pytest
import torch
import triton
import triton.language as tl

import triton_trace


@triton.jit
def divide(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, x / y, mask=m)          # 0 / 0 in the masked tail: never stored


@triton.jit
def exp_then_half(x_ptr, out_ptr, h_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.exp(x), mask=m)
    tl.store(h_ptr + offs, (x * 1000.0).to(tl.float16), mask=m)


@triton.jit
def pad_with_inf(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full((BLOCK,), float("-inf"), tl.float32), mask=offs < n)


def findings(kernel, grid, *args, batch=True, **kw):
    triton_trace.reset()
    triton_trace.trace(kernel, batch=batch)[grid](*args, **kw)
    return triton_trace.analyze(triton_trace.current_trace()).findings


@pytest.mark.parametrize("batch", [True, False])
def test_a_division_by_zero_that_reaches_memory_names_its_birth(batch):
    x, y = torch.ones(100), torch.ones(100)
    y[37] = 0.0
    (f,) = findings(divide, (4,), x, y, torch.empty(100), 100, BLOCK=32, batch=batch)
    assert f.kind == "nonfinite" and f.severity == "error" and f.program == (1, 0, 0)
    assert f.tensor == "out_ptr" and f.offsets == (37,) and f.count == 1
    assert "born at" in f.message and "in divide from finite operands (1.0, 0.0) -> inf" in f.message
    assert "a float division by zero" in f.message           # what README.md's findings table promises
    lines, start = inspect.getsourcelines(divide.fn)
    assert f.line == start + next(i for i, t in enumerate(lines) if "x / y" in t)       # the birth's line


@pytest.mark.parametrize("batch", [True, False])
def test_births_in_masked_lanes_are_not_findings(batch):
    assert findings(divide, (4,), torch.ones(100), torch.ones(100), torch.empty(100), 100, BLOCK=32,
                    batch=batch) == ()


@pytest.mark.parametrize("batch", [True, False])
def test_a_zero_by_zero_division_says_division_by_zero_and_an_overflowing_one_does_not(batch):
    x, y = torch.ones(64), torch.ones(64)
    x[9], y[9] = 0.0, 0.0                           # 0 / 0: NaN, from a zero divisor
    (f,) = findings(divide, (2,), x, y, torch.empty(64), 64, BLOCK=32, batch=batch)
    assert "(0.0, 0.0) -> nan" in f.message and "a float division by zero" in f.message
    x[9], y[9] = 1e30, 1e-30                        # Inf from a finite, non-zero divisor
    (f,) = findings(divide, (2,), x, y, torch.empty(64), 64, BLOCK=32, batch=batch)
    assert "-> inf" in f.message and "division by zero" not in f.message


def test_exp_overflow_and_a_float16_conversion_out_of_range():
    x = torch.zeros(64)
    x[3] = 100.0            # exp(100) overflows float32; 100 * 1000 is past float16's 65504
    got = {(f.tensor, f.kind): f for f in findings(exp_then_half, (1,), x, torch.empty(64),
                                                  torch.empty(64, dtype=torch.float16), 64, BLOCK=64)}
    assert "in exp from finite operands (100.0) -> inf" in got[("out_ptr", "nonfinite")].message
    assert "conversion to fp16" in got[("h_ptr", "overflow")].message      # a narrowing conversion: overflow


def test_nan_already_in_an_input_is_reported_once_as_such():
    x = torch.ones(100)
    x[5] = float("nan")
    x[70] = float("nan")
    (f,) = findings(divide, (4,), x, torch.ones(100), torch.empty(100), 100, BLOCK=32)
    assert f.kind == "nonfinite_input" and f.severity == "warning" and "came from 'x_ptr'" in f.message


@triton.jit
def sum_window(x_ptr, out_ptr, lo, n, BLOCK: tl.constexpr):
    # reads x[lo:lo + n], masked lanes padded with -inf; sums it per program
    offs = lo + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < lo + n, other=float("-inf"))
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.where(x == float("-inf"), 0.0, x), axis=0))


@pytest.mark.parametrize("batch", [True, False])
def test_an_input_nan_is_reported_only_where_a_program_loads_it(batch):
    """An input is scanned once, not at every load; a NaN it holds outside what any program reads, and
    -inf padding in masked lanes, are not findings; one inside what a program reads is, once."""
    x = torch.ones(300)
    x[3] = float("nan")                   # before the window
    x[250] = float("inf")                 # after it
    assert findings(sum_window, (4,), x, torch.empty(4), 10, 100, BLOCK=32, batch=batch) == ()
    x[77] = float("nan")                  # inside: program 2 loads element 10 + 2 * 32 + 3
    (f,) = findings(sum_window, (4,), x, torch.empty(4), 10, 100, BLOCK=32, batch=batch)
    assert f.kind == "nonfinite_input" and "came from 'x_ptr'" in f.message and f.program == (2, 0, 0)


def test_a_non_finite_constant_written_on_purpose_is_not_a_finding():
    out = torch.zeros(16)
    assert findings(pad_with_inf, (1,), out, 10, BLOCK=16) == ()
    assert torch.isinf(out[:10]).all()


def test_the_finding_survives_save_and_load(tmp_path):
    x, y = torch.ones(64), torch.ones(64)
    y[0] = 0.0
    triton_trace.reset()
    triton_trace.trace(divide)[(2,)](x, y, torch.empty(64), 64, BLOCK=32)
    triton_trace.current_trace().save(tmp_path / "t.ttrace")
    kinds = [f.kind for f in triton_trace.analyze(triton_trace.load(tmp_path / "t.ttrace")).findings]
    assert kinds == ["nonfinite"]


def test_garbage_in_an_undefined_output_is_not_an_input_nan():
    """torch.empty memory may hold NaN bit patterns: reading an argument declared undefined is the
    analysis' uninitialized_read, never a nonfinite_input (this made a sanitizer test flaky)."""
    from kernels import broken as B
    x = torch.randn(300)
    out = torch.full((300,), float("nan"))          # the worst garbage an empty tensor can hold
    triton_trace.reset()
    B.accumulate_into_empty[(5,)](x, out, 300, BLOCK=64)        # declared trace(outputs=("out",))
    kinds = {f.kind for f in triton_trace.analyze(triton_trace.current_trace()).findings}
    triton_trace.reset()
    assert "uninitialized_read" in kinds and "nonfinite_input" not in kinds


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_all_finite_agrees_with_numpy(dtype):
    from triton_trace.record.checks.nonfinite import all_finite
    x = np.linspace(-60000, 60000, 4096).astype(dtype).reshape(64, 64)
    assert all_finite(x) and all_finite(x[:, ::3]) and all_finite(x[:0])
    for bad in (np.inf, -np.inf, np.nan):
        y = x.copy()
        y[17, 5] = bad
        assert not all_finite(y) and not all_finite(y.T) and all_finite(y[18:])
    if dtype == np.float16:           # the largest finite half and the smallest subnormal are finite
        assert all_finite(np.array([65504, -65504, 6e-8], dtype=np.float16))


@triton.jit
def scale_huge(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 1.0e30)


@pytest.mark.parametrize("batch", [True, False])
def test_finite_values_whose_sum_overflows_are_not_findings(batch):
    """Every product is finite (3e38 < float32's max) but any sum of two overflows: the finiteness check,
    which sums first, must settle such blocks lane by lane; one lane made 10x larger overflows for real."""
    x = torch.full((64,), 3.0e8)
    assert not findings(scale_huge, (2,), x, torch.empty(64), BLOCK=32, batch=batch)
    x[40] = 3.0e9
    (f,) = findings(scale_huge, (2,), x, torch.empty(64), BLOCK=32, batch=batch)
    assert f.kind == "nonfinite" and f.program == (1, 0, 0) and f.offsets == (40,)


def test_batched_chunks_check_only_stores_until_one_writes_a_non_finite_value(monkeypatch):
    """A batched chunk skips the per-operation checks; the first store of a non-finite value runs its chunk
    again with them, and so does every later chunk of the launch: four chunks, births in the second and
    the fourth, give exactly the findings of one program at a time (one, for the line and its cause, with
    both programs in its extent). A
    clean launch never checks an operation batched (one program at a time checks each)."""
    from triton_trace.record.checks import nonfinite_ops
    calls = []
    real = nonfinite_ops.all_finite
    monkeypatch.setattr(nonfinite_ops, "all_finite", lambda v: calls.append(v.size) or real(v))
    x, y = torch.ones(512), torch.ones(512)
    triton_trace.reset()
    triton_trace.trace(divide, batch=4)[(16,)](x, y, torch.empty(512), 512, BLOCK=32)
    assert calls == [] and not triton_trace.analyze(triton_trace.current_trace()).findings
    triton_trace.trace(divide, batch=False)[(16,)](x, y, torch.empty(512), 512, BLOCK=32)
    assert len(calls) == 16
    y[[5 * 32 + 3, 13 * 32 + 30]] = 0.0
    got = []
    for b in (4, False):
        calls.clear()
        got.append([f.to_dict() for f in findings(divide, (16,), x, y, torch.empty(512), 512, BLOCK=32, batch=b)])
        got[-1].append(len(calls))
    # batched: the second chunk twice (lazy, then checking), the third and fourth checking: 3 checked divisions
    assert got[0][:-1] == got[1][:-1] and got[0][-1] == 3 and got[1][-1] == 16
    assert [f["program"] for f in got[0][:-1]] == [[5, 0, 0]] and got[0][0]["count"] == 2
    assert got[0][0]["extent"]["programs"]["first"] == [[5, 0, 0], [13, 0, 0]]       # both programs, one cause


@triton.jit
def double_in_place(x_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)


@triton.jit
def interleaved(y_ptr, d_ptr, z_ptr, P: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) + tl.arange(0, BLOCK) * P      # programs interleave: their ranges overlap
    y = tl.load(y_ptr + offs)
    d = tl.load(d_ptr + offs)
    tl.store(z_ptr + offs, y / d)
    tl.store(y_ptr + offs, y * 2.0)                         # y's loads were kept as ranges: checked again


@triton.jit
def masked_inf(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.where(m, tl.load(x_ptr + offs, mask=m, other=0.0), float("-inf")), mask=m)


@pytest.mark.parametrize("batch", [4, True])
def test_an_input_nan_of_an_in_place_kernel_is_reported_batched_as_one_at_a_time(batch):
    """The chunk that stores the NaN runs again checking every operation; the store it made the first time
    was undone, so the re-run's load still finds an argument nothing has written: an input, as in a
    sequential run."""
    got = []
    for b in (False, batch):
        x = torch.randn(256)
        x[3] = float("nan")
        got.append([f.to_dict() for f in findings(double_in_place, (8,), x, BLOCK=32, batch=b)])
    assert got[0] == got[1] and [f["kind"] for f in got[0]] == ["nonfinite_input"]


def test_a_chunk_rerun_for_both_reasons_stays_batched():
    """A non-finite store and loads kept as ranges of a storage the chunk then writes: each asks for the
    chunk again once; it still runs batched, with the sequential outputs and findings."""
    outs, found = [], []
    y0, d0 = torch.randn(256), torch.rand(256) + 1
    d0[0] = 0.0
    for b in (False, True):
        y, d, z = y0.clone(), d0.clone(), torch.empty(256)
        triton_trace.reset()
        triton_trace.trace(interleaved, batch=b)[(8,)](y, d, z, P=8, BLOCK=32)
        outs.append((y.clone(), z.clone()))
        lc = triton_trace.current_trace().launches[0]
        found.append([f.to_dict() for f in triton_trace.analyze(triton_trace.current_trace()).findings])
    assert all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(*outs))
    assert found[0] == found[1] and [f["kind"] for f in found[1]] == ["nonfinite"]
    ex = lc.meta["execution"]
    assert ex["batched_programs"] == 8 and not ex["fallbacks"], ex


def test_non_finite_values_in_masked_lanes_keep_the_chunks_lazy(monkeypatch):
    from triton_trace.record.checks import nonfinite_ops
    calls = []
    real = nonfinite_ops.all_finite
    monkeypatch.setattr(nonfinite_ops, "all_finite", lambda v: calls.append(v.size) or real(v))
    assert not findings(masked_inf, (4,), torch.randn(100), torch.empty(128), 100, BLOCK=32, batch=2)
    assert calls == []
