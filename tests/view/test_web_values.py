"""Recorded values on the storage and tiles views (``values`` of GET /api/launch/<i>/storage/<t> and of each
tile of GET /api/launch/<i>/tiles/<pid>), through the Flask client: a 64^3 matmul's tile cells hold the torch
inputs at their indices, and a storage past MAX_VALUE_CELLS touched cells sends block means, with NaN and the
infinities kept. Every expectation is computed here with torch and numpy."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from kernels import layouts as L
from triton_trace.view.limits import MAX_VALUE_CELLS

SIZE, BLOCK = 64, 32


@triton.jit
def copy_rows_kernel(x_ptr, y_ptr, C: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, C)[None, :]
    tl.store(y_ptr + r * C + c, tl.load(x_ptr + r * C + c))


@pytest.fixture(scope="module")
def traced():
    """Launch 0: C = A @ B at 64^3 in 32 x 32 tiles (B a transposed view); launch 1: a (128, 128) copy whose
    x holds a NaN, a +Inf and a -Inf."""
    triton_trace.reset()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(SIZE, SIZE, generator=g), torch.randn(SIZE, SIZE, generator=g).t()
    L.matmul(triton_trace.trace(L.tiled_matmul), a, b, block=BLOCK, block_k=BLOCK)
    x = torch.randn(128, 128, generator=g)
    x[5, 7], x[40, 41], x[100, 3] = float("nan"), float("inf"), float("-inf")
    triton_trace.trace(copy_rows_kernel)[(8,)](x, torch.empty_like(x), C=128, ROWS=16)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr, a, b, x


@pytest.fixture
def client(traced, make_client):
    return make_client(traced[0])


def get(client, url):
    r = client.get(url)
    assert r.status_code == 200, (url, r.get_data(as_text=True)[:300])
    return r.get_json()


def by_cell(values) -> dict:
    """{value-grid cell: value} of a ``values`` field (its runs and the parallel list)."""
    cells = [k for first, count in values["runs"] for k in range(first, first + count)]
    assert len(cells) == len(values["value"])
    return dict(zip(cells, values["value"]))


def six(v) -> float:
    return float(f"{float(v):.6g}")


def test_a_matmul_tile_holds_the_inputs_at_their_indices(client, traced):
    _, a, b, _ = traced
    A, Bm, Cm = a.numpy(), b.numpy(), (a.double() @ b.double()).numpy()
    d = get(client, "/api/launch/0/tiles/1,0,0")           # pid_m 1, pid_n 0: A rows 32..63, B cols 0..31
    tiles = {t["name"]: t for t in d["tensors"]}
    for name, want, rows, cols in (("a_ptr", A, slice(32, 64), slice(0, SIZE)), ("b_ptr", Bm, slice(0, SIZE), slice(0, 32)),
                                   ("c_ptr", Cm, slice(32, 64), slice(0, 32))):
        t = tiles[name]
        assert t["plane"]["cell"] == [1, 1] and t["values"]["exact"] and t["values"]["block"] == [1, 1]
        got = by_cell(t["values"])
        r, c = np.mgrid[rows, cols]
        assert sorted(got) == sorted((r * SIZE + c).reshape(-1).tolist())
        np.testing.assert_allclose([got[k] for k in (r * SIZE + c).reshape(-1)], want[rows, cols].reshape(-1),
                                   rtol=1e-5 if name != "c_ptr" else 1e-4, atol=0 if name != "c_ptr" else 1e-4)
    # one trip: A's columns and B's rows of that trip only
    step = {t["name"]: t for t in get(client, "/api/launch/0/tiles/1,0,0?step=1")["tensors"]}
    got = by_cell(step["a_ptr"]["values"])
    assert sorted(got) == sorted(r * SIZE + c for r in range(32, 64) for c in range(32, 64))
    assert got[40 * SIZE + 37] == six(A[40, 37])
    got = by_cell(step["b_ptr"]["values"])
    assert got[33 * SIZE + 5] == six(Bm[33, 5]) and len(got) == 32 * 32


def test_the_storage_of_a_transposed_view_holds_its_storage_order_values(client, traced):
    b = traced[2]
    assert b.stride() == (1, SIZE)
    s = get(client, "/api/launch/0/storage/1")
    assert s["plane"]["cell"] == [1, 1] and s["values"]["exact"]
    got = by_cell(s["values"])
    storage = b.t().contiguous().reshape(-1).numpy()       # storage offset o holds b.t()'s o-th element
    assert sorted(got) == list(range(SIZE * SIZE))
    np.testing.assert_allclose([got[o] for o in range(SIZE * SIZE)], storage, rtol=1e-5)


def test_past_the_bound_values_are_block_means_that_keep_nan_and_inf(traced, make_client):
    x = traced[3].numpy().astype(np.float64)
    s = get(make_client(traced[0]), "/api/launch/1/storage/0")
    assert s["plane"]["cell"] == [1, 1] and s["plane"]["wrap"] == 128
    v = s["values"]
    br, bc = v["block"]
    assert not v["exact"] and br * bc > 1 and v["cols"] == 128 // bc
    assert (128 // br) * (128 // bc) <= MAX_VALUE_CELLS and br * bc == 128 * 128 // MAX_VALUE_CELLS   # no coarser than needed
    blocks = x.reshape(128 // br, br, 128 // bc, bc).transpose(0, 2, 1, 3).reshape(128 // br, 128 // bc, -1)
    got = by_cell(v)
    assert sorted(got) == list(range((128 // br) * (128 // bc)))
    for (r, c), k in ((divmod(k, 128 // bc), k) for k in got):
        block = blocks[r, c]
        if np.isnan(block).any():
            want = "nan"
        elif np.isposinf(block).any():
            want = "inf"
        elif np.isneginf(block).any():
            want = "-inf"
        else:
            want = six(block.mean())
        assert got[k] == want if isinstance(want, str) else abs(got[k] - want) <= 1e-5 * max(1.0, abs(want)), (r, c)
    assert got[(5 // br) * (128 // bc) + 7 // bc] == "nan" and got[(100 // br) * (128 // bc) + 3 // bc] == "-inf"


def test_a_view_without_recorded_values_says_none(make_client):
    from helpers import synthetic as S
    from triton_trace.model import Trace
    lc = S.load_launch(shape=(16,), ops=[((0, 0, 0), np.arange(16), None)])
    s = get(make_client(Trace((lc,))), "/api/launch/0/storage/0")
    assert s["values"] is None and s["cells"] == [[0, 16, 1, 1.0]]


def test_an_element_fed_only_from_past_the_inputs_end_lists_that_load_with_no_indices(make_client):
    """out[i] = x[i + 1]: the last element's load reads one past x's end, so its feed has no element of the
    view to name (it used to fail with an IndexError, answering a 500)."""
    from helpers.webcases import traced_shift
    n = 200
    triton_trace.reset()
    traced_shift(n=n, block=64)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    client = make_client(tr)
    last = get(client, f"/api/launch/0/feeds/1?index={n - 1}")
    (feed,) = last["feeds"]
    assert (feed["name"], feed["elements"], feed["outside"], feed["indices"], feed["ranges"]) == ("x_ptr", 1, 1, [], [])
    inside = get(client, f"/api/launch/0/feeds/1?index={n - 2}")["feeds"][0]
    assert (inside["indices"], inside["outside"]) == ([[n - 1]], 0)
