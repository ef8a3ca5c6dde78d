"""A spin lock in a batched chunk: the chunk splits at its first program again and again (it takes the lock, the
rest wait). After PEEL_LIMIT such splits in a row the rest of the chunk runs one program at a time, so a chunk of
n programs costs a few batched attempts instead of n; outputs and the whole trace stay those of one program at a
time."""
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.record import executor
from helpers.batch import assert_same_traces


@triton.jit
def _locked_add(data, lock, N: tl.constexpr):
    # Triton's test_atomic_cas: one program at a time in the critical section
    offs = tl.arange(0, N)
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(data + offs, tl.load(data + offs) + 1.0 + offs)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


def _count_chunks(monkeypatch) -> list:
    attempts = []
    real = executor._run_chunk
    monkeypatch.setattr(executor, "_run_chunk", lambda k, b, pids, *rest: attempts.append(len(pids)) or
                        real(k, b, pids, *rest))
    return attempts


def _run(batch, programs: int):
    triton_trace.reset()
    data, lock = torch.zeros(16), torch.zeros(1, dtype=torch.int32)
    trace(_locked_add, batch=batch)[(programs,)](data, lock, N=16)
    return data, lock, triton_trace.current_trace()


@pytest.mark.parametrize("chunk", [64, 200])
def test_a_spin_lock_chunk_runs_one_by_one_after_a_few_splits(chunk, monkeypatch):
    programs = 600
    attempts = _count_chunks(monkeypatch)
    data, lock, batched = _run(chunk, programs)
    # every program added 1 + offs once: independent of how they ran
    assert torch.equal(data, programs * (1.0 + torch.arange(16.0))) and int(lock) == 0
    chunks = -(-programs // chunk)
    # each chunk: one attempt per split at its first program, PEEL_LIMIT of them, then one by one
    # (one attempt per program, 600, before the limit)
    assert len(attempts) <= chunks * executor.PEEL_LIMIT, attempts
    ex = batched.launches[0].meta["execution"]
    assert ex["diverged_chunks"] >= chunks
    assert any("spin lock" in f["reason"] for f in ex["fallbacks"]), ex["fallbacks"]
    _, _, sequential = _run(False, programs)
    assert_same_traces(sequential, batched)


def test_the_limit_changes_only_how_many_attempts_a_chunk_takes(monkeypatch):
    """Without the limit (the behaviour before it) a chunk of 32 takes a batched attempt per program but the
    last (31); with it, PEEL_LIMIT. The outputs and the trace are the same either way."""
    attempts = _count_chunks(monkeypatch)
    got, peel_limit = {}, executor.PEEL_LIMIT
    for limit in (10 ** 9, peel_limit):
        monkeypatch.setattr(executor, "PEEL_LIMIT", limit)
        attempts.clear()
        data, _, t = _run(32, 32)
        got[limit] = (len(attempts), data, t)
    (n_all, d_all, t_all), (n_lim, d_lim, t_lim) = got[10 ** 9], got[peel_limit]
    assert n_all == 31 and n_lim == peel_limit
    assert torch.equal(d_all, 32 * (1.0 + torch.arange(16.0))) and torch.equal(d_lim, d_all)
    assert_same_traces(t_all, t_lim)
