"""Compact lane storage: every encoding decodes to the lanes that went in (numpy-computed expectations),
regular blocks cost almost nothing, and damaged arrays are refused."""
import numpy as np
import pytest

from triton_trace.model.lanes import AFFINE, DELTA32, RAW, ROWSTRIDES, ROWS, LaneWriter, Lanes, lanes_from_flat


class Recorder:
    """A LaneWriter next to the flat arrays it should reproduce."""

    def __init__(self):
        self.w = LaneWriter()
        self.o, self.m = [], []

    def add(self, offsets, mask, shape=None):
        offsets = np.asarray(offsets, dtype=np.int64)
        R = offsets.shape[0]
        flat = offsets.reshape(R, -1)
        start = self.w.add(flat, np.broadcast_to(mask, offsets.shape).reshape(R, -1), shape=shape)
        assert start == sum(len(o) for o in self.o)
        self.o.append(flat.reshape(-1))
        self.m.append(np.broadcast_to(mask, offsets.shape).reshape(-1).copy())
        assert self.w.lanes == start + flat.size
        return start

    def expected(self):
        cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)
        return cat(self.o, np.int64), cat(self.m, bool)

    def finish(self):
        lanes = self.w.finish()
        o, m = self.expected()
        check(lanes, o, m)
        return lanes


def check(lanes: Lanes, o, m, takes=64, seed=1):
    assert lanes.size == len(o)
    full_o, full_m = lanes.offsets(), lanes.mask()
    assert full_o.dtype == np.int64 and full_m.dtype == np.bool_
    np.testing.assert_array_equal(full_o, o)
    np.testing.assert_array_equal(full_m, m)
    assert not full_o.flags.writeable and not full_m.flags.writeable
    rng = np.random.default_rng(seed)
    for _ in range(takes):
        s = int(rng.integers(0, len(o) + 1))
        c = int(rng.integers(0, len(o) - s + 1))
        to, tm = lanes.take(s, c)
        np.testing.assert_array_equal(to, o[s:s + c])
        np.testing.assert_array_equal(tm, m[s:s + c])
    # many ranges at once, in any order, overlapping
    if len(o):
        starts = rng.integers(0, len(o), 20)
        counts = rng.integers(0, len(o) - starts + 1)
        go, gm = lanes.gather(starts, counts)
        idx = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts)])
        np.testing.assert_array_equal(go, o[idx])
        np.testing.assert_array_equal(gm, m[idx])
    back = Lanes.from_arrays(lanes.to_arrays(), lanes.size)
    np.testing.assert_array_equal(back.offsets(), o)
    np.testing.assert_array_equal(back.mask(), m)


def kinds(lanes: Lanes) -> set:
    a = lanes.to_arrays()
    return set(a["sig_offs"][a["seg_sig"]].tolist())


# ------------------------------------------------------------------------------------------------------
# encodings
# ------------------------------------------------------------------------------------------------------
def test_contiguous_blocks_cost_almost_nothing():
    r = Recorder()
    n = 1024
    for p in range(200):
        r.add((p * n + np.arange(n))[None], True)
    lanes = r.finish()
    assert kinds(lanes) == {AFFINE}
    assert len(lanes.to_arrays()["seg_sig"]) == 1        # one segment: base per row only
    assert lanes.nbytes / lanes.size < 0.05


@pytest.mark.parametrize("seed", range(4))
def test_random_affine_tiles(seed):
    rng = np.random.default_rng(seed)
    r = Recorder()
    for _ in range(30):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 9, nd))
        strides = rng.integers(-50, 50, nd)
        R = int(rng.integers(1, 5))
        base = rng.integers(-1000, 1000, R)
        idx = np.indices(shape).reshape(nd, -1)
        off = base[:, None] + (strides[:, None] * idx).sum(axis=0)[None, :]
        r.add(off, np.ones(off.shape, bool), shape=shape)
    lanes = r.finish()
    assert kinds(lanes) == {AFFINE}


@pytest.mark.parametrize("seed", range(3))
def test_rows_given_by_first_offsets_and_strides_encode_as_their_lanes_would(seed):
    """add_affine (the recorder's path for described pointers: no offsets built) decodes to the lanes that
    first + pattern stand for, and to the same arrays as add() of those lanes with affine=True."""
    rng = np.random.default_rng(seed)
    lazy, eager = LaneWriter(), LaneWriter()
    o_all, m_all = [], []
    for _ in range(25):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(v) for v in rng.integers(1, 7, nd))
        strides = tuple(0 if n == 1 else int(v) for n, v in zip(shape, rng.integers(-40, 40, nd)))
        R = int(rng.integers(1, 6))
        first = rng.integers(-10_000, 10_000, R)
        idx = np.indices(shape).reshape(nd, -1)
        off = first[:, None] + (np.array(strides)[:, None] * idx).sum(axis=0)[None, :]
        n = off.shape[1]
        mask = rng.random((R, n)) < [0.0, 0.6, 1.0][int(rng.integers(0, 3))] if rng.random() < 0.5 else \
            np.arange(n)[None, :] < rng.integers(0, n + 1, (R, 1))           # prefixes, full and empty rows
        mask = np.broadcast_to(mask, (R, n))
        s1 = lazy.add_affine(first, strides, mask, shape)
        s2 = eager.add(off, mask, shape=shape, affine=True)
        assert s1 == s2
        o_all.append(off.reshape(-1))
        m_all.append(mask.reshape(-1))
    a, b = lazy.finish(), eager.finish()
    check(a, np.concatenate(o_all), np.concatenate(m_all))
    for name, arr in b.to_arrays().items():
        np.testing.assert_array_equal(a.to_arrays()[name], arr, err_msg=name)


def test_transposed_tile_is_affine_in_its_block_shape():
    M, N = 16, 32
    rm, rn = np.arange(M)[:, None], np.arange(N)[None, :]
    r = Recorder()
    for p in range(8):
        r.add((p * M + rm + rn * 4096).reshape(1, -1), True, shape=(M, N))   # column-major walk
    lanes = r.finish()
    assert kinds(lanes) == {AFFINE} and lanes.nbytes / lanes.size < 0.1
    # the same lanes without the block shape are not 1-D affine: stored per lane, decoded the same
    flat = lanes_from_flat(lanes.offsets(), lanes.mask(), counts=[M * N] * 8)
    assert kinds(flat) == {DELTA32}
    check(flat, lanes.offsets(), lanes.mask())


def test_gathers_store_int32_deltas_or_raw_offsets():
    rng = np.random.default_rng(0)
    r = Recorder()
    r.add(rng.integers(0, 1 << 20, (3, 100)), rng.random((3, 100)) < 0.5)          # fits int32 deltas
    r.add(np.array([[0, 1 << 40, -(1 << 50), 7]]), True)                          # does not
    r.add(np.array([[np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0]]), True)    # extremes
    lanes = r.finish()
    assert kinds(lanes) == {DELTA32, RAW}


def test_strides_per_row_when_rows_differ():
    r = Recorder()
    step = np.array([1, 2, 3, 3, 5])[:, None]
    r.add(np.arange(5)[:, None] * 1000 + np.arange(10)[None, :] * step, True)
    lanes = r.finish()
    assert ROWSTRIDES in kinds(lanes)


def test_batched_rows_mixing_affine_and_irregular_rows():
    rng = np.random.default_rng(3)
    off = np.arange(6)[:, None] * 64 + np.arange(64)[None, :]
    off[2] = rng.permutation(off[2])          # one row that is not affine
    off[4] = off[4] % 300                      # a wrapped row (x % M at the edge)
    mask = np.ones(off.shape, bool)
    mask[5, 40:] = False                       # a prefix
    mask[1, ::3] = False                       # scattered
    r = Recorder()
    r.add(off, mask, shape=(64,))
    r.add(off[:1], mask[:1], shape=(8, 8))
    lanes = r.finish()
    assert kinds(lanes) >= {AFFINE, DELTA32}


def test_masks_full_prefix_and_bit_packed():
    r = Recorder()
    n = 40
    off = np.arange(7)[:, None] * n + np.arange(n)
    m = np.ones((7, n), bool)
    m[1, 30:] = False             # prefix
    m[2] = False                  # empty prefix
    m[3, ::2] = False             # bits
    m[5, 5] = False               # bits
    r.add(off, m)
    r.add(off[:2], True)          # full rows after a coded segment
    r.add(off[:1], m[3:4])        # another bit-packed row in that segment
    r.add(off[:3], np.broadcast_to(np.arange(n) < 17, (3, n)))   # a broadcast view
    r.add(off[:1, :0], np.zeros((1, 0), bool))                    # an empty row
    lanes = r.finish()
    a = lanes.to_arrays()
    assert ROWS in set(a["sig_mask"].tolist()) and len(a["bits"]) > 0


def test_empty_rows_and_empty_writer():
    r = Recorder()
    assert r.add(np.zeros((3, 0), np.int64), np.zeros((3, 0), bool), shape=(4, 0)) == 0
    r.add(np.zeros((1, 1), np.int64) + 5, [[True]], shape=())
    r.add(np.zeros((2, 0), np.int64), np.zeros((2, 0), bool))
    lanes = r.finish()
    assert lanes.size == 1
    empty = LaneWriter().finish()
    assert empty.size == 0 and len(empty.offsets()) == 0 and len(empty.mask()) == 0
    check(Lanes.from_arrays(empty.to_arrays(), 0), np.zeros(0, np.int64), np.zeros(0, bool))


def test_scalar_ops_interleaved_with_blocks():
    r = Recorder()
    for p in range(50):
        r.add((p * 128 + np.arange(128))[None], True)
        r.add(np.array([[p]]), [[p % 3 != 0]], shape=())
        r.add((p * 128 + np.arange(128))[None] * 2, np.arange(128)[None] < 100)
    r.finish()


def test_rollback_forgets_blocks():
    r = Recorder()
    r.add((np.arange(64))[None], True)
    mark = r.w.mark()
    nbytes = r.w.nbytes
    r.w.add(np.arange(64)[None] + 64, True)                      # merges into the same segment
    r.w.add(np.random.default_rng(0).integers(0, 99, (2, 64)), np.arange(64) < 3)
    r.w.rollback(mark)
    assert r.w.lanes == 64 and r.w.nbytes == nbytes
    r.add(np.arange(64)[None] * 3, np.arange(64)[None] % 2 == 0)
    mark = r.w.mark()
    r.w.add(np.arange(64)[None] * 3, np.arange(64)[None] % 3 == 0)   # another bit row in the segment
    r.w.rollback(mark)
    r.add(np.arange(64)[None] * 3, np.arange(64)[None] % 5 == 0)     # numbered as the second bit row again
    r.finish()
    with pytest.raises(RuntimeError, match="finish"):
        r.w.add(np.arange(3)[None], True)


@pytest.mark.parametrize("seed", range(6))
def test_random_mixture_with_rollbacks(seed):
    """Blocks of every kind in random order, some rolled back; decoding matches what was kept."""
    rng = np.random.default_rng(100 + seed)
    r = Recorder()
    for _ in range(40):
        nd = int(rng.integers(0, 3))
        shape = tuple(int(v) for v in rng.integers(1, 6, nd))
        n = int(np.prod(shape)) if shape else 1
        R = int(rng.integers(1, 4))
        idx = np.indices(shape).reshape(nd, -1) if shape else np.zeros((0, 1), np.int64)
        strides = rng.integers(-9, 9, (1 if rng.random() < 0.7 else R, nd))
        off = rng.integers(-500, 500, (R, 1)) + strides @ idx
        if rng.random() < 0.3:
            off[rng.integers(0, R)] = rng.integers(-(1 << 40), 1 << 40, n)
        kind = rng.integers(0, 4)
        mask = (np.ones((R, n), bool) if kind == 0 else rng.random((R, n)) < 0.5 if kind == 1 else
                np.arange(n) < rng.integers(0, n + 1, (R, 1)) if kind == 2 else np.zeros((R, n), bool))
        if rng.random() < 0.2:
            mark = r.w.mark()
            r.w.add(off, mask, shape=shape)
            r.w.add(off[:1] * 3, ~mask[:1], shape=shape)
            r.w.rollback(mark)
        else:
            r.add(off, mask, shape=shape)
    r.finish()


def test_take_across_block_boundaries():
    r = Recorder()
    for p in range(10):
        r.add((p * 1000 + np.arange(10))[None] * (p + 1), np.arange(10)[None] < p)
    lanes = r.finish()
    o, m = r.expected()
    for s in range(0, 100, 7):
        for c in (0, 1, 9, 10, 11, 35, 100 - s):
            if s + c <= 100:
                to, tm = lanes.take(s, c)
                np.testing.assert_array_equal(to, o[s:s + c])
                np.testing.assert_array_equal(tm, m[s:s + c])
    with pytest.raises(IndexError):
        lanes.take(95, 6)
    with pytest.raises(IndexError):
        lanes.take(-1, 2)


def test_gather_whole_rows_in_any_order():
    """The op table's own ranges (whole rows, any order, a subset or all of them) decode row-wise."""
    rng = np.random.default_rng(7)
    r = Recorder()
    bounds = []
    for p in range(12):
        n = [16, 64, 5][p % 3]
        R = int(rng.integers(1, 4))
        off = np.arange(R)[:, None] * 1000 + np.arange(n) * (p % 4 + 1)
        if p % 5 == 0:
            off = rng.integers(0, 1 << 30, (R, n))
        mask = rng.random((R, n)) < [1.0, 0.5, 0.9][p % 3]
        start = r.add(off, mask)
        bounds += [(start + i * n, n) for i in range(R)]
    lanes = r.finish()
    o, m = r.expected()
    for pick in (rng.permutation(len(bounds)), rng.permutation(len(bounds))[:7], np.arange(len(bounds)),
                 np.array([3, 3, 1])):
        starts = np.array([bounds[i][0] for i in pick])
        counts = np.array([bounds[i][1] for i in pick])
        go, gm = lanes.gather(starts, counts)
        idx = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts)])
        np.testing.assert_array_equal(go, o[idx])
        np.testing.assert_array_equal(gm, m[idx])
    go, gm = lanes.gather([], [])
    assert len(go) == len(gm) == 0
    with pytest.raises(IndexError):
        lanes.gather([lanes.size - 1], [2])


def test_from_flat_compacts_and_honours_row_shapes():
    n = 256
    o = (np.arange(400)[:, None] * n + np.arange(n)).reshape(-1)
    m = np.ones(len(o), bool)
    m[-10:] = False
    lanes = lanes_from_flat(o, m)
    check(lanes, o, m)
    assert lanes.nbytes / lanes.size < 0.1
    tile = (np.arange(8)[:, None] * 100 + np.arange(8)).reshape(-1)
    two = np.concatenate([tile, tile + 5, np.arange(3)])
    shaped = lanes_from_flat(two, np.ones(len(two), bool), counts=[64, 64, 3], shapes=[(8, 8), (8, 8), (3,)])
    assert kinds(shaped) == {AFFINE}
    check(shaped, two, np.ones(len(two), bool))
    # shapes that do not fit their rows (a damaged op table) are taken as 1-D
    odd = lanes_from_flat(np.arange(7), np.ones(7, bool), counts=[3, 4], shapes=[(5,), (5,)])
    check(odd, np.arange(7), np.ones(7, bool))
    with pytest.raises(ValueError, match="sum"):
        lanes_from_flat(two, np.ones(len(two), bool), counts=[64])
    with pytest.raises(ValueError, match="1-D"):
        lanes_from_flat(two, np.ones(3, bool))


def test_equality_is_by_content():
    o = np.arange(2048)
    m = np.ones(2048, bool)
    a = lanes_from_flat(o, m)
    b = lanes_from_flat(o, m, counts=[2048])
    assert a == b and a != lanes_from_flat(o + 1, m)


# ------------------------------------------------------------------------------------------------------
# from_arrays refuses damaged arrays
# ------------------------------------------------------------------------------------------------------
@pytest.fixture
def sample():
    r = Recorder()
    rng = np.random.default_rng(5)
    r.add(np.arange(4)[:, None] * 64 + np.arange(64), np.arange(64) < np.array([[64], [10], [64], [64]]))
    r.add(rng.integers(0, 1 << 20, (2, 64)), rng.random((2, 64)) < 0.5)
    r.add(np.array([[0, 1 << 40, 5]]), True)
    r.add(np.arange(3)[:, None] * 1000 + np.arange(8) * np.array([[1], [2], [3]]), True)
    lanes = r.finish()
    return lanes.to_arrays(), lanes.size


def damaged(arrays, name, value):
    a = {k: v.copy() for k, v in arrays.items()}
    a[name] = value(a[name]) if callable(value) else value
    return a


def setitem(idx, v):
    def f(a):
        a[idx] = v
        return a
    return f


@pytest.mark.parametrize("name,value,match", [
    ("base", lambda a: a[:-1], "row bases"),
    ("base", lambda a: a.astype(np.int32), "must be int64"),
    ("sig_shape", lambda a: a[:, :4], "columns"),
    ("sig_offs", setitem(0, 9), "unknown encoding"),
    ("sig_mask", setitem(0, 7), "unknown encoding"),
    ("sig_ndim", setitem(0, 9), "unknown encoding"),
    ("sig_n", setitem(0, -1), "unknown encoding|row length"),
    ("sig_n", setitem(0, 63), "does not hold"),
    ("sig_shape", setitem((0, 7), 3), "malformed"),
    ("sig_shape", setitem((0, 0), -64), "malformed"),
    ("sig_strides", setitem((1, 0), 1), "malformed"),
    ("sig_offs", lambda a: a[:-1], "differ in length"),
    ("seg_sig", setitem(0, 99), "unknown signature"),
    ("seg_sig", setitem(0, -1), "unknown signature"),
    ("seg_rows", setitem(0, 0), "row count"),
    ("seg_rows", setitem(0, 1 << 60), "row count"),
    ("seg_rows", lambda a: a[:-1], "differ in length"),
    ("code", lambda a: a[:-1], "code holds"),
    ("code", setitem(0, 65), "exceeds"),
    ("code", setitem(1, -2), "out of order"),
    ("delta32", lambda a: a[:-1], "delta32 holds"),
    ("raw", lambda a: np.concatenate([a, a]), "raw holds"),
    ("bits", lambda a: a[:-1], "bits holds"),
    ("row_strides", lambda a: a[:1], "row_strides holds"),
    ("seg_rows", lambda a: a.astype(np.float64), "must be int64"),
    ("bits", lambda a: a.reshape(1, -1), "rank 1"),
])
def test_from_arrays_rejects_damaged_arrays(sample, name, value, match):
    arrays, size = sample
    with pytest.raises(ValueError, match=match):
        Lanes.from_arrays(damaged(arrays, name, value), size)


def test_from_arrays_rejects_wrong_size_and_missing_arrays(sample):
    arrays, size = sample
    Lanes.from_arrays(arrays, size)
    with pytest.raises(ValueError, match="lanes than the"):
        Lanes.from_arrays(arrays, size + 1)
    with pytest.raises(ValueError, match="missing"):
        Lanes.from_arrays({k: v for k, v in arrays.items() if k != "bits"}, size)
    with pytest.raises(ValueError, match="unknown"):
        Lanes.from_arrays({**arrays, "extra": np.zeros(1)}, size)
    with pytest.raises(ValueError, match="must be"):
        Lanes.from_arrays({**arrays, "base": [1, 2]}, size)


# ------------------------------------------------------------------------------------------------------
# Launch keeps its lanes compact and still reads back flat arrays
# ------------------------------------------------------------------------------------------------------
def _tile_launch():
    """Four programs, each loading an 8x16 tile of a 32x64 matrix then storing it transposed; lanes laid
    out op by op (program-major within an op, as a batched run records them), not row by row."""
    from triton_trace.model import KIND_CODE, Launch, TensorInfo, empty_ops
    P, M, N = 4, 8, 16
    rm, rn = np.arange(M)[:, None], np.arange(N)[None, :]
    load = np.stack([(p * M + rm) * 64 + rn for p in range(P)]).reshape(P, -1)
    store = np.stack([rn * 32 + p * M + rm for p in range(P)]).reshape(P, -1)
    offsets = np.concatenate([load.reshape(-1), store.reshape(-1)])
    mask = np.ones(len(offsets), bool)
    mask[-5:] = False
    ops = empty_ops(2 * P)
    for p in range(P):
        for seq, kind in enumerate(("load", "store")):
            i = 2 * p + seq
            ops["program"][i] = (p, 0, 0)
            ops["seq"][i], ops["kind"][i], ops["tensor"][i], ops["elem_bytes"][i] = seq, KIND_CODE[kind], seq, 4
            ops["ndim"][i], ops["shape"][i, :2] = 2, (M, N)
            ops["lane_start"][i], ops["lane_count"][i] = seq * P * M * N + p * M * N, M * N
            ops["value_dtype"][i], ops["file"][i] = -1, -1
    tensors = (TensorInfo("x", "float32", (32, 64), (64, 1), 0, 2048, 4),
               TensorInfo("y", "float32", (64, 32), (32, 1), 0, 2048, 4))
    lc = Launch.from_flat(kernel_name="tiles", source="", source_file="", source_line=0, grid=(P, 1, 1), args={},
                tensors=tensors, files=(), value_dtypes=(), ops=ops, offsets=offsets, mask=mask,
                values=np.zeros(0, np.uint8))
    return lc, offsets, mask


def test_launch_from_flat_arrays_keeps_tiles_compact():
    import dataclasses
    from triton_trace.model import lanes_from_ops
    lc, offsets, mask = _tile_launch()
    assert isinstance(lc.lanes, Lanes) and kinds(lc.lanes) == {AFFINE}       # 2-D strides found per row
    np.testing.assert_array_equal(lc.offsets, offsets)
    np.testing.assert_array_equal(lc.mask, mask)
    assert not lc.offsets.flags.writeable
    acc = lc.access(3)                        # program 1's store: its own lanes, in its block shape
    np.testing.assert_array_equal(acc.offsets, np.arange(16)[None, :] * 32 + 8 + np.arange(8)[:, None])
    assert acc.offsets.shape == acc.mask.shape == (8, 16) and acc.mask.all()
    assert not lc.access(7).mask.reshape(-1)[-5:].any()
    moved = dataclasses.replace(lc, lanes=lanes_from_ops(lc.ops, offsets + 1, lc.mask))
    np.testing.assert_array_equal(moved.offsets, offsets + 1)
    np.testing.assert_array_equal(moved.mask, mask)
    assert dataclasses.replace(lc, kernel_name="other").lanes is lc.lanes


def test_launch_needs_lanes():
    from triton_trace.model import Launch, empty_ops
    with pytest.raises(TypeError, match="lanes"):
        Launch(kernel_name="k", source="", source_file="", source_line=0, grid=(1, 1, 1), args={}, tensors=(),
               files=(), value_dtypes=(), ops=empty_ops())
    with pytest.raises(TypeError, match="Launch.from_flat"):
        Launch(kernel_name="k", source="", source_file="", source_line=0, grid=(1, 1, 1), args={}, tensors=(),
               files=(), value_dtypes=(), ops=empty_ops(), lanes=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="1-D"):
        Launch.from_flat(kernel_name="k", source="", source_file="", source_line=0, grid=(1, 1, 1), args={}, tensors=(),
               files=(), value_dtypes=(), ops=empty_ops(), offsets=np.zeros((2, 2), np.int64),
               mask=np.zeros((2, 2), bool))
