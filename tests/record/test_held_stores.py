"""A batched chunk holds its stores of whole blocks and writes them when the chunk is kept
(record/interp/proxy.py, ``_hold``): no copy of what they overwrite is made. Whatever else touches the
storage in the same chunk (a load, an atomic, an unheld store, the chunk check's fix-up) must see the
bytes a program-order run leaves, and a chunk that fails or is undone must leave nothing of them. Each
case is compared with one program at a time (``batch=False``), and with values computed here by torch."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.record.batch import affine
from helpers.batch import assert_same_traces, run_both

N, BLOCK = 4096, 256
GRID = (N // BLOCK,)


def _both(kernel, args, outputs=(1,)):
    """``kernel(*args)`` one program at a time and in chunks of 16, each on fresh copies of the arguments at
    the positions ``outputs``: [(outputs, trace)] * 2, the outputs a tensor, or a tuple of several."""
    def run(o):
        fresh = [a.clone() if i in outputs else a for i, a in enumerate(args)]
        trace(kernel, **o)[GRID](*fresh)
        outs = tuple(fresh[i] for i in outputs)
        return outs[0] if len(outs) == 1 else outs
    return run_both(run, 16)


@triton.jit
def _store_then_read(x_ptr, out_ptr, out2_ptr, BLOCK: tl.constexpr, PREVIOUS: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + 1)
    got = tl.load(out_ptr + offs)                                     # this program's own store
    if PREVIOUS:                                                      # the previous program's store instead
        got = tl.load(out_ptr + offs - BLOCK, mask=offs >= BLOCK, other=-5.0)
    tl.store(out2_ptr + offs, got * 2)


@pytest.mark.parametrize("previous", [False, True])
def test_a_load_after_a_held_store_reads_what_was_stored(previous):
    """A program reading its own store stays batched (the load writes the held store first); reading the
    previous program's makes the chunk run one program at a time, with the same values."""
    x = torch.randn(N)
    want_out = x + 1
    want2 = (torch.cat([torch.full((BLOCK,), -5.0), want_out[:-BLOCK]]) if previous else want_out) * 2
    (seq, t1), (bat, t2) = _both(_store_then_read, (x, torch.zeros(N), torch.zeros(N), BLOCK, previous), outputs=(1, 2))
    for a, b, want in zip(seq, bat, (want_out, want2)):
        assert torch.equal(a, want) and torch.equal(b, want)
    assert_same_traces(t1, t2)
    ex = t2.launches[0].meta["execution"]
    assert bool(ex["fallbacks"]) == previous, ex


@triton.jit
def _store_then_add(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)
    tl.atomic_add(out_ptr + offs, 1.0)                                # the interpreter's own C++ atomic


def test_an_atomic_after_a_held_store_updates_the_stored_value():
    x = torch.randn(N)
    (seq, t1), (bat, t2) = _both(_store_then_add, (x, torch.full((N,), 9.0), BLOCK))
    assert torch.equal(seq, x + 1) and torch.equal(bat, x + 1)
    assert_same_traces(t1, t2)


@triton.jit(debug=True)
def _store_then_assert(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * 3)
    tl.device_assert(x < 100.0, "x must stay below 100")


@pytest.mark.parametrize("batch", [False, 16])
def test_a_failing_chunk_leaves_what_the_completed_programs_stored(batch):
    x = torch.randn(N)
    x[5 * BLOCK + 17] = 1000.0                                        # program 5 fails after its store
    out = torch.full((N,), -1.0)
    triton_trace.reset()
    with pytest.raises(Exception, match="x must stay below 100"):
        trace(_store_then_assert, batch=batch)[GRID](x, out, BLOCK)
    want = torch.full((N,), -1.0)
    want[:6 * BLOCK] = x[:6 * BLOCK] * 3                               # programs 0-4, and 5's store before its assert
    assert torch.equal(out, want)
    lc = triton_trace.current_trace().launches[-1]
    assert not lc.completed and lc.recorded_programs == 6


def test_a_batched_vector_add_copies_nothing_it_overwrites(monkeypatch):
    """The chunk's two loads read the inputs; its store is held, so no gather of the output's old bytes."""
    calls = []
    real = affine.gather
    monkeypatch.setattr(affine, "gather", lambda view, *a, **k: (calls.append(view.ctypes.data), real(view, *a, **k))[1])
    x, y = torch.randn(N), torch.randn(N)
    out = torch.full((N,), 3.0)
    triton_trace.reset()
    trace(_add, batch=N // BLOCK)[GRID](x, y, out, BLOCK)
    assert torch.equal(out, x + y)
    assert triton_trace.current_trace().launches[0].meta["execution"]["batched_programs"] == N // BLOCK
    assert sorted(calls) == sorted([x.data_ptr(), y.data_ptr()])


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


@triton.jit
def _twice_then_read(x_ptr, out_ptr, sums_ptr, BLOCK: tl.constexpr):
    # two held stores to one storage in a chunk, programs overlapping by half a block, then a read of it
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)
    tl.store(out_ptr + offs + BLOCK // 2, x * 10)
    tl.store(sums_ptr + pid, tl.sum(tl.load(out_ptr + offs), axis=0))


def test_held_stores_to_one_storage_keep_their_order():
    x = torch.randn(N)
    # one program after another, independently of the tool
    out, sums = torch.zeros(N + BLOCK), torch.zeros(GRID[0])
    for p in range(GRID[0]):
        lo = p * BLOCK
        out[lo:lo + BLOCK] = x[lo:lo + BLOCK]
        out[lo + BLOCK // 2:lo + BLOCK // 2 + BLOCK] = x[lo:lo + BLOCK] * 10
        sums[p] = out[lo:lo + BLOCK].sum()
    (seq, t1), (bat, t2) = _both(_twice_then_read, (x, torch.zeros(N + BLOCK), torch.zeros(GRID[0]), BLOCK), outputs=(1, 2))
    assert torch.equal(seq[0], out) and torch.equal(bat[0], out)
    torch.testing.assert_close(seq[1], sums)
    assert torch.equal(seq[1], bat[1])
    assert_same_traces(t1, t2)


@triton.jit
def _masked_trips(x_ptr, out_ptr, trips_ptr, BLOCK: tl.constexpr):
    # programs run different numbers of trips (a masked loop): each trip's store is held for the programs
    # still running; the others sit it out and keep their bytes
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    for t in range(tl.load(trips_ptr + pid)):
        acc = acc * 0.5 + t
        tl.store(out_ptr + offs, acc)


def test_stores_of_a_masked_loop_trip_are_held_for_the_running_programs():
    x = torch.randn(N)
    trips = torch.arange(GRID[0], dtype=torch.int32) % 4
    want = torch.full((N,), 8.0)
    for p in range(GRID[0]):
        acc = x[p * BLOCK:(p + 1) * BLOCK].clone()
        for t in range(int(trips[p])):
            acc = acc * 0.5 + t
            want[p * BLOCK:(p + 1) * BLOCK] = acc
    (seq, t1), (bat, t2) = _both(_masked_trips, (x, torch.full((N,), 8.0), trips, BLOCK))
    assert torch.equal(seq, want) and torch.equal(bat, want)
    assert_same_traces(t1, t2)
    assert t2.launches[0].meta["execution"]["batched_programs"] == GRID[0]


@triton.jit
def _twice(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x)
    tl.store(out_ptr + offs + BLOCK // 2, x * 10)


def test_the_chunk_check_fixes_up_shared_elements_after_the_held_stores():
    """Both stores held, programs sharing half blocks: the chunk stays batched and each shared element ends
    with its sequentially last writer's value (the check writes the held stores before its fix-up)."""
    x = torch.randn(N)
    want = torch.zeros(N + BLOCK)
    for p in range(GRID[0]):
        lo = p * BLOCK
        want[lo:lo + BLOCK] = x[lo:lo + BLOCK]
        want[lo + BLOCK // 2:lo + BLOCK // 2 + BLOCK] = x[lo:lo + BLOCK] * 10
    (seq, t1), (bat, t2) = _both(_twice, (x, torch.zeros(N + BLOCK), BLOCK))
    assert torch.equal(seq, want) and torch.equal(bat, want)
    assert_same_traces(t1, t2)
    ex = t2.launches[0].meta["execution"]
    assert ex["batched_programs"] == GRID[0] and not ex["fallbacks"], ex


def test_the_launch_s_memory_is_freed_when_the_launch_is_without_the_cycle_collector():
    """The launch's memory holds views of the caller's storages (an output of hundreds of MB): nothing may
    tie it into a reference cycle, or it stays until Python's cycle collector happens to run."""
    import gc
    import warnings
    from triton_trace.record.memory.space import HostMemory

    def memories():           # (isinstance on every object wakes torch's deprecated module attributes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [o for o in gc.get_objects() if isinstance(o, HostMemory)]
    x, y = torch.randn(N), torch.randn(N)
    gc.collect()
    before = {id(o) for o in memories()}    # (earlier tests' failures keep theirs)
    gc.disable()
    try:
        triton_trace.reset()
        out = torch.zeros(N)
        trace(_add, batch=16)[GRID](x, y, out, BLOCK)
        triton_trace.reset()
        alive = [o for o in memories() if id(o) not in before]
    finally:
        gc.enable()
    assert torch.equal(out, x + y)
    assert alive == []


def test_held_stores_of_a_launch_that_keeps_its_inputs():
    """trace(inputs=True) copies a storage into its buffer when first written: the held stores land there,
    the caller's tensor gets them at the end, and the kept inputs are the bytes before the launch."""
    x, y = torch.randn(N), torch.randn(N)
    out = torch.full((N,), 5.0)
    triton_trace.reset()
    trace(_add, batch=16, inputs=True)[GRID](x, y, out, BLOCK)
    assert torch.equal(out, x + y)
    lc = triton_trace.current_trace().launches[-1]
    assert lc.meta["execution"]["batched_programs"] == GRID[0]
    kept = lc.inputs.view(np.float32)
    assert (kept == 5.0).sum() == N                                   # out as the launch found it
    assert torch.equal(torch.from_numpy(lc.finals.view(np.float32).copy()), x + y)
