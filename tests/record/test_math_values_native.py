"""The math values' one C pass (native/rowstats.c) and numpy's reductions (mathvalues_ops.row_stats, the
fallback) give the same rows: random float16/bfloat16/float32/float64 arrays holding NaN (either sign), +-Inf,
-0.0, subnormals and the largest finite values, laid out contiguous, transposed, reversed, sliced, broadcast
and shared by every program, each compared with counts, ranges and first lanes computed here element by
element in float64; a traced kernel's math rows are the same with the C pass forced off and on, and where
nothing can be built the monitor keeps numpy's passes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.native import cbuild, rowstats
from triton_trace.record.checks import mathvalues_ops

DTYPES = ("float16", "bfloat16", "float32", "float64")
# bfloat16 bit patterns: NaN, a negative NaN with payload, +-Inf, -0.0, +-the smallest subnormal, the largest
# subnormal, the largest finite
BF16_SPECIAL = np.array([0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x8001, 0x007F, 0x7F7F, 0xFF7F], np.uint16)


@pytest.fixture
def fn():
    lib = rowstats.library()
    if lib is None:
        pytest.skip(f"the C pass cannot be built here: {rowstats.failure()}")
    return lib


def _special(dtype) -> np.ndarray:
    f = np.finfo(dtype)
    return np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, f.smallest_subnormal, -f.smallest_subnormal,
                     f.tiny - f.smallest_subnormal, f.max, -f.max, f.tiny], dtype)


def _raw(rng, dtype: str, shape: tuple) -> np.ndarray:
    """Values as the interpreter holds them (bfloat16: uint16 bits), a random share of them special."""
    x = np.asarray(rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6))
    share = rng.choice([0.0, 0.02, 0.3])
    if dtype == "bfloat16":
        bits = np.array(x.astype(np.float32).view(np.uint32) >> 16, np.uint16)    # (truncated: any bits do)
        hit = np.asarray(rng.random(shape) < share)
        bits[hit] = rng.choice(BF16_SPECIAL, int(hit.sum()))
        return bits
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    hit = np.asarray(rng.random(shape) < share)
    x[hit] = rng.choice(_special(dtype), int(hit.sum()))
    return x


def _decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values, bfloat16 decoded here from its bits (the high half of a float32)."""
    if dtype == "bfloat16":
        return (np.asarray(raw).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(raw).astype(np.float64)


def _layout(rng, raw: np.ndarray) -> np.ndarray:
    """The same kind of array as a view numpy might hand over: transposed, reversed, sliced or broadcast."""
    pick = rng.integers(0, 5)
    if pick == 1 and raw.ndim >= 3:
        return np.swapaxes(raw, 1, 2)
    if pick == 2 and raw.ndim >= 2:
        return raw[:, ::-1]
    if pick == 3 and raw.ndim >= 2 and raw.shape[1] > 1:
        return raw[:, ::2]
    if pick == 4 and raw.ndim >= 2:                    # a dimension the block only broadcasts along
        return np.broadcast_to(raw[:, :1], raw.shape)
    return raw


def _expected(values: np.ndarray) -> tuple:
    """Per row of float64 ``values`` (every lane, broadcast lanes included): ints (COUNT, NAN, PINF, NINF, LANE,
    KIND, FIRST) and the finite minimum and maximum, a zero range unsigned, found by looking at each lane."""
    rows = values.reshape(values.shape[0], -1)
    ints = np.zeros((len(rows), 7), np.int64)
    lo, hi = np.full(len(rows), np.inf), np.full(len(rows), -np.inf)
    for r, row in enumerate(rows):
        ints[r, :4] = [row.size, np.isnan(row).sum(), (row == np.inf).sum(), (row == -np.inf).sum()]
        ints[r, 4:] = [-1, 0, -1]
        for k, v in enumerate(row):
            if np.isfinite(v):
                lo[r], hi[r] = min(lo[r], v), max(hi[r], v)
            elif ints[r, 4] < 0:
                ints[r, 4], ints[r, 5] = k, 1 if np.isnan(v) else 2 if v > 0 else 3
    return ints, np.where(lo == 0, 0.0, lo), np.where(hi == 0, 0.0, hi)


def _same(got: tuple, want: tuple, what: str) -> None:
    assert np.array_equal(got[0], want[0]), f"{what}: counts/lanes {got[0].tolist()} != {want[0].tolist()}"
    for g, w, name in ((got[1], want[1], "min"), (got[2], want[2], "max")):
        assert np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w)), f"{what}: {name} {g} != {w}"


def _both(fn, raw: np.ndarray, dtype: str, batched: bool, as_numpy=None) -> tuple:
    """The C pass's rows, numpy's (bfloat16 decoded to float32 first, as the fallback has it: ``as_numpy``
    where that must keep a broadcast) and the float64 values."""
    fmt = rowstats.BF16 if dtype == "bfloat16" else rowstats.FORMATS[np.dtype(dtype)]
    values = _decode(raw, dtype)
    if as_numpy is None:
        as_numpy = values.astype(np.float32) if dtype == "bfloat16" else raw
    numpy_rows = mathvalues_ops.row_stats(as_numpy, batched)
    return mathvalues_ops.native_stats(fn, raw, batched, fmt), numpy_rows, values


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_blocks_agree_with_numpy_and_with_each_lane(fn, dtype):
    rng = np.random.default_rng(DTYPES.index(dtype))
    for trial in range(150):
        shape = (int(rng.integers(1, 6)),) + tuple(int(s) for s in rng.integers(1, 7, size=rng.integers(0, 4)))
        raw = _layout(rng, _raw(rng, dtype, shape))
        c, numpy_rows, values = _both(fn, raw, dtype, batched=True)
        what = f"{dtype} trial {trial}: shape {raw.shape}, strides {raw.strides}"
        _same(c, numpy_rows, what + " (C vs numpy)")
        _same(c, _expected(values), what + " (C vs each lane)")


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_program_and_a_row_every_program_shares(fn, dtype):
    rng = np.random.default_rng(10 + DTYPES.index(dtype))
    for trial in range(40):
        block = tuple(int(s) for s in rng.integers(1, 9, size=rng.integers(0, 3)))
        raw = _raw(rng, dtype, block)              # not batched: the whole array is one program's block
        c, numpy_rows, values = _both(fn, raw, dtype, batched=False)
        _same(c, numpy_rows, f"{dtype} unbatched {block}")
        _same(c, _expected(values.reshape((1,) + block)), f"{dtype} unbatched {block} (each lane)")
        one = _raw(rng, dtype, (1,) + block)       # batched, the program axis broadcast: one row for all
        shared = np.broadcast_to(one, (5,) + block)
        as_numpy = np.broadcast_to(_decode(one, dtype).astype(np.float32), shared.shape) \
            if dtype == "bfloat16" else None
        c, numpy_rows, values = _both(fn, shared, dtype, batched=True, as_numpy=as_numpy)
        assert len(c[0]) == 1
        _same(c, numpy_rows, f"{dtype} shared {block}")
        _same(c, _expected(values[:1]), f"{dtype} shared {block} (each lane)")


def test_every_special_value_of_each_format_alone(fn):
    for dtype in DTYPES:
        raw = BF16_SPECIAL if dtype == "bfloat16" else _special(dtype)
        column = raw.reshape(-1, 1)                # one value per row
        c, numpy_rows, values = _both(fn, column, dtype, batched=True)
        _same(c, numpy_rows, dtype)
        _same(c, _expected(values), dtype + " (each lane)")


@triton.jit
def _mixed(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    big = x.to(tl.float16) * 1000.0                     # fp16 overflows to +-inf past 65504
    half = big - big                                    # inf - inf: NaN
    b = x.to(tl.bfloat16) * x.to(tl.bfloat16)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(3):                                  # one line, three results per program
        acc += tl.sqrt(x * (k - 1.0))                   # NaN where the product is negative
    d = x.to(tl.float64) / (x.to(tl.float64) - x.to(tl.float64))     # 0/0, +-x/0
    out = acc + half.to(tl.float32) + b.to(tl.float32) + d.to(tl.float32)
    tl.store(y_ptr + offs, out, mask=offs < n)


def _traced_rows(batch: bool) -> list:
    x = torch.randn(300, generator=torch.Generator().manual_seed(3)) * 40.0
    x[7], x[100], x[250] = 0.0, -0.0, 90.0
    y = torch.empty_like(x)
    triton_trace.trace(batch=batch)(_mixed)[(triton.cdiv(300, 64),)](x, y, 300, BLOCK=64)
    rows = triton_trace.current_trace().launches[0].meta["math_values"]
    triton_trace.reset()
    return rows


@pytest.mark.parametrize("batch", [True, False])
def test_a_traced_kernels_math_rows_are_the_same_with_the_c_pass_off_and_on(fn, monkeypatch, batch):
    calls = []
    real = rowstats.row_stats
    monkeypatch.setattr(rowstats, "row_stats", lambda *a: calls.append(a[2]) or real(*a))
    monkeypatch.setattr(rowstats, "DISABLED", True)
    off = _traced_rows(batch)
    assert not calls
    monkeypatch.setattr(rowstats, "DISABLED", False)
    on = _traced_rows(batch)
    assert {rowstats.BF16, 0, 2, 3} <= set(calls)      # every format went through the C pass
    assert on == off
    assert sum(e["nan"] for e in on) > 0 and sum(e["pinf"] + e["ninf"] for e in on) > 0


def test_without_a_compiler_the_monitor_keeps_numpys_passes(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rowstats, "_fn", None)
    monkeypatch.setattr(rowstats, "_failed", None)
    monkeypatch.setattr(rowstats, "DISABLED", False)
    monkeypatch.setattr(cbuild, "compiler", lambda: None)
    rows = _traced_rows(True)
    assert rowstats.library() is None and rowstats.failure().startswith("OSError: no C compiler")
    assert sum(e["nan"] for e in rows) > 0
    monkeypatch.setattr(rowstats, "DISABLED", True)        # numpy's passes by choice: the same rows
    assert _traced_rows(True) == rows
