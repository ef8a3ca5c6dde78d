"""Shape fuzzing with shrinking (triton_trace.fuzz) on kernels whose bugs appear only at some sizes or
layouts (tests/kernels/sizebugs.py): each bug is found and shrunk to its smallest failing case, and each
correct twin passes the same budget with no false positive."""
from __future__ import annotations

import pytest

import triton_trace
from kernels import sizebugs as S

pytest.importorskip("hypothesis")


def fuzz(run, reference, **kw):
    kw.setdefault("database", None)
    return triton_trace.fuzz(run, reference, **kw)


def test_missing_mask_is_found_at_the_smallest_size():
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        fuzz(lambda c: S.run_scale(S.scale_unmasked, c), S.scale_reference, dims={"n": (1, 5000)}, blocks=(64,),
             max_examples=60)
    assert ei.value.case.dims == {"n": 1} and "out_of_bounds" in str(ei.value)
    assert "triton_trace.fuzz.replay(run, {'n': 1}" in str(ei.value)


def test_masked_twin_passes_the_same_budget():
    result = fuzz(lambda c: S.run_scale(S.scale_masked, c), S.scale_reference, dims={"n": (1, 5000)}, blocks=(64,),
                  max_examples=60)
    assert result["examples"] == 60


def test_assumed_contiguous_rows_are_found_in_a_sliced_view():
    layouts = ("contiguous", "transposed", "sliced")
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        fuzz(lambda c: S.run_rows(S.rows_contiguous_only, c), S.rows_reference, dims={"m": (1, 64), "n": (1, 300)},
             blocks=(64,), layouts=layouts, max_examples=60)
    case = ei.value.case
    assert (case.dims, case.layout) == ({"m": 2, "n": 1}, "sliced")
    fuzz(lambda c: S.run_rows(S.rows_strided, c), S.rows_reference, dims={"m": (1, 64), "n": (1, 300)},
         blocks=(64,), layouts=layouts, max_examples=60)


def test_int32_index_overflow_shrinks_to_the_first_size_that_wraps():
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        fuzz(lambda c: S.run_square(S.square_index_i32, c), S.square_reference, dims={"n": (1, 100000)},
             blocks=(1024,), max_examples=40)
    assert ei.value.case.dims == {"n": 46342}          # 46341**2 is the first square past 2**31 - 1
    fuzz(lambda c: S.run_square(S.square_index_i64, c), S.square_reference, dims={"n": (1, 100000)},
         blocks=(1024,), max_examples=40)


def test_a_found_failure_comes_back_first_from_the_database(tmp_path):
    db = str(tmp_path / "hyp")
    args = (lambda c: S.run_scale(S.scale_unmasked, c), S.scale_reference)
    for run in range(2):
        with pytest.raises(triton_trace.FuzzFailure) as ei:
            triton_trace.fuzz(*args, dims={"n": (1, 5000)}, blocks=(64,), max_examples=60, seed=None, database=db)
        if run == 1:
            assert ei.value.first_failure.dims == {"n": 1}       # replayed from the database before anything new


def test_replay_and_the_pytest_decorator():
    with pytest.raises(triton_trace.FuzzFailure, match="out_of_bounds"):
        triton_trace.fuzz.replay(lambda c: S.run_scale(S.scale_unmasked, c), {"n": 65})
    assert triton_trace.fuzz.replay(lambda c: S.run_scale(S.scale_masked, c), {"n": 65}) is None

    @triton_trace.fuzz.given(dims={"n": (1, 2000)}, blocks=(64,), max_examples=20, database=None,
                             reference=S.scale_reference)
    def check(case):
        return S.run_scale(S.scale_masked, case)
    assert check()["examples"] == 20
