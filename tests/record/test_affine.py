"""Batched memory ops recognised as plain pointer arithmetic (record/batch/affine.py) take shortcuts: they must
find exactly the ops that are affine, and everything derived from the shortcut (bounds, alignment, the
lane encoding, the chunk check's ranges) must equal what the full scans give."""
import numpy as np
import pytest

from triton_trace.model.lanes import LaneWriter
from triton_trace.record.batch.affine import affine_rows


def _block(firsts, strides, shape):
    idx = np.indices(shape).reshape(len(shape), -1).T           # row-major lane indices, independently
    rows = [f + idx @ np.array(strides, dtype=np.int64) for f in firsts]
    return np.array(rows, dtype=np.int64).reshape((len(firsts),) + shape)


@pytest.mark.parametrize("shape,strides", [((64,), (4,)), ((16, 32), (4096, 4)), ((8, 1, 16), (-512, 0, 2)),
                                           ((4, 4, 8), (0, 64, 8)), ((128, 64), (2, 256))])
def test_affine_blocks_are_found_with_their_bounds_and_alignment(shape, strides):
    firsts = [1 << 20, (1 << 20) + 77 * 4096, (1 << 20) - 4096 * 3]
    a = _block(firsts, strides, shape)
    got = affine_rows(a)
    assert got is not None
    assert got.strides == tuple(s if n > 1 else 0 for s, n in zip(strides, shape))
    assert (got.lo, got.hi) == (int(a.min()), int(a.max()))
    assert np.array_equal(got.addrs, a) and not np.shares_memory(got.addrs, a)
    for size in (1, 2, 4, 8):
        aligned = not (np.bitwise_or.reduce(a.reshape(-1)) & (size - 1))
        assert (not got.bits & (size - 1)) == aligned


def test_blocks_that_are_not_one_pattern_are_refused():
    a = _block([0, 8192], (256, 4), (16, 16))
    b = a.copy()
    b[1, 15, 15] += 4                      # one lane off the pattern
    assert affine_rows(b) is None
    c = a.copy()
    c[1] = _block([8192], (512, 4), (16, 16))[0]       # the second program has other strides
    assert affine_rows(c) is None
    assert affine_rows(a[:, :2, :2]) is None            # too few lanes to be worth it


@pytest.mark.parametrize("masked", [False, True])
def test_the_lane_encoding_is_the_same_with_and_without_the_shortcut(masked):
    shape = (16, 32)
    offs = _block([0, 5000, 300, 10000], (64, 1), shape).reshape(4, -1)
    mask = np.ones(offs.shape, dtype=bool)
    if masked:
        mask[1, 100:] = False              # a prefix
        mask[2, ::3] = False               # an arbitrary mask
    outs = []
    for affine in (False, True):
        w = LaneWriter()
        w.add(offs, mask, shape=shape, affine=affine)
        outs.append(w.finish().to_arrays())
    assert outs[0].keys() == outs[1].keys()
    for k in outs[0]:
        np.testing.assert_array_equal(outs[0][k], outs[1][k], err_msg=k)


def test_traced_tiles_take_the_shortcut_and_record_what_one_program_at_a_time_records(monkeypatch):
    import torch
    import triton_trace
    from triton_trace.record.memory import attribution
    import kernels as K
    found, given = [], []
    monkeypatch.setattr(attribution, "affine_rows", lambda a: found.append(affine_rows(a)) or found[-1])
    real_described = attribution.described
    monkeypatch.setattr(attribution, "described", lambda *a: given.append(real_described(*a)) or given[-1])
    a, b = torch.randn(96, 64), torch.randn(64, 80)
    traces = []
    for batch in (True, False):
        triton_trace.reset()
        c = K.matmul(a, b, kernel=triton_trace.trace(K.make_matmul(), batch=batch), block_m=16, block_n=16, block_k=16)
        torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
        traces.append(triton_trace.current_trace())
    # every load and store of the tiles: described by the pointer arithmetic that made them (or probed)
    assert given and all(g is not None for g in given) and all(f is not None for f in found)
    from helpers.batch import assert_same_traces
    assert_same_traces(traces[1], traces[0])


def test_programs_meet_is_exactly_whether_intervals_of_two_programs_overlap():
    from triton_trace.model.overlap import programs_meet
    rng = np.random.default_rng(1)
    for trial in range(400):
        n = int(rng.integers(1, 12))
        s = rng.integers(0, 60, n)
        e = s + rng.integers(0, 10, n)
        p = rng.integers(0, 4, n)
        want = any(p[i] != p[j] and s[i] <= e[j] and s[j] <= e[i] for i in range(n) for j in range(i + 1, n))
        assert programs_meet(s, e, p) == want, (s, e, p)
    # offsets far apart (a masked lane's garbage address): no overflowing key, the lanes decide
    assert programs_meet(np.array([0, 0, -2 ** 62]), np.array([63, 63, -2 ** 62 + 63]), np.array([0, 1, 2]))


@pytest.mark.parametrize("shape,strides", [((16, 32), (64, 1)), ((32, 16), (1, 64)), ((8, 4, 16), (0, 32, -1)),
                                           ((64,), (1,)), ((1, 8), (5, 1))])
def test_runs_cover_exactly_the_elements_of_an_affine_access(shape, strides):
    from triton_trace.record.batch.affine import affine_runs
    firsts = np.array([1000, 5000, 1000 + 64 * 16])
    offs = _block(firsts, strides, shape).reshape(len(firsts), -1)
    starts, ends = affine_runs(firsts, strides, shape)
    for p in range(len(firsts)):
        covered = np.concatenate([np.arange(a, b + 1) for a, b in zip(starts[p], ends[p])])
        assert np.array_equal(np.unique(covered), np.unique(offs[p]))
    assert affine_runs(firsts, (64, 2), (16, 32)) is None          # no unit stride: the lanes decide


def test_value_blob_packs_blocks_back_to_back_and_grows():
    from triton_trace.record.valueblob import ValueBlob
    blob = ValueBlob(4)                       # room for 32 bytes: the blocks below outgrow it
    blocks = [np.arange(3, dtype=np.int8), np.full((2, 3), 1.5, dtype=np.float64),
              np.broadcast_to(np.float16(2.0), (5,)), np.arange(7, dtype=np.int32).reshape(7, 1)]
    starts = [blob.append(b) for b in blocks]
    data = blob.array()
    assert starts == list(np.cumsum([0] + [b.nbytes for b in blocks[:-1]]))     # packed, as concatenated
    for b, s in zip(blocks, starts):
        got = data[s:s + b.size * b.dtype.itemsize].view(b.dtype)
        assert np.array_equal(got, np.ascontiguousarray(b).reshape(-1))
    mark = blob.used
    blob.append(np.ones(100, dtype=np.int64))
    blob.used = mark                           # a rolled-back chunk
    assert len(blob.array()) == mark


def test_value_blob_hands_out_its_buffer_unless_most_of_what_it_wrote_was_rolled_back():
    from triton_trace.record.valueblob import ValueBlob
    blob = ValueBlob(1 << 16)                  # 512 KB reserved, a few KB written: no copy at the end
    blob.append(np.arange(1000, dtype=np.float32))
    assert np.shares_memory(blob.array(), blob.buf)
    blob.append(np.arange(10000, dtype=np.float64))
    blob.used = 4000                           # most of the written bytes rolled back: they stay resident
    out = blob.array()
    assert not np.shares_memory(out, blob.buf) and np.array_equal(out.view(np.float32), np.arange(1000))


@pytest.mark.parametrize("seed", range(4))
def test_run_scatter_writes_what_a_lane_by_lane_assignment_writes(seed):
    """affine.scatter (stores of described pointers, a run at a time) against ``view[offsets] = values``
    computed lane by lane here: rows that overlap inside a program (the last write wins), negative strides
    on the leading dimensions, the unit run in any dimension (a transposed tile); gather reads back the same
    elements; a block with no unit run, a unit run before the last dimension where lanes of one program meet
    (runs would not go in lane order), or a read-only view, is refused and nothing is written (gather may
    still read such a block, as one strided view: reads have no order)."""
    from triton_trace.record.batch.affine import gather, scatter
    rng = np.random.default_rng(seed)
    moved = refused = 0
    for _ in range(20):
        nd = int(rng.integers(2, 4))
        shape = tuple(int(v) for v in rng.integers(1, 5, nd - 1)) + (int(rng.integers(8, 20)),)
        strides = tuple(int(v) for v in rng.integers(-30, 30, nd - 1)) + (1,)
        unit = int(rng.integers(0, nd))          # the unit-stride run may be any dimension (a transposed block)
        order = [d for d in range(nd - 1)]
        order.insert(unit, nd - 1)
        shape, strides = tuple(shape[d] for d in order), tuple(strides[d] for d in order)
        programs = int(rng.integers(1, 4))
        idx = np.indices(shape).reshape(nd, -1)
        pat = (np.array(strides)[:, None] * idx).sum(axis=0)
        first = rng.integers(-pat.min(), -pat.min() + 200, programs)
        size = int(first.max() + pat.max()) + 1
        values = rng.standard_normal((programs,) + shape).astype(np.float32)
        want = np.zeros(size, np.float32)
        for p in range(programs):                 # lane by lane, in C order: the last write wins
            for lane, off in enumerate(first[p] + pat):
                want[off] = values.reshape(programs, -1)[p, lane]
        got = np.zeros(size, np.float32)
        if not scatter(got, first, strides, shape, values):
            # refused only for a run that is not the last dimension, where lanes of one program meet
            assert unit != nd - 1 and len(np.unique(pat)) < pat.size and not got.any()
            back = gather(got, first, strides, shape)      # (reads may still go as one strided block)
            assert back is None or np.array_equal(back.reshape(programs, -1), got[first[:, None] + pat[None, :]])
            refused += 1
            continue
        moved += unit != nd - 1
        np.testing.assert_array_equal(got, want)
        back = gather(got, first, strides, shape)
        np.testing.assert_array_equal(back.reshape(programs, -1), got[(first[:, None] + pat[None, :])])
    assert moved and (refused or seed)      # both paths are taken (the seeds are fixed)
    view = np.zeros(64, np.float32)
    assert not scatter(view, np.array([0]), (2, 3), (8, 8), np.ones((1, 8, 8), np.float32))      # no unit run
    view.setflags(write=False)
    assert not scatter(view, np.array([0]), (8, 1), (8, 8), np.ones((1, 8, 8), np.float32))


def test_programs_that_read_one_block_share_one_copy():
    """Every program at the same first offset (layer norm's weights): gather returns the lanes a
    lane-by-lane read gives, as one copy broadcast over the programs (no copy per program)."""
    from triton_trace.record.batch.affine import gather
    view = np.arange(500, dtype=np.float32)
    for strides, shape in (((1,), (64,)), ((40, 1), (4, 16)), ((1, 40), (16, 4))):
        idx = np.indices(shape).reshape(len(shape), -1)
        pat = (np.array(strides)[:, None] * idx).sum(axis=0)
        first = np.full(7, 13)
        got = gather(view, first, strides, shape)
        np.testing.assert_array_equal(got.reshape(7, -1), view[first[:, None] + pat[None, :]])
        assert got.strides[0] == 0 and got.shape == (7,) + shape
    got = gather(view, np.array([13, 14]), (1,), (64,))
    assert got.strides[0] != 0 and got[1, 0] == 14


@pytest.mark.parametrize("seed", range(6))
def test_programs_stepping_evenly_move_as_one_strided_block(seed):
    """A grid walking a tensor block after block (first offsets an even step apart, strides not negative):
    gather and scatter move the chunk as one strided view. Reads equal a lane-by-lane read; writes equal a
    lane-by-lane assignment in program order, the view taken only where no two lanes of the chunk meet
    (tiles that overlap, or a step of 0, go a run at a time, whose order is the lanes')."""
    from triton_trace.record.batch import affine
    rng = np.random.default_rng(seed)
    strided = runs = 0
    for _ in range(30):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 6, nd - 1)) + (int(rng.integers(8, 20)),)
        strides = tuple(int(v) for v in rng.integers(0, 40, nd - 1)) + (1,)
        if rng.random() < 0.3:                   # a transposed tile: the unit run first
            shape, strides = shape[::-1], strides[::-1]
        idx = np.indices(shape).reshape(len(shape), -1)
        pat = (np.array(strides)[:, None] * idx).sum(axis=0)
        programs = int(rng.integers(1, 6))
        step = int(rng.choice([0, int(pat.max()) + 1, int(rng.integers(1, pat.max() + 2))]))
        first = int(rng.integers(0, 50)) + step * np.arange(programs)
        size = int(first.max() + pat.max()) + 1
        view = rng.standard_normal(size).astype(np.float32)
        got = affine.gather(view, first, strides, shape)
        np.testing.assert_array_equal(got.reshape(programs, -1), view[first[:, None] + pat[None, :]])
        values = rng.standard_normal((programs,) + shape).astype(np.float32)
        want = view.copy()
        for p in range(programs):                # lane by lane, in C order: the last write wins
            want[first[p] + pat] = values[p].reshape(-1)
        whole = affine._strided(view, first, strides, shape, True)
        meet = len(np.unique(first[:, None] + pat[None, :])) < programs * pat.size
        assert whole is None or not meet         # a view to write only where no lanes meet
        if affine.scatter(view, first, strides, shape, values):
            np.testing.assert_array_equal(view, want)
            strided += whole is not None
            runs += whole is None
    assert strided and runs
