"""triton_trace.fuzz with the README's defaults (issue 43, bug 1): a seed and an example database together,
the same cases for the same seed, the saved failure first next run, and a printed replay line that, pasted
as it is, raises the failure again. The truth is the planted bug of tests/kernels/sizebugs.py: a store with
no mask fails exactly when n is not a multiple of the block (64)."""
from __future__ import annotations

import pytest

import triton_trace
from kernels import sizebugs as S

pytest.importorskip("hypothesis")

DIMS = {"n": (1, 5000)}


def scale_unmasked_run(case):
    return S.run_scale(S.scale_unmasked, case)


def scale_masked_run(case):
    return S.run_scale(S.scale_masked, case)


def drawn(seed, database, examples=12):
    """The sizes a passing fuzz draws, in order."""
    sizes = []

    def run(case):
        sizes.append(case["n"])
        return scale_masked_run(case)
    triton_trace.fuzz(run, S.scale_reference, dims=DIMS, blocks=(64,), max_examples=examples, seed=seed,
                      database=database)
    return sizes


def test_the_defaults_fuzz_with_a_seed_and_a_database(tmp_path, monkeypatch):
    """fuzz(...) as the README writes it: seed=0 and the default database (in the working folder)."""
    monkeypatch.chdir(tmp_path)
    result = triton_trace.fuzz(scale_masked_run, S.scale_reference, dims=DIMS, blocks=(64,), max_examples=10)
    assert result["examples"] == 10


def test_the_same_seed_draws_the_same_cases_with_a_database(tmp_path):
    db = str(tmp_path / "db")
    first, again = drawn(0, db), drawn(0, db)
    assert first == again and len(first) == 12
    assert drawn(0, None) == first               # the database changes nothing a passing run draws
    assert drawn(1, db) != first


# sizes from one block up, no block sizes to draw around: the smallest failing size, 65, is not among the
# special sizes, so a fresh run meets it only by shrinking, and a run that starts with it replayed it
FROM_A_BLOCK = {"n": (64, 5000)}


def unmasked(seed=0, database=None):
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        triton_trace.fuzz(scale_unmasked_run, S.scale_reference, dims=FROM_A_BLOCK, max_examples=60, seed=seed,
                          database=database)
    assert ei.value.case.dims == {"n": 65}
    return ei.value.first_failure.dims


def test_a_seeded_run_tries_the_saved_failure_first(tmp_path):
    db = str(tmp_path / "db")
    fresh = unmasked()
    assert fresh != {"n": 65}
    assert unmasked(database=db) == fresh            # an empty database: the seed's own draws
    assert unmasked(database=db) == {"n": 65}        # the saved failure, before anything new


def test_another_targets_passing_run_keeps_a_saved_failure(tmp_path):
    """Every fuzz() runs one inner function: the database keys each target apart, so a passing target
    neither replays another's failure nor drops it from the database."""
    db = str(tmp_path / "db")
    unmasked(database=db)
    triton_trace.fuzz(scale_masked_run, S.scale_reference, dims=FROM_A_BLOCK, max_examples=5, database=db)
    assert unmasked(database=db) == {"n": 65}


def test_fuzz_given_with_its_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @triton_trace.fuzz.given(dims=DIMS, blocks=(64,), max_examples=8, reference=S.scale_reference)
    def test_masked(case):
        return scale_masked_run(case)
    assert test_masked()["examples"] == 8


def test_the_printed_replay_line_pasted_raises_the_same_failure():
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        triton_trace.fuzz(scale_unmasked_run, S.scale_reference, dims=DIMS, blocks=(64,), max_examples=60,
                          database=None)
    line = str(ei.value).split("replay it: ", 1)[1].strip()
    assert line.startswith("triton_trace.fuzz.replay(scale_unmasked_run, {'n': 1},")
    assert "reference=scale_reference" in line
    namespace = {"triton_trace": triton_trace, "scale_unmasked_run": scale_unmasked_run,
                 "scale_reference": S.scale_reference}
    with pytest.raises(triton_trace.FuzzFailure) as again:
        exec(line, namespace)
    assert again.value.case.dims == {"n": 1} and "out_of_bounds" in str(again.value)
    assert triton_trace.fuzz.replay(scale_masked_run, {"n": 65}, reference=S.scale_reference) is None


def test_a_replay_compares_with_the_reference_it_names():
    """A kernel without findings whose outputs are wrong: only the reference the line names catches it."""
    def doubled_wrong(case):
        return scale_masked_run(case) + 1
    assert triton_trace.fuzz.replay(doubled_wrong, {"n": 64}) is None
    with pytest.raises(triton_trace.FuzzFailure, match="differs from the reference"):
        triton_trace.fuzz.replay(doubled_wrong, {"n": 64}, reference=S.scale_reference)


def test_the_replay_line_of_fuzz_given_names_the_test_function():
    @triton_trace.fuzz.given(dims=DIMS, blocks=(64,), max_examples=60, database=None, reference=S.scale_reference)
    def test_unmasked(case):
        return scale_unmasked_run(case)
    with pytest.raises(triton_trace.FuzzFailure) as ei:
        test_unmasked()
    line = str(ei.value).split("replay it: ", 1)[1].strip()
    assert line.startswith("triton_trace.fuzz.replay(test_unmasked.__wrapped__, {'n': 1},")
    with pytest.raises(triton_trace.FuzzFailure):
        exec(line, {"triton_trace": triton_trace, "test_unmasked": test_unmasked, "scale_reference": S.scale_reference})
