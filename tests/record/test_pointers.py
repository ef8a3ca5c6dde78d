"""Pointer arithmetic in a batched chunk (record/batch/pointers.py): ``p + offs`` computed on the operands'
unbroadcast cores must give the interpreter's bits, and the affine description a pointer block carries
through ``p += step`` must describe its lanes exactly, so loads in a loop skip the affine probe and still
record what one program at a time records."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from triton_trace import trace
from triton_trace.record.batch import affine as affine_mod
from triton_trace.record.memory import attribution as attribution_mod
from triton_trace.record.batch.affine import affine_rows
from triton_trace.record.batch import described, pointers
from helpers.batch import assert_same_traces, run_both


def _interpreter_addptr(ptr, offset):
    """Triton's own create_addptr, written out independently (full-size operands)."""
    eb = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
    return ptr.data + eb * offset.data.astype(np.uint64)


def _ptr(data, elem=tl.float32):
    return TensorHandle(np.ascontiguousarray(data, dtype=np.uint64), tl.pointer_type(elem))


@pytest.mark.parametrize("elem", [tl.int1, tl.float16, tl.float32, tl.float64])
@pytest.mark.parametrize("case", ["splat_ptr_full_offs", "full_ptr_splat_offs", "row_col_broadcast",
                                  "uniform_ptr_per_program_offs", "negative_int64", "uint32_offs"])
def test_addptr_gives_the_interpreters_bits(elem, case):
    rng = np.random.default_rng(7)
    R, M, N = 5, 16, 8
    base = np.uint64(1 << 40)
    if case == "splat_ptr_full_offs":
        p = np.broadcast_to(np.full((R, 1, 1), base, np.uint64), (R, M, N))
        o = rng.integers(-1000, 1000, (R, M, N)).astype(np.int32)
    elif case == "full_ptr_splat_offs":
        p = base + rng.integers(0, 1 << 20, (R, M, N)).astype(np.uint64)
        o = np.broadcast_to(rng.integers(-9, 9, (R, 1, 1)).astype(np.int32), (R, M, N))
    elif case == "row_col_broadcast":
        p = np.broadcast_to(base + rng.integers(0, 99, (R, M, 1)).astype(np.uint64), (R, M, N))
        o = np.broadcast_to(rng.integers(-50, 50, (1, 1, N)).astype(np.int32), (1, M, N))
    elif case == "uniform_ptr_per_program_offs":
        p = np.broadcast_to(np.full((1, 1, 1), base, np.uint64), (1, M, N))
        o = rng.integers(-50, 50, (R, M, N)).astype(np.int64)
    elif case == "negative_int64":
        p = np.broadcast_to(np.full((R, 1, 1), base, np.uint64), (R, M, N))
        o = np.broadcast_to(np.array([[[-(1 << 35)]]], np.int64), (R, M, N))
    else:
        p = base + np.arange(R * M * N, dtype=np.uint64).reshape(R, M, N)
        o = np.broadcast_to(np.array([[[4000000000]]], np.uint32), (R, M, N))
    ptr = TensorHandle(p, tl.pointer_type(elem))
    off = TensorHandle(o, tl.int64 if o.dtype == np.int64 else tl.int32)
    got = pointers.addptr(TensorHandle, ptr, off)
    want = _interpreter_addptr(ptr, off)
    assert got.data.dtype == want.dtype == np.uint64
    np.testing.assert_array_equal(got.data, want)


def _described_block(R=6, M=16, N=32, row_stride=4096, col_stride=4):
    first = ((1 << 30) + np.arange(R, dtype=np.int64) * 7 * 4096)
    data = (first[:, None, None] + np.arange(M)[None, :, None] * row_stride
            + np.arange(N)[None, None, :] * col_stride).astype(np.int64).view(np.uint64)
    h = _ptr(data)
    pointers.describe(h, first, (row_stride, col_stride))
    return h, first


def test_a_step_the_same_over_each_program_keeps_an_exact_description():
    h, first = _described_block()
    step = np.broadcast_to(np.array([3, -2, 0, 9, 1, 5], np.int32).reshape(6, 1, 1), (6, 16, 32))
    out = pointers.addptr(TensorHandle, h, TensorHandle(step, tl.int32))
    k = pointers.known(out)
    assert k is not None
    probed = affine_rows(out.data.view(np.int64))            # what a scan of the lanes finds
    np.testing.assert_array_equal(k[0], probed.first)
    assert k[1] == probed.strides
    uniform = pointers.addptr(TensorHandle, h, TensorHandle(np.full((1, 1, 1), 64, np.int32), tl.int32))
    np.testing.assert_array_equal(pointers.known(uniform)[0], first + 256)


def test_steps_that_differ_inside_a_program_or_replaced_data_drop_the_description():
    h, _ = _described_block()
    lanes = np.broadcast_to((np.arange(32) % 3).astype(np.int32), (6, 16, 32))
    assert pointers.known(pointers.addptr(TensorHandle, h, TensorHandle(lanes, tl.int32))) is None
    h.data = h.data.copy()          # another array: the description named the old one
    assert pointers.known(h) is None


# ------------------------------------------------------------------------------------------------------
# kernels: the description passes through loops and the trace stays that of one program at a time
# ------------------------------------------------------------------------------------------------------
@triton.jit
def _strided_walk(x_ptr, out_ptr, n, STEPS: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    ptrs = x_ptr + pid * 3 + rows[:, None] * 40 + cols[None, :]
    acc = tl.zeros((R, C), dtype=tl.float32)
    for i in range(STEPS):
        # each program steps by its own amount; late steps run past the end (masked, then not)
        offs = pid * 3 + rows[:, None] * 40 + cols[None, :] + i * (pid + 2) * 41
        acc += tl.load(ptrs, mask=offs < n, other=0.)
        ptrs += (pid + 2) * 41
    tl.store(out_ptr + pid * R * C + rows[:, None] * C + cols[None, :], acc)


def test_a_pointer_walk_with_a_step_per_program_traces_as_one_program_at_a_time():
    x = torch.randn(1500)
    (o1, t1), (o2, t2) = run_both(lambda o: (lambda out: (trace(_strided_walk, **o)[(7,)](
        x, out, x.numel(), STEPS=6, R=8, C=16), out)[1])(torch.empty(7 * 8 * 16)), 7)
    assert torch.equal(o1, o2)
    assert_same_traces(t1, t2)
    ex = t2.launches[0].meta["execution"]
    assert ex["batched_programs"] == 7 and not ex["fallbacks"], ex


@triton.jit
def _walk_probed(x_ptr, out_ptr, STEPS: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    pid = tl.program_id(0)
    rows = tl.arange(0, R)
    cols = tl.where(tl.arange(0, C) >= 0, tl.arange(0, C), 0)    # affine, but no rule says so: probed
    ptrs = x_ptr + pid * R * C + rows[:, None] * C + cols[None, :]
    acc = tl.zeros((R, C), dtype=tl.float32)
    for i in range(STEPS):
        acc += tl.load(ptrs)
        ptrs += 8 * R * C
    tl.store(out_ptr + pid * R * C + rows[:, None] * C + cols[None, :], acc)


def test_pointers_found_affine_are_probed_once_then_described_through_a_loop(monkeypatch):
    """Pointers no rule describes are probed at their first load; the loop's later trips use what the probe
    found, passed on through ``ptrs += step``; the trace equals one program at a time."""
    calls = []
    real = attribution_mod.affine_rows
    monkeypatch.setattr(attribution_mod, "affine_rows", lambda a: calls.append(a.shape) or real(a))
    x = torch.randn(8 * 6 * 8 * 16)
    (o1, t1), (o2, t2) = run_both(lambda o: (lambda out: (trace(_walk_probed, **o)[(8,)](
        x, out, STEPS=6, R=8, C=16), out)[1])(torch.empty(8 * 8 * 16)), True)
    want = x.reshape(6, 8, 8 * 16).sum(0).reshape(-1)
    torch.testing.assert_close(o2, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(o1, o2)
    assert_same_traces(t1, t2)
    assert len(calls) == 2, calls          # the loop's pointers (6 trips), the store's


# ------------------------------------------------------------------------------------------------------
# integer blocks: described from tl.arange through +, -, * by a constant, % that changes nothing
# ------------------------------------------------------------------------------------------------------
def _h(data, dtype=tl.int32):
    return TensorHandle(data, dtype)


def test_rules_describe_exactly_what_the_lanes_hold():
    R = 4
    pid = _h(np.array([0, 3, 1, 7], np.int32))
    ar = _h(np.arange(16, dtype=np.int32)[None])
    described.make_range(ar, 0)
    sp = _h(np.broadcast_to((pid.data * 16).reshape(R, 1), (R, 16)))
    described.splat(sp, _h(pid.data * 16))
    offs = _h(sp.data + ar.data)
    described.binary(offs, sp, ar, np.add)
    col = _h(np.expand_dims(offs.data, 2))
    described.expand_dims(col, offs, 1)
    tile = _h(np.broadcast_to(col.data, (R, 16, 8)))
    described.broadcast(tile, col)
    c = _h(np.broadcast_to(np.array([5], np.int32).reshape(1, 1, 1), (1, 16, 8)))    # a splat constant
    scaled = _h(tile.data * 5)
    described.binary(scaled, tile, c, np.multiply)
    for h in (ar, sp, offs, col, tile, scaled):
        k = described.known(h)
        assert k is not None
        got = affine_rows(h.data.astype(np.int64)) if h.data.size // h.data.shape[0] >= 64 else None
        want = np.broadcast_to(k[0], h.data.shape[:1]).reshape((-1,) + (1,) * (h.data.ndim - 1)) + \
            sum(np.arange(n).reshape([-1 if i == d else 1 for i in range(h.data.ndim - 1)]) * s
                for d, (n, s) in enumerate(zip(h.data.shape[1:], k[1])))
        np.testing.assert_array_equal(np.broadcast_to(want, h.data.shape), h.data)
        if got is not None:
            assert got.strides == k[1]


def _splat(values, shape):
    """A per-program value splat over the block, as the semantic layer hands it to the builder."""
    v = np.asarray(values, np.int32)
    return _h(np.broadcast_to(v.reshape((len(v),) + (1,) * len(shape)), (len(v),) + shape))


def test_results_that_wrap_or_change_under_modulo_are_not_described():
    ar = _h(np.arange(16, dtype=np.int32)[None])
    described.make_range(ar, 0)
    big = _splat([2**30, 2**30], (16,))
    two = _splat([2], (16,))
    doubled = _h((big.data.astype(np.int64) * 2).astype(np.int32))          # wraps in int32
    described.binary(doubled, big, two, np.multiply)
    assert described.known(doubled) is None
    ten, sixteen = _splat([10], (16,)), _splat([16], (16,))
    wrapped = _h(np.fmod(ar.data, ten.data))                                # 10..15 change
    described.binary(wrapped, ar, ten, np.fmod)
    assert described.known(wrapped) is None
    same = _h(np.fmod(ar.data, sixteen.data))
    described.binary(same, ar, sixteen, np.fmod)
    assert described.known(same) is not None
    per_program = _splat([2, 3], (16,))                                     # a multiplier that differs
    prod = _h(ar.data * per_program.data)
    described.binary(prod, ar, per_program, np.multiply)
    assert described.known(prod) is None
    summed = _h(ar.data + per_program.data)                                 # ... but a sum is fine
    described.binary(summed, ar, per_program, np.add)
    np.testing.assert_array_equal(described.known(summed)[0], [2, 3])


@pytest.mark.parametrize("name", ["add", "scale_bias", "softmax", "layer_norm_fwd_bwd", "matmul", "matmul_fp16",
                                  "transpose_view", "cumsum", "histogram"])
def test_every_description_made_while_tracing_matches_the_lanes(name, monkeypatch):
    """With the check on, every description is compared with the lanes it describes as it is made."""
    from helpers.batch import CASES
    monkeypatch.setattr(described, "_CHECK", True)
    made = []
    real = described.describe
    monkeypatch.setattr(described, "describe", lambda h, f, s: made.append(s) or real(h, f, s))
    (o1, t1), (o2, t2) = run_both(CASES[name], 3)
    assert made
    assert_same_traces(t1, t2)


@pytest.mark.parametrize("case", ["add", "matmul"])
def test_pointers_built_from_arange_need_no_probe(case, monkeypatch):
    import kernels as K
    calls = []
    real = attribution_mod.affine_rows
    monkeypatch.setattr(attribution_mod, "affine_rows", lambda a: calls.append(a.shape) or real(a))
    if case == "add":
        x, y = torch.randn(4096), torch.randn(4096)
        out = K.add(x, y, kernel=trace(K.make_add()), block=256)
        assert torch.equal(out, x + y)
    else:
        a, b = torch.randn(64, 128), torch.randn(128, 64)          # offs % M changes nothing here
        c = K.matmul(a, b, kernel=trace(K.make_matmul()), block_m=16, block_n=16, block_k=32, group_m=2)
        torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    assert calls == []


# ------------------------------------------------------------------------------------------------------
# lazy pointer blocks: p + step is described, not computed, until something reads its lanes
# ------------------------------------------------------------------------------------------------------
def _count_materialised(monkeypatch) -> list:
    made = []
    prop = described.LazyPointers.data

    def get(self):
        if self._data is None:
            made.append(self.shape)
        return prop.fget(self)
    monkeypatch.setattr(described.LazyPointers, "data", property(get, prop.fset))
    return made


def test_a_k_loop_never_computes_the_pointer_lanes_it_loads(monkeypatch):
    import kernels as K
    made = _count_materialised(monkeypatch)
    offsets_made, offsets_lazy = [], []
    build, init = affine_mod.LazyOffsets.materialise, affine_mod.LazyOffsets.__init__

    def counted(self):
        if self._data is None:
            offsets_made.append(self.shape)
        return build(self)

    def made_lazy(self, *args):
        init(self, *args)
        offsets_lazy.append(self.shape)
    monkeypatch.setattr(affine_mod.LazyOffsets, "materialise", counted)
    monkeypatch.setattr(affine_mod.LazyOffsets, "__init__", made_lazy)
    a, b = torch.randn(64, 256), torch.randn(256, 48)
    (c1, t1), (c2, t2) = run_both(lambda o: K.matmul(a, b, kernel=trace(**o)(K.make_matmul()), block_m=16,
                                                     block_n=16, block_k=32, group_m=2), True)
    torch.testing.assert_close(c2, a @ b, rtol=1e-4, atol=1e-4)
    assert torch.equal(c1, c2)
    assert_same_traces(t1, t2)
    # the tiles the loop loads (16x32 of A, 32x16 of B) and the C tile it stores (16x16) are never computed;
    # the setup's small blocks are
    assert not any(shape[1:] in ((16, 32), (32, 16), (16, 16)) for shape in made), made
    # nor are their element offsets: the loads are recorded, checked and gathered from the description (and
    # the store of C written a run at a time)
    assert {(16, 32), (32, 16)} <= {shape[1:] for shape in offsets_lazy}, offsets_lazy
    assert not offsets_made, offsets_made


@triton.jit
def _walk_compare(x_ptr, out_ptr, n, STEPS: tl.constexpr, C: tl.constexpr):
    # the pointers are compared with an end pointer (their lanes are read) and loaded one byte off
    # (unaligned: the interpreter's own per-lane load), both after lazy steps
    pid = tl.program_id(0)
    cols = tl.arange(0, C)
    ptrs = x_ptr + pid * C + cols
    end = x_ptr + n
    acc = tl.zeros((C,), dtype=tl.int32)
    for i in range(STEPS):
        acc += tl.load(ptrs, mask=ptrs.to(tl.int64) < end.to(tl.int64), other=0)
        ptrs += 4 * C
    words = (ptrs.to(tl.pointer_type(tl.int8)) - 4 * C * 4 + 1).to(tl.pointer_type(tl.int32))
    acc += tl.load(words, mask=cols < C - 1, other=0)
    tl.store(out_ptr + pid * C + cols, acc)


def test_lazy_blocks_whose_lanes_are_read_give_the_same_trace(monkeypatch):
    made = _count_materialised(monkeypatch)
    x = torch.randint(-1000, 1000, (4 * 16 * 5 + 7,), dtype=torch.int32)
    (o1, t1), (o2, t2) = run_both(lambda o: (lambda out: (trace(_walk_compare, **o)[(4,)](
        x, out, x.numel(), STEPS=5, C=16), out)[1])(torch.empty(4 * 16, dtype=torch.int32)), True)
    want = torch.zeros(4 * 16, dtype=torch.int64)
    for p in range(4):                       # independently: the loads as the kernel states them
        for i in range(5):
            idx = torch.arange(16) + p * 16 + i * 64
            want[p * 16:(p + 1) * 16] += torch.where(idx < x.numel(), x[idx.clamp(max=x.numel() - 1)], 0)
        raw = x.numpy().tobytes()
        base = (p * 16 + 5 * 64) * 4 - 4 * 16 * 4 + 1
        words = np.frombuffer(raw[base:base + 4 * 15], dtype=np.int32)
        want[p * 16:p * 16 + 15] += torch.from_numpy(words.astype(np.int64))
    want = (want + 2**31) % 2**32 - 2**31           # int32 sums wrap
    assert torch.equal(o1.to(torch.int64), want)
    assert torch.equal(o1, o2)
    assert_same_traces(t1, t2)
    assert made                              # the comparison and the byte offset read the lanes
