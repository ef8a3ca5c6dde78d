"""The checks of issue 41 item 2, each on a buggy kernel and on its fixed twin (no finding): integer
division by zero and INT_MIN // -1 (int_division), a float division by zero named as the cause of a NaN/Inf,
two lanes of one store writing one address with different values (lane_conflict), and the size at which a
kernel's int32 offsets pass 2^31 (analysis/advice/predictions.py), checked against the kernel's offsets computed by
hand. Kernels: tests/kernels/check_kernels.py (and value_bugs.py), the bug's line marked ``# BUG``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.analysis.advice import predictions
from helpers.findings import runs, traced_report
from helpers.source import marked_line
from kernels import check_kernels as K
from kernels import value_bugs as V

I32_MIN = -(1 << 31)


def run(kernel, grid, *args, batch=True, **kw):
    trace, report = traced_report(kernel, grid, *args, batch=batch, **kw)
    return trace, report.findings


def program_runs(ids) -> list:
    return [[[a, 0, 0], [b, 0, 0]] for a, b in runs(ids)]


def not_counted(f):
    """The extent says plainly that its elements are not counted (never a count of 0)."""
    el = f.extent["elements"]
    assert el["count"] is None and el["not_counted"] and "elements not counted" in f.message, (el, f.message)
    assert " 0 element" not in f.message


def only(found, kind):
    got = [f for f in found if f.kind == kind]
    assert len(got) == 1 and len(found) == 1, [(f.kind, f.message) for f in found]
    return got[0]


# -- integer division --------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [True, False])
def test_an_integer_division_by_zero_that_is_stored(batch):
    x = torch.arange(100, dtype=torch.int32) * 7
    w = torch.randint(1, 9, (100,), dtype=torch.int32)
    w[37] = 0
    _, found = run(K.bucket, (4,), x, w, torch.empty(100, dtype=torch.int32), 100, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    assert f.severity == "error" and (f.program, f.line, f.tensor) == ((1, 0, 0), marked_line(K.bucket), "out_ptr")
    assert "int32 // by zero" in f.message and f"({37 * 7} // 0," in f.message
    assert "was stored to 'out_ptr'" in f.message
    assert f.count == 1 and "guard the divisor" in f.message
    out = torch.empty(100, dtype=torch.int32)
    _, found = run(K.bucket_guarded, (4,), x, w, out, 100, BLOCK=32, batch=batch)
    want = torch.where(w != 0, torch.div(x, torch.where(w != 0, w, 1), rounding_mode="trunc"), 0)
    assert found == () and torch.equal(out, want)


@pytest.mark.parametrize("batch", [True, False])
def test_a_zero_divisor_in_masked_lanes_is_not_a_finding(batch):
    # n = 100 in blocks of 32: the last program's 28 masked lanes load other=0 as the divisor
    x, w = torch.arange(100, dtype=torch.int32), torch.full((100,), 3, dtype=torch.int32)
    out = torch.empty(100, dtype=torch.int32)
    _, found = run(K.bucket, (4,), x, w, out, 100, BLOCK=32, batch=batch)
    assert found == () and torch.equal(out, torch.div(x, 3, rounding_mode="trunc"))


@pytest.mark.parametrize("batch", [True, False])
def test_int_min_divided_by_minus_one(batch):
    x = torch.arange(64, dtype=torch.int32)
    x[40] = I32_MIN
    w = torch.ones(64, dtype=torch.int32)
    w[40] = -1
    _, found = run(K.bucket, (2,), x, w, torch.empty(64, dtype=torch.int32), 64, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    assert f.program == (1, 0, 0) and f"({I32_MIN} // -1," in f.message
    assert "of the lowest int32 by -1 (the quotient does not fit)" in f.message
    w[40] = 1                                   # the fixed input: INT_MIN // 1 is defined
    _, found = run(K.bucket, (2,), x, w, torch.empty(64, dtype=torch.int32), 64, BLOCK=32, batch=batch)
    assert found == ()


@pytest.mark.parametrize("batch", [True, False])
def test_a_modulo_by_zero_that_addresses_memory(batch):
    x = torch.randn(100)
    _, found = run(K.wrap_gather, (4,), x, torch.empty(100), 100, 0, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    assert (f.program, f.line) == ((0, 0, 0), marked_line(K.wrap_gather))
    assert "int32 % by zero" in f.message and "addressed 'x_ptr'" in f.message
    assert f.count == 100 and f.extent["programs"]["count"] == 4          # every active lane of every program
    for kernel, period in ((K.wrap_gather, 7), (K.wrap_gather_guarded, 0)):
        out = torch.empty(100)
        _, found = run(kernel, (4,), x, out, 100, period, BLOCK=32, batch=batch)
        assert found == () and torch.equal(out, x[torch.arange(100) % max(period, 1)])


def test_a_float_division_by_zero_is_named_as_the_cause():
    x, y = torch.ones(100), torch.ones(100)
    y[3] = 0.0
    trace, found = run(K.float_ratio, (4,), x, y, torch.empty(100), 100, BLOCK=32)
    f = only(found, "nonfinite")
    assert f.line == marked_line(K.float_ratio)
    (r,) = trace.launches[0].meta["nonfinite"]
    assert r["birth"]["cause"] == "a float division by zero" and r["birth"]["operands"] == [1.0, 0.0]
    y[3] = 1e-30                                # 1 / 1e-30 overflows float32: Inf, but no zero divisor
    x[3] = 1e30
    trace, found = run(K.float_ratio, (4,), x, y, torch.empty(100), 100, BLOCK=32)
    (r,) = trace.launches[0].meta["nonfinite"]
    assert only(found, "nonfinite") and "cause" not in r["birth"]


# -- two lanes, one address ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [True, False])
def test_two_lanes_of_one_store_writing_one_address(batch):
    x = torch.randn(8, 20)
    _, found = run(K.row_sums_to_slots, (4,), x, torch.empty(4), 20, BLOCK=32, batch=batch)
    f = only(found, "lane_conflict")
    assert f.severity == "error" and (f.program, f.line, f.tensor) == ((0, 0, 0), marked_line(K.row_sums_to_slots),
                                                                       "out_ptr")
    assert f.lanes == ((0,), (1,)) and f.offsets == (0, 0)
    differ = [p for p in range(4) if x[2 * p].sum().item() != x[2 * p + 1].sum().item()]    # slot p: rows 2p, 2p+1
    assert f.count == 2 * len(differ) and f.extent["programs"]["count"] == len(differ) == 4
    sums = x.sum(dim=1)
    for s in sums[:2].tolist():                  # the two values program 0's lanes stored, from torch
        assert any(abs(float(part.split(" writes ")[1].split(")")[0].split(" and ")[0]) - s) < 1e-4
                   for part in f.message.split("block index ")[1:])
    out = torch.empty(8)
    _, found = run(K.row_sums_to_rows, (4,), x, out, 20, BLOCK=32, batch=batch)
    assert found == () and torch.allclose(out, sums, atol=1e-5)


@pytest.mark.parametrize("batch", [True, False])
def test_one_value_broadcast_to_one_address_is_fine(batch):
    x = torch.randn(8, 20)
    out = torch.empty(8)
    _, found = run(K.broadcast_row_max, (8,), x, out, 20, BLOCK=32, batch=batch)
    assert found == () and torch.equal(out, x.max(dim=1).values)


def test_an_exchange_of_many_lanes_into_one_slot():
    x = torch.arange(16, dtype=torch.int32)
    _, found = run(K.exchange_into_one_slot, (1,), x, torch.zeros(1, dtype=torch.int32), BLOCK=16)
    f = only(found, "lane_conflict")
    assert f.op == "atomic_xchg" and f.count == 16 and f.line == marked_line(K.exchange_into_one_slot)
    out = torch.zeros(1, dtype=torch.int32)
    _, found = run(K.add_into_one_slot, (1,), x, out, BLOCK=16)       # an add combines the lanes: fine
    assert found == () and out.item() == x.sum().item()


# -- int32 offsets at larger sizes ------------------------------------------------------------------------------
def _matrix_max_offset(M, N, bm=16, bn=32):
    """add_matrix's largest int32 offset, every lane of every program (masked ones too): by hand."""
    return (-(-M // bm) * bm - 1) * N + (-(-N // bn) * bn - 1)


@pytest.mark.parametrize("batch", [True, False])
def test_the_size_at_which_int32_offsets_wrap(batch):
    M, N = 64, 32
    x = torch.randn(M, N)
    trace, found = run(K.add_matrix, (M // 16, N // 32), x, torch.empty_like(x), M, N, BLOCK_M=16, BLOCK_N=32,
                       batch=batch)
    assert found == ()
    (e, e2) = predictions.limits(trace.launches[0])
    assert {e["tensor"], e2["tensor"]} == {"x_ptr", "y_ptr"} and e["max"] == _matrix_max_offset(M, N)
    assert e["args"] == ["M", "N"] and e["factor"] == 1.0
    at = e["wraps_at"]
    assert at == {"M": 65536, "N": 32769}
    assert _matrix_max_offset(at["M"], at["N"]) > 2**31 - 1                  # wraps there
    assert _matrix_max_offset(at["M"], at["N"] - 1) <= 2**31 - 1             # and not one column before
    assert "predicted to wrap when M*N >" in predictions.describe(e, "add_matrix")
    _, _ = run(K.add_matrix_int64, (M // 16, N // 32), x, torch.empty_like(x), M, N, BLOCK_M=16, BLOCK_N=32,
               batch=batch)
    trace, found = run(K.add_matrix_int64, (M // 16, N // 32), x, torch.empty_like(x), M, N, BLOCK_M=16,
                       BLOCK_N=32, batch=batch)
    assert found == () and predictions.limits(trace.launches[0]) == []


def test_a_padded_block_predicts_within_its_padding():
    M, N = 48, 40
    x = torch.randn(M, N)
    trace, _ = run(K.add_matrix, (3, 2), x, torch.empty_like(x), M, N, BLOCK_M=16, BLOCK_N=32)
    e = predictions.limits(trace.launches[0])[0]
    assert e["max"] == _matrix_max_offset(M, N) and e["args"] == ["M", "N"]
    # the true first M*N, scaling M and N as the prediction does: the fit is a prediction, within 2 %
    ratio = e["wraps_at"]["N"] / N
    k = 1.0
    while _matrix_max_offset(int(M * ratio * k), int(N * ratio * k)) <= 2**31 - 1:
        k *= 1.001
    assert abs(k - 1.0) < 0.02


def test_offsets_near_the_limit_are_a_hint():
    stride, N = 1 << 21, 48
    x = torch.randn(2 * stride, dtype=torch.float16)
    trace, found = run(K.copy_strided_rows, (2,), x, torch.empty(2 * N, dtype=torch.float16), stride, N, BLOCK=64)
    assert found == ()
    report = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()
    (h,) = [h for h in report["launches"][0]["hints"] if h["kind"] == "int32_offsets"]
    assert h["tensor"] == "x_ptr" and "growing as stride" in h["message"]
    e = predictions.limits(trace.launches[0])[0]
    # the largest int32 operand is row * stride of the last row (row 1); ``+ cols`` is a second, small one
    assert e["max"] == 1 * stride and e["wraps_at"] == {"stride": 2**31}


def test_the_records_survive_a_trace_file(tmp_path):
    x = torch.arange(64, dtype=torch.int32)
    w = torch.ones(64, dtype=torch.int32)
    w[5] = 0
    trace, _ = run(K.bucket, (2,), x, w, torch.empty(64, dtype=torch.int32), 64, BLOCK=32)
    triton_trace.save(trace, tmp_path / "t.tt")
    loaded = triton_trace.load(tmp_path / "t.tt")
    for key in ("intdiv", "int32_address"):
        assert loaded.launches[0].meta[key] == trace.launches[0].meta[key]
    assert [f.kind for f in triton_trace.analyze(loaded, layouts="model", what_if=False).findings] == ["int_division"]
    for name, (kernel, args, kw, key) in {
            "c": (K.row_sums_to_slots, (torch.randn(2, 20), torch.empty(1), 20), {"BLOCK": 32}, "lane_conflict"),
            "p": (K.variance_padded, (torch.randn(2, 20) + 3, torch.empty(2), 20), {"BLOCK": 32}, "padded_reduction"),
            "d": (K.tile_matmul, (torch.randn(16, 16), torch.randn(16, 16), torch.empty(16, 16)), {"BLOCK": 16},
                  "tf32_dot")}.items():
        trace, _ = run(kernel, (1,), *args, **kw)
        triton_trace.save(trace, tmp_path / f"{name}.tt")
        assert triton_trace.load(tmp_path / f"{name}.tt").launches[0].meta[key] == trace.launches[0].meta[key]


# -- TF32 dots ---------------------------------------------------------------------------------------------------
def _tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 cut to a 10-bit mantissa by frexp, toward zero, as wgmma reads a .tf32 operand ("will truncate
    lower 13 bits of the 32-bit input data", PTX ISA)."""
    m, e = torch.frexp(x.double())
    q = torch.sign(m) * torch.floor(m.abs() * 2**11) / 2**11
    return torch.ldexp(q, e.double()).float()


@pytest.mark.parametrize("batch", [True, False])
def test_a_float32_dot_at_the_default_precision_is_a_tf32_hint(batch):
    torch.manual_seed(0)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    trace, found = run(K.tile_matmul, (1,), a, b, torch.empty(32, 32), BLOCK=32, batch=batch)
    assert found == ()
    hints = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()["launches"][0]["hints"]
    (h,) = [h for h in hints if h["kind"] == "tf32_dot"]
    assert h["line"] == marked_line(K.tile_matmul) and "TF32" in h["message"]
    assert "input_precision='ieee'" in h["effect"]
    want = (_tf32(a).double() @ _tf32(b).double() - (a.double() @ b.double())).abs().max().item()
    (r,) = trace.launches[0].meta["tf32_dot"]
    assert r["checked"] == 1 and r["k"] == 32
    assert abs(r["max_abs"] - want) <= 1e-5 + 0.05 * want        # the float32 sums differ in their last bits
    assert abs(r["max_result"] - (a @ b).abs().max().item()) < 1e-4
    trace, found = run(K.tile_matmul_ieee, (1,), a, b, torch.empty(32, 32), BLOCK=32, batch=batch)
    assert found == () and "tf32_dot" not in trace.launches[0].meta


# -- reductions over padded lanes ------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [True, False])
def test_a_variance_that_sums_padded_lanes(batch):
    torch.manual_seed(1)
    x = torch.randn(6, 20) + 3.0
    _, found = run(K.variance_padded, (6,), x, torch.empty(6), 20, BLOCK=32, batch=batch)
    f = only(found, "padded_reduction")
    assert f.severity == "error" and (f.program, f.line) == ((0, 0, 0), marked_line(K.variance_padded))
    assert "tl.sum" in f.message and "other=0.0" in f.message
    assert f.count == 6 * 12 and f.extent["programs"]["count"] == 6     # 32 - 20 padded lanes in every row
    mean = x[0].sum() / 20
    contribution = float(f.message.split("they contribute ")[1].split(" ")[0])
    assert abs(contribution - 12 * mean.item() ** 2) < 1e-3 * 12 * mean.item() ** 2    # mean^2 per padded lane
    without = float(f.message.split("the real lanes alone give ")[1].split(")")[0])
    assert abs(without - ((x[0] - mean) ** 2).sum().item()) < 1e-3
    out = torch.empty(6)
    _, found = run(K.variance_masked, (6,), x, out, 20, BLOCK=32, batch=batch)
    assert found == () and torch.allclose(out, x.var(dim=1, unbiased=False), atol=1e-5)


@pytest.mark.parametrize("batch", [True, False])
def test_a_max_over_shifted_padding(batch):
    x = torch.rand(4, 20) + 0.5
    x[2] = -torch.rand(20) - 4.0                 # a row of negatives: the padded 0 - 1 = -1 wins the max
    out = torch.empty(4)
    _, found = run(K.max_of_shifted, (4,), x, out, 20, BLOCK=32, batch=batch)
    f = only(found, "padded_reduction")
    assert f.program == (2, 0, 0) and "tl.max" in f.message
    without = float(f.message.split("the real lanes alone give ")[1].split(")")[0])
    assert "(result -1.0," in f.message and abs(without - (x[2].max().item() - 1.0)) < 1e-6
    assert out[2].item() == -1.0
    x[2] = torch.rand(20) + 0.5                  # every row's max above 0: the padding never wins
    _, found = run(K.max_of_shifted, (4,), x, out, 20, BLOCK=32, batch=batch)
    assert found == () and torch.equal(out, x.max(dim=1).values - 1.0)


@pytest.mark.parametrize("batch", [True, False])
def test_padding_added_to_a_real_accumulator_is_fine(batch):
    x = torch.full((4, 300), 2.0)                # an accumulator with one value in every lane still varies
    out = torch.empty(4)
    _, found = run(V.sum_of_squares, (4,), x, out, 300, BLOCK=64, batch=batch)
    assert found == () and torch.equal(out, (x * x).sum(dim=1))


@pytest.mark.parametrize("batch", [True, False])
def test_an_integer_division_names_every_program_it_reaches(batch):
    x = torch.arange(128, dtype=torch.int32)
    w = torch.ones(128, dtype=torch.int32)
    zeros = [5, 6, 70, 127]                      # programs 0, 2 and 3 of four (blocks of 32)
    w[zeros] = 0
    _, found = run(K.bucket, (4,), x, w, torch.empty(128, dtype=torch.int32), 128, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    assert f.count == len(zeros) and f.program == (0, 0, 0)
    assert f.extent["programs"]["count"] == len({z // 32 for z in zeros}) and f.extent["exact"]
    assert [tuple(p) for p in f.extent["programs"]["first"]] == [(0, 0, 0), (2, 0, 0), (3, 0, 0)]


# -- the full extent of each recorded cause, against numpy ---------------------------------------------------
STRIDE = 1 << 20                 # k * STRIDE leaves int32 from k = 2048 on


@pytest.mark.parametrize("batch", [True, False])
def test_an_int32_overflow_names_every_program_and_element_it_reaches(batch):
    rng = np.random.default_rng(3)
    grid, block, n = 40, 32, 40 * 32 - 5
    k = rng.integers(0, 4096, grid).astype(np.int32)
    k[[0, 1]] = 2047, 2048                       # the last k that fits, the first that does not
    exact = k.astype(np.int64) * STRIDE
    hit = np.flatnonzero(exact > 2**31 - 1)      # the programs whose base wraps: every lane of each
    offs = (hit[:, None] * block + np.arange(block)).reshape(-1)
    offs = offs[offs < n]                        # the last program's tail is masked off
    out = torch.empty(n, dtype=torch.int32)
    _, found = run(K.scaled_rows, (grid,), torch.from_numpy(k), out, n, STRIDE=STRIDE, BLOCK=block, batch=batch)
    f = only(found, "overflow")
    x_ = f.extent
    assert x_["exact"] and "at least" not in f.message and f.line == marked_line(K.scaled_rows)
    assert f.program == (int(hit[0]), 0, 0) and f.count == len(offs)
    assert x_["programs"]["count"] == len(hit) and x_["programs"]["ranges"] == program_runs(hit)[:8]
    assert x_["programs"]["first"] == [[int(p), 0, 0] for p in hit[:8]]
    assert x_["elements"]["count"] == len(offs) == x_["elements"]["lanes"]
    assert x_["elements"]["ranges"] == runs(offs)[:8]
    wrapped = (exact[offs // block] + offs % block).astype(np.int32)     # what a GPU's int32 stores
    assert [e["offset"] for e in x_["elements"]["first"]] == offs[:8].tolist()
    assert [e["value"] for e in x_["elements"]["first"]] == wrapped[:8].tolist()
    assert np.array_equal(out.numpy()[offs], wrapped)
    assert f"{len(hit)} program(s)" in f.message and f"{len(offs)} element(s)" in f.message


@pytest.mark.parametrize("batch", [True, False])
def test_an_int32_overflow_in_some_lanes_counts_every_program_and_names_its_elements(batch):
    rng = np.random.default_rng(4)
    grid, block = 16, 64
    n = grid * block - 7
    k = rng.integers(0, 2048, n).astype(np.int32)
    bad = rng.choice(n, 23, replace=False)
    k[bad] = rng.integers(2048, 4096, len(bad))
    wraps = np.flatnonzero(k.astype(np.int64) * STRIDE > 2**31 - 1)
    progs = np.unique(wraps // block)
    _, found = run(K.scaled_lanes, (grid,), torch.from_numpy(k), torch.empty(n, dtype=torch.int32), n,
                   STRIDE=STRIDE, BLOCK=block, batch=batch)
    f = only(found, "overflow")
    x_ = f.extent
    assert x_["exact"] and f.count == len(wraps) == x_["elements"]["lanes"]
    assert x_["programs"]["count"] == len(progs) and x_["programs"]["ranges"] == program_runs(progs)[:8]
    assert x_["programs"]["first"] == [[int(p), 0, 0] for p in progs[:8]]
    # the recorder names the wrapped lanes: their elements, the values a GPU's int32 stores there
    assert x_["elements"]["count"] == len(wraps) and x_["elements"]["ranges"] == runs(wraps)[:8]
    assert [e["offset"] for e in x_["elements"]["first"]] == wraps[:8].tolist()
    wrapped = (k[wraps].astype(np.int64) * STRIDE).astype(np.int32)
    assert [e["value"] for e in x_["elements"]["first"]] == wrapped[:8].tolist()
    assert "not counted" not in f.message and f"{len(wraps)} element(s)" in f.message
    out = torch.empty(n, dtype=torch.int64)
    _, found = run(K.scaled_lanes_int64, (grid,), torch.from_numpy(k), out, n, STRIDE=STRIDE, BLOCK=block,
                   batch=batch)
    assert found == () and np.array_equal(out.numpy(), k.astype(np.int64) * STRIDE)


@pytest.mark.parametrize("batch", [True, False])
def test_a_modulo_by_zero_in_every_lane_names_the_element_every_lane_reads(batch):
    x = torch.randn(100)
    _, found = run(K.wrap_gather, (4,), x, torch.empty(100), 100, 0, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    el = f.extent["elements"]
    # numpy's offs % 0 is 0: every active lane of the four programs reads x[0]
    assert el["count"] == 1 and el["lanes"] == 100 == f.count and el["ranges"] == [[0, 0]]
    assert el["first"][0]["offset"] == 0 and el["first"][0]["value"] == pytest.approx(x[0].item())


@pytest.mark.parametrize("batch", [True, False])
def test_a_division_by_zero_in_some_lanes_names_its_elements(batch):
    x = torch.arange(128, dtype=torch.int32)
    w = torch.ones(128, dtype=torch.int32)
    zeros = [5, 6, 70, 127]
    w[zeros] = 0
    _, found = run(K.bucket, (4,), x, w, torch.empty(128, dtype=torch.int32), 128, BLOCK=32, batch=batch)
    f = only(found, "int_division")
    el = f.extent["elements"]
    assert f.count == 4 == el["lanes"] == el["count"] and el["ranges"] == runs(zeros)
    assert [e["offset"] for e in el["first"]] == zeros and "not counted" not in f.message


@pytest.mark.parametrize("batch", [True, False])
def test_a_lane_conflict_names_every_slot_two_lanes_disagree_on(batch):
    torch.manual_seed(5)
    programs = 12
    x = torch.randn(2 * programs, 20)
    x[6] = x[7]                                  # program 3's two rows agree: its slot is fine
    sums = x.sum(dim=1)
    _, found = run(K.row_sums_to_slots, (programs,), x, torch.empty(programs), 20, BLOCK=32, batch=batch)
    f = only(found, "lane_conflict")
    differ = np.flatnonzero((sums[0::2] != sums[1::2]).numpy())             # slot p: rows 2p and 2p + 1
    assert 3 not in differ and f.count == 2 * len(differ)
    x_ = f.extent
    assert x_["exact"] and x_["programs"]["count"] == len(differ)
    assert x_["programs"]["ranges"] == program_runs(differ)[:8]
    assert x_["elements"]["count"] == len(differ) and x_["elements"]["lanes"] == 2 * len(differ)
    assert x_["elements"]["ranges"] == runs(differ)[:8]
    first = x_["elements"]["first"]
    assert [e["offset"] for e in first] == np.repeat(differ, 2)[:8].tolist()
    want = [sums[2 * p + i].item() for p in differ for i in (0, 1)][:8]           # the two rows' sums, torch's
    assert [e["value"] for e in first] == pytest.approx(want, abs=1e-4)


def test_an_exchange_conflict_names_its_one_slot():
    x = torch.arange(16, dtype=torch.int32)
    _, found = run(K.exchange_into_one_slot, (1,), x, torch.zeros(1, dtype=torch.int32), BLOCK=16)
    el = only(found, "lane_conflict").extent["elements"]
    assert el["count"] == 1 and el["lanes"] == 16 and el["ranges"] == [[0, 0]]
    assert [e["value"] for e in el["first"]] == list(range(8))


@pytest.mark.parametrize("batch", [True, False])
def test_a_padded_reduction_says_its_elements_are_not_counted(batch):
    torch.manual_seed(1)
    rows = 9
    x = torch.randn(rows, 20) + 3.0
    _, found = run(K.variance_padded, (rows,), x, torch.empty(rows), 20, BLOCK=32, batch=batch)
    f = only(found, "padded_reduction")
    assert f.count == rows * 12 and f.extent["programs"]["ranges"] == program_runs(range(rows))
    not_counted(f)
    assert "not memory elements" in f.extent["elements"]["not_counted"]


@pytest.mark.parametrize("half", [True, False])
def test_a_load_and_a_store_of_one_line_are_not_taken_for_every_lane(half):
    """``x[j] = x[j] * 2`` with j wrapped in half of each program's lanes: the recorder's lanes (load's and
    store's together) equal one op's lanes, which must not read as "every lane of the load"."""
    grid, block, mult, n = 6, 16, 1_000_003, 1024
    k = np.full(grid * block, 5, dtype=np.int32)
    k[slice(1, None, 2) if half else slice(None)] = 3000      # 3000 * mult leaves int32; 5 * mult does not
    wraps = np.flatnonzero(k.astype(np.int64) * mult > 2**31 - 1)
    _, found = run(K.doubled_in_place, (grid,), torch.from_numpy(k), torch.randn(n), n, MULT=mult, BLOCK=block,
                   batch=False)
    (f,) = [f for f in found if f.kind == "overflow"]
    assert f.count == 2 * len(wraps) and f.extent["programs"]["count"] == grid      # a load and a store each
    j = (k.astype(np.int64) * mult).astype(np.int32).astype(np.int64) & (n - 1)    # a GPU's wrapped index
    el = f.extent["elements"]
    assert el["count"] == len(np.unique(j[wraps])) and el["lanes"] == f.count
    assert el["ranges"] == runs(j[wraps])[:8]
    if not half:
        assert el["count"] == 1
