"""A chunk's ``tl.dot``: one stacked matmul gives every program's product bit for bit, compared with the
product of each block alone (numpy on a lone block, as Triton's interpreter computes it) and with tracing one
program at a time; a kind of operands whose stacked product differs falls back to one product per program."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as ti

import triton_trace
from triton_trace.record.batch import dot as batchdot
from helpers.batch import assert_same_traces



def _lone(x: np.ndarray) -> np.ndarray:
    """``x`` copied to a C-contiguous block at a 64-byte boundary, as a program alone holds it."""
    raw = np.empty(x.nbytes + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def _triton_dot(builder, a, b, d, *args):
    return ti.InterpreterBuilder.create_dot(builder, a, b, d, *args)


def _handles(rng, programs, m, k, n, dtype):
    if dtype == "int8":
        a = rng.integers(-100, 100, (programs, m, k)).astype(np.int8)
        b = rng.integers(-100, 100, (programs, k, n)).astype(np.int8)
        return ti.TensorHandle(a, tl.int8), ti.TensorHandle(b, tl.int8), ti.TensorHandle(
            np.zeros((programs, m, n), np.int32), tl.int32)
    np_t, tl_t = {"fp16": (np.float16, tl.float16), "fp32": (np.float32, tl.float32),
                  "fp64": (np.float64, tl.float64)}[dtype]
    scale = rng.choice([1e-3, 1.0, 1e3])
    a = (rng.standard_normal((programs, m, k)) * scale).astype(np_t)
    b = rng.standard_normal((programs, k, n)).astype(np_t)
    acc_np, acc_tl = (np.float64, tl.float64) if dtype == "fp64" else (np.float32, tl.float32)
    d = rng.standard_normal((programs, m, n)).astype(acc_np)
    return ti.TensorHandle(a, tl_t), ti.TensorHandle(b, tl_t), ti.TensorHandle(d, acc_tl)


SHAPES = [(m, k, n) for m in (1, 16, 17, 64, 128) for k in (8, 16, 31, 64) for n in (1, 16, 33, 64, 128)]


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64", "int8"])
def test_stacked_products_equal_each_block_alone(dtype):
    rng = np.random.default_rng(7)
    builder = ti.InterpreterBuilder()
    for m, k, n in SHAPES:
        programs = int(rng.integers(2, 24))
        a, b, d = _handles(rng, programs, m, k, n, dtype)
        if rng.random() < 0.3:        # an operand every program shares (its program axis is 1)
            b = ti.TensorHandle(b.data[:1].copy(), b.dtype)
        kind = batchdot._kind(batchdot.aligned_items(a), batchdot.aligned_items(b), batchdot.aligned_items(d))
        batchdot._stacked_ok.pop(kind, None)
        checked = batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), None).data
        assert batchdot._stacked_ok[kind], f"{dtype} {m}x{k}x{n}: the stacked product differs from the blocks'"
        stacked = batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), None).data
        for p in range(programs):
            bp = b.data[p if len(b.data) > 1 else 0]
            want = np.matmul(_lone(a.data[p]), _lone(bp), dtype=d.data.dtype) + d.data[p]
            assert stacked[p].tobytes() == want.tobytes(), f"{dtype} {m}x{k}x{n} program {p}"
            assert checked[p].tobytes() == want.tobytes()


def test_programs_sitting_out_a_trip_get_zeros_and_the_others_their_products():
    rng = np.random.default_rng(3)
    builder = ti.InterpreterBuilder()
    a, b, d = _handles(rng, 9, 32, 16, 32, "fp32")
    active = np.array([True, False, True, True, False, False, True, False, True])
    for _ in range(2):                # the first call checks the kind, the second uses the stacked product
        out = batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), active).data
        for p in range(9):
            want = np.matmul(_lone(a.data[p]), _lone(b.data[p])) + d.data[p] if active[p] else np.zeros((32, 32))
            assert out[p].tobytes() == want.astype(np.float32).tobytes()


def test_a_kind_whose_stacked_product_differs_is_done_per_program():
    """A matmul that sums differently alone than stacked (here: simulated, a lone block's product is a bit
    higher) is caught by the first comparison, and the per-program products (Triton's own create_dot on
    each block) are used from then on."""
    rng = np.random.default_rng(5)
    builder = ti.InterpreterBuilder()
    a, b, d = _handles(rng, 4, 16, 16, 16, "fp32")

    def drifting(builder, a, b, d, *args):
        out = _triton_dot(builder, a, b, d, *args)
        if out.data.ndim == 2:
            out = ti.TensorHandle(np.nextafter(out.data, np.float32(np.inf)), out.dtype)
        return out
    kind = batchdot._kind(batchdot.aligned_items(a), batchdot.aligned_items(b), batchdot.aligned_items(d))
    batchdot._stacked_ok.pop(kind, None)
    try:
        for _ in range(2):
            out = batchdot.chunk_dot(builder, drifting, a, b, d, ("ieee", 0), None).data
            assert batchdot._stacked_ok[kind] is False
            for p in range(4):
                want = np.nextafter(np.matmul(a.data[p], b.data[p]) + d.data[p], np.float32(np.inf))
                assert out[p].tobytes() == want.tobytes()
    finally:
        batchdot._stacked_ok.pop(kind, None)


@triton.jit
def _chained_dots(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    pid = tl.program_id(0)
    rm, rk, rn = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    a = tl.load(a_ptr + pid * M * K + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + pid * K * N + rk[:, None] * N + rn[None, :])
    c = tl.load(c_ptr + rn[:, None] * N + rn[None, :])              # the same block in every program
    acc = tl.dot(a, b)
    acc = tl.dot(acc.to(a.dtype), c.to(a.dtype), acc)               # a product accumulated into another
    acc += tl.dot(tl.trans(b).to(tl.float32), tl.trans(a).to(tl.float32), allow_tf32=False).T
    tl.store(out_ptr + pid * M * N + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_kernels_with_dots_trace_batched_as_one_program_at_a_time(dtype):
    P, M, K, N = 12, 16, 32, 16
    results = []
    batchdot._stacked_ok.clear()      # the first batched launch compares each kind, the second stacks them
    for batch in (False, True, True):
        triton_trace.reset()
        torch.manual_seed(0)
        a, b = torch.randn(P, M, K).to(dtype), torch.randn(P, K, N).to(dtype)
        c, out = torch.randn(N, N).to(dtype), torch.empty(P, M, N)
        triton_trace.trace(batch=batch)(_chained_dots)[(P,)](a, b, c, out, M, K, N)
        results.append((out, triton_trace.current_trace()))
    (o1, t1), *batched = results
    assert len(batchdot._stacked_ok) >= 2 and all(batchdot._stacked_ok.values()), batchdot._stacked_ok
    for o2, t2 in batched:
        assert torch.equal(o1.view(torch.uint8), o2.view(torch.uint8))
        assert_same_traces(t1, t2)
        ex = t2.launches[0].meta["execution"]
        assert ex["fallbacks"] == [] and ex["batched_programs"] == P, ex


# ---------------------------------------------------------------------------------------------------------
# programs that share their b block (grouped tile orders): one BLAS call per run of them
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def small_groups(monkeypatch):
    """Products of any size multiplied a run at a time (by default only large ones are: batchdot.GROUP_WORK)."""
    monkeypatch.setattr(batchdot, "GROUP_WORK", 1)


def _runs(rng, programs, g, m, k, n, dtype, shared_a=False):
    """Blocks as a grouped tile order loads them: runs of ``g`` programs share a block of b; with ``shared_a``
    every run holds the same g blocks of a (one per position in the run)."""
    a, b, d = _handles(rng, programs, m, k, n, dtype)
    shared = np.repeat(b.data[::g].copy(), g, axis=0)[:programs]
    if shared_a:
        a = ti.TensorHandle(np.ascontiguousarray(np.tile(a.data[:g], (programs // g, 1, 1))), a.dtype)
    return a, ti.TensorHandle(np.ascontiguousarray(shared), b.dtype), d


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("g", [2, 4, 8, 16])
@pytest.mark.parametrize("shared_a", [False, True], ids=["own_a", "shared_a"])
def test_programs_sharing_b_are_multiplied_a_run_at_a_time_bit_for_bit(dtype, g, shared_a, small_groups):
    rng = np.random.default_rng(g)
    builder = ti.InterpreterBuilder()
    for m, k, n in [(16, 16, 16), (64, 32, 64), (128, 64, 128), (17, 31, 33)]:
        a, b, d = _runs(rng, 16, g, m, k, n, dtype, shared_a)
        if rng.random() < 0.5:        # an accumulator every program shares (zeros, broadcast)
            d = ti.TensorHandle(np.zeros((1, m, n), np.float32), d.dtype)
        kind = batchdot._kind(batchdot.aligned_items(a), batchdot.aligned_items(b), batchdot.aligned_items(d))
        assert batchdot.b_runs(b.data) == g
        assert batchdot.a_repeats(a.data, g) == (shared_a and g < 16)      # (one run: nothing to share)
        key = kind + (g, shared_a and g < 16)
        for k_ in (kind, key):
            batchdot._stacked_ok.pop(k_, None)
        outs = [batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), None).data for _ in range(3)]
        assert batchdot._stacked_ok[kind] and batchdot._stacked_ok[key], f"{dtype} {m}x{k}x{n} g={g}"
        for p in range(16):
            want = np.matmul(_lone(a.data[p]), _lone(b.data[p]), dtype=np.float32) + d.data[p if len(d.data) > 1 else 0]
            for out in outs:          # stacked (checking), grouped (checking), grouped
                assert out[p].tobytes() == want.tobytes(), f"{dtype} {m}x{k}x{n} g={g} program {p}"


def test_runs_are_found_only_where_every_run_shares_its_block_byte_for_byte():
    rng = np.random.default_rng(0)
    blocks = rng.standard_normal((4, 8, 16)).astype(np.float32)
    runs = np.repeat(blocks, 4, axis=0)
    assert batchdot.b_runs(runs) == 4
    assert batchdot.b_runs(np.repeat(blocks[:1], 16, axis=0)) == 16      # the whole chunk reads one block
    assert batchdot.b_runs(blocks) == 1                                  # no two programs share
    uneven = np.concatenate([np.repeat(blocks[:1], 3, axis=0), np.repeat(blocks[1:3], 4, axis=0)])
    assert batchdot.b_runs(uneven) == 1                                  # runs of 3, 4, 4
    late = runs.copy()
    late[5, 7, 15] += 1                        # the same first 32 bytes, a different block
    assert batchdot.b_runs(late) == 1
    nan = runs.copy()
    nan[4:8, 3, 3] = np.nan                    # equal bits (NaN != NaN as floats): still one block
    assert batchdot.b_runs(nan) == 4
    assert batchdot.b_runs(np.broadcast_to(blocks[:1], (16, 8, 16))) == 1   # (one block, stride 0: stacked)


def test_a_grouped_product_that_differs_is_not_used(monkeypatch, small_groups):
    rng = np.random.default_rng(2)
    builder = ti.InterpreterBuilder()
    a, b, d = _runs(rng, 8, 4, 16, 16, 16, "fp32")
    fused = batchdot._fused

    def drifting(builder, base, a, b, d, *args):      # sums differently with more rows stacked (simulated)
        out = fused(builder, base, a, b, d, *args)
        if out.data.ndim == 3 and out.data.shape[1] > 16:
            out = ti.TensorHandle(np.nextafter(out.data, np.float32(np.inf)), out.dtype)
        return out
    monkeypatch.setattr(batchdot, "_fused", drifting)
    kind = batchdot._kind(batchdot.aligned_items(a), batchdot.aligned_items(b), batchdot.aligned_items(d))
    for key in (kind, kind + (4, False)):
        batchdot._stacked_ok.pop(key, None)
    try:
        for _ in range(3):
            out = batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), None).data
            for p in range(8):
                assert out[p].tobytes() == (np.matmul(a.data[p], b.data[p]) + d.data[p]).tobytes()
        assert batchdot._stacked_ok[kind] is True and batchdot._stacked_ok[kind + (4, False)] is False
    finally:
        for key in (kind, kind + (4, False)):
            batchdot._stacked_ok.pop(key, None)


def test_fp8_and_bf16_operands_and_widening_accumulators_take_tritons_own_product():
    calls = []

    def base(builder, a, b, d, *args):          # (records who asked; its value is not looked at)
        calls.append((str(a.dtype), d.data.ndim))
        return ti.TensorHandle(np.zeros((3, 16, 16), np.float32), tl.float32)
    builder = ti.InterpreterBuilder()
    rng = np.random.default_rng(4)
    a, b, d = _handles(rng, 3, 16, 16, 16, "fp32")
    fp8 = ti.TensorHandle(rng.integers(0, 120, (3, 16, 16)).astype(np.uint8), tl.float8e5)
    bf16 = ti.TensorHandle(rng.integers(0, 1 << 14, (3, 16, 16)).astype(np.uint16), tl.bfloat16)   # its bits
    wide = ti.TensorHandle(np.zeros((2, 3, 16, 16), np.float32), tl.float32)      # broadcasts the product
    for x, y, acc in ((fp8, fp8, d), (bf16, bf16, d), (a, b, wide)):
        batchdot._fused(builder, base, x, y, acc, "ieee", 0)
    assert calls == [("fp8e5", 3), ("bf16", 3), ("fp32", 4)]
    out = batchdot._fused(builder, base, a, b, d, "ieee", 0).data
    assert len(calls) == 3 and out.tobytes() == (np.matmul(a.data, b.data) + d.data).tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("M", [128, 64], ids=["two_groups", "one_group"])
def test_a_grouped_matmul_traces_batched_as_one_program_at_a_time(dtype, M, small_groups):
    # GROUP_M=4 with 16-row tiles: one group of 4 tile rows (every column's programs then take the same rows
    # of A), or two (they do not)
    import kernels as K
    torch.manual_seed(0)
    a, b = torch.randn(M, 96).to(dtype), torch.randn(96, 160).to(dtype)
    batchdot._stacked_ok.clear()
    results = []
    for batch in (False, True, True):
        triton_trace.reset()
        out = K.matmul(a, b, kernel=triton_trace.trace(batch=batch)(K.make_matmul()), block_m=16, block_n=32,
                       block_k=32, group_m=4)
        results.append((out, triton_trace.current_trace()))
    grouped = [k for k, ok in batchdot._stacked_ok.items() if len(k) == 5]
    assert grouped and all(batchdot._stacked_ok[k] for k in grouped), batchdot._stacked_ok
    assert {k[4] for k in grouped} == {M == 64}, grouped
    (o1, t1), *batched = results
    torch.testing.assert_close(o1, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    for o2, t2 in batched:
        assert torch.equal(o1.view(torch.uint8), o2.view(torch.uint8))
        assert_same_traces(t1, t2)


def test_a_blocks_repeat_only_where_every_run_holds_the_first_runs():
    rng = np.random.default_rng(1)
    a = np.tile(rng.standard_normal((4, 8, 16)).astype(np.float32), (3, 1, 1))     # 3 runs of the same 4
    assert batchdot.a_repeats(a, 4) and not batchdot.a_repeats(a, 3) and not batchdot.a_repeats(a, 12)
    late = a.copy()
    late[9, 7, 15] += 1                        # one block of the third run differs past its first bytes
    assert not batchdot.a_repeats(late, 4)
    assert not batchdot.a_repeats(a[:, :, ::2], 4)       # (not contiguous: not compared)


def test_small_products_are_not_looked_at_for_runs():
    rng = np.random.default_rng(6)
    builder = ti.InterpreterBuilder()
    a, b, d = _runs(rng, 16, 4, 32, 32, 32, "fp32")          # 32^3: below GROUP_WORK
    kind = batchdot._kind(batchdot.aligned_items(a), batchdot.aligned_items(b), batchdot.aligned_items(d))
    batchdot._stacked_ok.pop(kind, None)
    for _ in range(2):
        batchdot.chunk_dot(builder, _triton_dot, a, b, d, ("ieee", 0), None)
    assert batchdot._stacked_ok[kind] and not [k for k in batchdot._stacked_ok if k[:3] == kind and len(k) > 3]
