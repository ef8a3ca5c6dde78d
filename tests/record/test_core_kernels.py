"""Real kernels traced end to end: outputs against torch, recorded offsets and masks against offsets
computed independently in numpy from each kernel's indexing (never against the tool itself)."""

import numpy as np
import pytest
import torch
import triton

import triton_trace
from triton_trace import trace
from helpers.release import TRITON_39
from helpers.source import line_of
import kernels as K


def only_launch():
    tr = triton_trace.current_trace()
    assert len(tr.launches) == 1
    return tr.launches[0]


def check(a, kind, tensor, offsets, mask, line=None):
    assert (a.kind, a.tensor) == (kind, tensor)
    np.testing.assert_array_equal(a.mask, np.broadcast_to(mask, a.mask.shape))
    np.testing.assert_array_equal(np.where(a.mask, a.offsets, -1), np.where(a.mask, offsets, -1))
    if line is not None:
        assert a.line == line and ("/tests/kernels/" in a.file or "/examples/" in a.file)


def test_vector_add():
    x, y = torch.randn(1000), torch.randn(1000)
    out = K.add(x, y, kernel=trace(K.make_add()), block=128)
    torch.testing.assert_close(out, x + y)
    lc = only_launch()
    assert lc.kernel_name == "add_kernel" and lc.grid == (8, 1, 1) and "def add_kernel" in lc.source
    assert lc.args == {"n": 1000, "BLOCK": 128}
    assert [t.name for t in lc.tensors] == ["x_ptr", "y_ptr", "out_ptr"]
    t = lc.tensors[0]
    assert (t.dtype, t.shape, t.strides, t.storage_offset, t.storage_size, t.elem_bytes) == \
        ("float32", (1000,), (1,), 0, 1000, 4)
    for pid in (0, 1, 7):
        offs = pid * 128 + np.arange(128)
        mask = offs < 1000
        acc = lc.accesses(program=(pid, 0, 0))
        assert [a.kind for a in acc] == ["load", "load", "store"]
        check(acc[0], "load", "x_ptr", offs, mask, line_of(K.add_kernel, "tl.load(x_ptr"))
        check(acc[1], "load", "y_ptr", offs, mask, line_of(K.add_kernel, "tl.load(y_ptr"))
        check(acc[2], "store", "out_ptr", offs, mask, line_of(K.add_kernel, "tl.store"))
        np.testing.assert_array_equal(acc[0].values[mask], x.numpy()[offs[mask]])
        np.testing.assert_allclose(acc[2].values[mask], (x + y).numpy()[offs[mask]])
        assert acc[0].elem_bytes == 4 and acc[0].shape == (128,)


def test_fused_softmax_with_row_stride():
    base = torch.randn(7, 40)
    x = base[:, :33]                      # rows padded to 40 elements
    out = K.softmax(x, kernel=trace(K.make_softmax()))
    torch.testing.assert_close(out, torch.softmax(x, dim=1))
    lc = only_launch()
    assert lc.tensors[1].strides == (40, 1) and lc.tensors[1].shape == (7, 33)
    cols = np.arange(64)
    for row in (0, 3, 6):
        acc = lc.accesses(program=row)
        check(acc[0], "load", "in_ptr", row * 40 + cols, cols < 33, line_of(K.softmax_kernel, "tl.load"))
        check(acc[1], "store", "out_ptr", row * 33 + cols, cols < 33)
        reduces = [o for o in lc.all_ops(program=row) if o.kind == "reduce"]
        assert len(reduces) == 2 and all(o.line in (line_of(K.softmax_kernel, "tl.max"),
                                                    line_of(K.softmax_kernel, "tl.sum")) for o in reduces)


def test_layer_norm_forward_and_backward():
    M, N, B = 6, 40, 16
    x = torch.randn(M, 48)[:, :N]          # padded rows: stride 48
    w, b, dy = torch.randn(N), torch.randn(N), torch.randn(M, 48)[:, :N]
    y, mean, rstd = K.layer_norm_fwd(x, w, b, kernel=trace(K.make_layer_norm_fwd()), block=B)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), atol=1e-4, rtol=1e-4)
    fwd = only_launch()
    for row in (0, 5):
        acc = fwd.accesses(program=row)
        x_loads = [a for a in acc if a.tensor == "X"]
        assert len(x_loads) == 9            # three passes over three column blocks
        for i, a in enumerate(x_loads):
            cols = (i % 3) * B + np.arange(B)
            check(a, "load", "X", row * 48 + cols, cols < N)
        stores = [a for a in acc if a.kind == "store"]
        assert [a.tensor for a in stores] == ["Mean", "Rstd", "Y", "Y", "Y"]
        assert stores[0].offsets.ravel().tolist() == [row] and stores[0].mask.all()

    triton_trace.reset()
    G = 4
    dx, dw, db, _dw, _db, locks = K.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=G,
                                                   dx_kernel=trace(K.make_layer_norm_bwd_dx()),
                                                   dwdb_kernel=trace(K.make_layer_norm_bwd_dwdb()))
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    torch.nn.functional.layer_norm(xr, (N,), wr, br, 1e-5).backward(dy)
    for got, want in ((dx, xr.grad), (dw, wr.grad), (db, br.grad)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert locks[:G].tolist() == [0] * G and locks[G:].tolist() == [1] * G
    dx_lc, dwdb_lc = triton_trace.current_trace().launches
    cols = np.arange(64)
    for row in range(M):
        lock_id = row % G
        acc = dx_lc.accesses(program=row)
        first_in_group = row < G
        kinds = [(a.kind, a.tensor) for a in acc]
        expected = [("load", "X"), ("load", "DY"), ("load", "W"), ("load", "Mean"), ("load", "Rstd"),
                    ("store", "DX"), ("atomic_cas", "Lock"), ("load", "Lock")]
        expected += [("atomic_xchg", "Lock")] if first_in_group else [("load", "DW"), ("load", "DB")]
        expected += [("store", "DW"), ("store", "DB"), ("atomic_xchg", "Lock")]
        assert kinds == expected
        check(acc[0], "load", "X", row * 48 + cols, cols < N)
        check(acc[6], "atomic_cas", "Lock", np.array([lock_id]), True, line_of(K.layer_norm_bwd_dx_kernel, "atomic_cas"))
        check(acc[7], "load", "Lock", np.array([G + lock_id]), True)
        check(acc[-3], "store", "DW", lock_id * N + cols, cols < N)
        assert acc[-1].values.ravel().tolist() == [0]          # the lock is released with 0
    for pid in range(3):
        cols = pid * 16 + np.arange(16)
        rows = np.arange(8)
        for a in dwdb_lc.accesses(program=pid, kind="load"):
            check(a, "load", a.tensor, rows[:, None] * N + cols[None, :], (rows[:, None] < G) & (cols[None, :] < N))
        assert [a.tensor for a in dwdb_lc.accesses(program=pid, kind="store")] == ["FINAL_DW", "FINAL_DB"]


def matmul_pids(pid, M, N, bm, bn, group_m):
    num_pid_m, num_pid_n = -(-M // bm), -(-N // bn)
    in_group = group_m * num_pid_n
    first = (pid // in_group) * group_m
    size = min(num_pid_m - first, group_m)
    return first + (pid % in_group) % size, (pid % in_group) // size


@pytest.mark.parametrize("group_m", [1, 2])
def test_blocked_matmul_with_grouped_order(group_m):
    M, K_, N, BS = 37, 29, 45, 16
    a = torch.randn(K_, M).t()              # column-major A: strides (1, 37)
    b = torch.randn(K_, N)
    c = K.matmul(a, b, kernel=trace(K.make_matmul()), block_m=BS, block_n=BS, block_k=BS, group_m=group_m)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    lc = only_launch()
    assert lc.tensors[0].strides == (1, 37) and lc.args["GROUP_M"] == group_m
    if group_m == 1:
        assert [matmul_pids(p, M, N, BS, BS, 1) for p in range(3)] == [(0, 0), (0, 1), (0, 2)]
    dot_line = line_of(K.matmul_kernel, "tl.dot")
    r = np.arange(BS)
    for pid in range(9):
        pm, pn = matmul_pids(pid, M, N, BS, BS, group_m)
        om, on = pm * BS + r, pn * BS + r
        ops = [o for o in lc.all_ops(program=pid) if o.kind != "math"]
        assert [o.kind for o in ops] == ["load", "load", "dot"] * 2 + ["store"]
        for k in range(2):
            ok = k * BS + r
            check(ops[3 * k], "load", "a_ptr", om[:, None] * 1 + ok[None, :] * 37, (om[:, None] < M) & (ok[None, :] < K_))
            check(ops[3 * k + 1], "load", "b_ptr", ok[:, None] * N + on[None, :], (ok[:, None] < K_) & (on[None, :] < N))
            assert ops[3 * k + 2].dims == (BS, BS, BS) and ops[3 * k + 2].line == dot_line
        check(ops[-1], "store", "c_ptr", om[:, None] * N + on[None, :], (om[:, None] < M) & (on[None, :] < N))


def test_transpose_of_non_contiguous_view_on_2d_grid():
    base = torch.randn(30, 50)
    x = base[2:, 1::2].t()                  # shape (25, 28), strides (2, 50), storage offset 101
    y = K.transpose(x, kernel=trace(K.make_transpose()), block_m=8, block_n=16)
    torch.testing.assert_close(y, x.t())
    lc = only_launch()
    info = lc.tensors[0]
    assert (info.shape, info.strides, info.storage_offset, info.storage_size) == ((25, 28), (2, 50), 101, 1500)
    np.testing.assert_array_equal(info.view_offsets(), 101 + np.arange(25)[:, None] * 2 + np.arange(28)[None, :] * 50)
    assert lc.grid == (4, 2, 1)
    for px, py in ((0, 0), (3, 1), (2, 0)):
        rm, rn = px * 8 + np.arange(8), py * 16 + np.arange(16)
        mask = (rm[:, None] < 25) & (rn[None, :] < 28)
        acc = lc.accesses(program=(px, py))
        check(acc[0], "load", "x_ptr", 101 + rm[:, None] * x.stride(0) + rn[None, :] * x.stride(1), mask)
        check(acc[1], "store", "y_ptr", rn[None, :] * 25 + rm[:, None], mask)
        np.testing.assert_array_equal(acc[0].values[mask], base.numpy().ravel()[acc[0].offsets[mask]])


@pytest.mark.skipif(TRITON_39, reason="Triton 3.9 removed block pointers (tl.make_block_ptr raises)")
def test_block_pointer_kernel():
    x = torch.randn(40, 19).t()             # (19, 40) strided view
    y = K.block_ptr_scale(x, kernel=trace(K.make_block_ptr()), block_m=8, block_n=16)
    torch.testing.assert_close(y, x * 2)
    lc = only_launch()
    r, c = np.arange(8), np.arange(16)
    for pid in range(3):
        acc = lc.accesses(program=pid)
        assert [a.kind for a in acc] == ["load", "store"] * 3
        for j in range(3):
            rows, cols = pid * 8 + r, j * 16 + c
            mask = (rows[:, None] < 19) & (cols[None, :] < 40)
            check(acc[2 * j], "load", "x_ptr", rows[:, None] * 1 + cols[None, :] * 19, mask)
            check(acc[2 * j + 1], "store", "y_ptr", rows[:, None] * 40 + cols[None, :], mask)


def test_block_pointer_is_a_clear_unsupported_op_on_triton_39():
    if not TRITON_39:
        pytest.skip("block pointers run on this Triton")
    with pytest.raises(triton_trace.UnsupportedOp, match="make_block_ptr") as ei:
        K.block_ptr_scale(torch.randn(19, 40), kernel=trace(K.make_block_ptr()))
    assert ei.value.line == line_of(K.block_ptr_kernel, "x_bp = tl.make_block_ptr")


def _check_desc_launch(lc, M, N):
    for pm, pn in ((0, 0), (2, 2), (1, 0)):
        rows, cols = pm * 8 + np.arange(8), pn * 16 + np.arange(16)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        acc = lc.accesses(program=(pm, pn))
        assert [a.kind for a in acc] == ["load", "store"]
        for a in acc:
            check(a, a.kind, a.tensor, rows[:, None] * N + cols[None, :], mask)


def test_device_tensor_descriptor():
    x = torch.randn(19, 36)
    y = K.tensor_desc_add_one(x, kernel=trace(K.make_tensor_desc()))
    torch.testing.assert_close(y, x + 1)
    lc = only_launch()
    assert [a.tensor for a in lc.accesses(program=(0, 0))] == ["x_ptr", "y_ptr"]
    _check_desc_launch(lc, 19, 36)


def test_host_tensor_descriptor():
    x = torch.randn(19, 36)
    y = K.host_desc_scale(x, kernel=trace(K.make_host_desc()))
    torch.testing.assert_close(y, x * 3)
    lc = only_launch()
    assert [a.tensor for a in lc.accesses(program=(0, 0))] == ["x_desc", "y_desc"]
    assert lc.args["x_desc"] == {"shape": [19, 36], "strides": [36, 1], "block_shape": [8, 16]}
    _check_desc_launch(lc, 19, 36)


def test_autotuned_kernel_records_the_config_that_ran():
    x = torch.randn(200)
    out = K.scale(x, 3.0, kernel=trace(K.make_autotuned()))
    torch.testing.assert_close(out, x * 3)
    lc = only_launch()
    assert lc.config["kwargs"] == {"BLOCK": 32} and lc.config["index"] == 0 and lc.config["num_warps"] == 1
    assert lc.args["BLOCK"] == 32 and lc.grid == (7, 1, 1)
    triton_trace.reset()
    out = K.scale(x, 3.0, kernel=trace(config=1)(K.make_autotuned()))
    torch.testing.assert_close(out, x * 3)
    lc = only_launch()
    assert lc.config["kwargs"] == {"BLOCK": 64} and lc.config["chosen_by"] == "pinned" and lc.grid == (4, 1, 1)
    offs = 64 * 3 + np.arange(64)
    check(lc.accesses(program=3)[0], "load", "x_ptr", offs, offs < 200)


@pytest.mark.parametrize("n,even", [(1000, False), (1024, True)])
def test_heuristics_kernel(n, even):
    x = torch.randn(n)
    out = K.square(x, kernel=trace(K.make_heuristics()), block=32)
    torch.testing.assert_close(out, x * x)
    lc = only_launch()
    assert lc.config["heuristics"] == {"EVEN": even} and lc.args["EVEN"] is even
    last = lc.grid[0] - 1
    offs = last * 32 + np.arange(32)
    check(lc.accesses(program=last)[0], "load", "x_ptr", offs, offs < n)


def test_triton_op_with_wrap_triton_called_eagerly():
    kernel = trace(K.make_add())
    op = K.make_triton_op_add(kernel)
    x, y = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(op(x, y), x + y)
    lc = only_launch()
    assert lc.kernel_name == "add_kernel" and lc.grid == (5, 1, 1)
    offs = 4 * 64 + np.arange(64)
    check(lc.accesses(program=4)[2], "store", "out_ptr", offs, offs < 300)


def test_nested_jit_helper_lines():
    x = torch.randn(50)
    torch.testing.assert_close(K.poly(x, kernel=trace(K.make_nested())), 2 * x * x + 1)
    lc = only_launch()
    helper_line = line_of(K._poly.fn, "return")
    math = [o for o in lc.all_ops(program=0) if o.kind == "math"]
    assert helper_line in {o.line for o in math}
    assert [a.line for a in lc.accesses(program=0)] == [line_of(K.nested_kernel, "tl.load"),
                                                         line_of(K.nested_kernel, "tl.store")]


def test_3d_grid():
    x, y = torch.randn(3, 10, 20), torch.randn(3, 10, 20)
    torch.testing.assert_close(K.sub3d(x, y, kernel=trace(K.make_grid3d()), block_m=4, block_n=8), x - y)
    lc = only_launch()
    assert lc.grid == (3, 3, 3) and len(lc.programs()) == 27
    for b, m, n in ((0, 0, 0), (2, 2, 2), (1, 2, 0)):
        rm, rn = m * 4 + np.arange(4), n * 8 + np.arange(8)
        offs = b * 200 + rm[:, None] * 20 + rn[None, :]
        mask = (rm[:, None] < 10) & (rn[None, :] < 20)
        acc = lc.accesses(program=(b, m, n))
        for a, name in zip(acc, ("x_ptr", "y_ptr", "out_ptr")):
            check(a, a.kind, name, offs, mask)


def test_loop_with_runtime_bounds():
    x = torch.randn(50)
    starts = torch.tensor([0, 5, 5, 23, 50], dtype=torch.int32)
    out = K.segment_sum(x, starts, kernel=trace(K.make_segment_sum()), block=8)
    want = torch.stack([x[s:e].sum() for s, e in zip(starts[:-1].tolist(), starts[1:].tolist())])
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    lc = only_launch()
    for seg, (s, e) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
        x_loads = lc.accesses(program=seg, tensor="x_ptr")
        assert len(x_loads) == -(-(e - s) // 8)
        for i, a in enumerate(x_loads):
            offs = s + i * 8 + np.arange(8)
            check(a, "load", "x_ptr", offs, offs < e)


def test_none_argument_and_scalars():
    x, bias = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(K.scale_bias(x, None, 2.0, kernel=trace(K.make_bias())), x * 2)
    torch.testing.assert_close(K.scale_bias(x, bias, 0.5, kernel=trace(K.make_bias())), x * 0.5 + bias)
    no_bias, with_bias = triton_trace.current_trace().launches
    assert no_bias.args == {"bias_ptr": None, "n": 100, "scale": 2.0, "BLOCK": 64}
    assert [t.name for t in no_bias.tensors] == ["x_ptr", "out_ptr"]
    assert [a.tensor for a in no_bias.accesses(program=0)] == ["x_ptr", "out_ptr"]
    assert [a.tensor for a in with_bias.accesses(program=1)] == ["x_ptr", "bias_ptr", "out_ptr"]


def test_atomics_record_their_op():
    x = torch.randint(0, 10, (70,), dtype=torch.int32)
    bins, stats = K.histogram(x, 10, kernel=trace(K.make_histogram()), block=32)
    assert bins.tolist() == torch.bincount(x, minlength=10).tolist()
    v = x.numpy()
    assert stats.tolist() == [int(v.max()), int(v.min()), int(np.bitwise_or.reduce(v))]
    lc = only_launch()
    for pid in range(3):
        offs = pid * 32 + np.arange(32)
        mask = offs < 70
        acc = lc.accesses(program=pid)
        assert [a.kind for a in acc] == ["load", "atomic_add", "atomic_max", "atomic_min", "atomic_or"]
        check(acc[1], "atomic_add", "bins_ptr", np.where(mask, v[np.minimum(offs, 69)], 0), mask)
        for a, slot in zip(acc[2:], (0, 1, 2)):
            check(a, a.kind, "stats_ptr", np.full(32, slot), mask)
            np.testing.assert_array_equal(a.values[mask], v[offs[mask]])
        assert acc[1].values[mask].tolist() == [1] * int(mask.sum())


def test_scan_is_recorded():
    x = torch.randn(3, 24)[:, :20]
    torch.testing.assert_close(K.cumsum(x, kernel=trace(K.make_cumsum())), torch.cumsum(x, 1), atol=1e-5, rtol=1e-5)
    lc = only_launch()
    scans = [o for o in lc.all_ops(program=2) if o.kind == "scan"]
    assert len(scans) == 1 and scans[0].line == line_of(K.cumsum_kernel, "tl.cumsum")
    check(lc.accesses(program=2)[0], "load", "x_ptr", 48 + np.arange(32), np.arange(32) < 20)


@trace
@triton.jit
def _copy_masked(x, out, n, BLOCK: triton.language.constexpr):
    offs = triton.language.program_id(0) * BLOCK + triton.language.arange(0, BLOCK)
    m = offs < n
    triton.language.store(out + offs, triton.language.load(x + offs, mask=m), mask=m)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int64, torch.int8])
def test_narrow_and_wide_dtypes_record_true_values_and_offsets(dtype):
    """Values of every dtype read back as the numbers the tensor holds (bfloat16 has no numpy dtype: the
    interpreter carries raw bits, which the recorder widens to float32), and offsets count elements."""
    x = torch.arange(40).to(dtype)
    out = torch.empty(40, dtype=dtype)
    triton_trace.reset()
    _copy_masked[(2,)](x, out, 40, BLOCK=32)
    assert torch.equal(out, x)
    load, store = only_launch().accesses(program=1)
    expect = np.arange(32, 64)
    check(load, "load", "x", expect, expect < 40)
    np.testing.assert_array_equal(load.values[load.mask].astype(np.float64), np.arange(32, 40))
    np.testing.assert_array_equal(store.values[store.mask].astype(np.float64), np.arange(32, 40))
    assert load.elem_bytes == store.elem_bytes == x.element_size()
