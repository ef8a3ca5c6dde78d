"""The storage view (GET /api/launch/<i>/storage/<t>) and one program's tiles side by side
(GET /api/launch/<i>/tiles/<pid>), through the Flask client. Every expectation is computed here from the
kernels' parameters and the tensors' own shapes, strides and offsets (tests/kernels/layouts.py), never read
back from the tool."""
from __future__ import annotations

import base64
import json
import re
import zlib

import numpy as np
import pytest
import torch

import triton_trace
from helpers import synthetic as S
from helpers.webcases import synthetic_tiled
from kernels import broken as B
from kernels import layouts as L
from triton_trace.model import Trace
from triton_trace.view import notebook as nb
from triton_trace.view import routes as R
from triton_trace.view.limits import MAX_PLANE_CELLS, MAX_TENSOR_BYTES, MAX_TILE_CELLS

SIZE, BLOCK = 64, 32          # the matmul: M = N = K = 64 in tiles of 32, so every program makes 2 K trips


def _traced(run) -> Trace:
    triton_trace.reset()
    run()
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


def _views():
    """Launches of strided_read over: 0 a row-padded x (row stride 8 > 5 columns), 1 a transposed view of
    which only rows 0..3 are read, 2 a slice with a storage offset, 3 an expanded (stride 0) dim."""
    kernel = triton_trace.trace(L.strided_read)
    L.read_rows(kernel, torch.randn(6, 8)[:, :5])
    L.read_rows(kernel, torch.randn(5, 6).t(), rows=4)
    L.read_rows(kernel, torch.randn(8, 8)[2:6, 1:4])
    L.read_rows(kernel, torch.randn(1, 5).expand(6, 5))


@pytest.fixture(scope="module")
def views():
    return _traced(_views)


@pytest.fixture
def client(views, make_client):
    return make_client(views)


def _get(client, url):
    r = client.get(url)
    assert r.status_code == 200, (url, r.get_data(as_text=True)[:300])
    return r.get_json()


def _covered(payload) -> np.ndarray:
    """The cover runs expanded to one fill per cell."""
    pl = payload["plane"]
    out = np.zeros(pl["cell_rows"] * pl["cell_cols"])
    for first, count, fill in payload["cover"]["runs"]:
        out[first:first + count] = fill
    return out


def _cells_of(runs) -> list:
    """The cells of runs [first, count, ...], in order."""
    return [k for first, count, *_ in runs for k in range(first, first + count)]


def _kinds(runs) -> set:
    return {r[2] for r in runs}


def _offsets(shape, strides, offset, rows=None) -> np.ndarray:
    """Storage offsets of the view's elements (of its first ``rows`` rows), by the definition of strides."""
    i = np.arange(shape[0] if rows is None else rows)[:, None]
    j = np.arange(shape[1])[None, :]
    return np.unique(offset + i * strides[0] + j * strides[1])


def test_a_row_padded_tensor_shows_its_padding(client):
    M, N, P = 6, 5, 8
    s = _get(client, "/api/launch/0/storage/0")
    assert (s["shape"], s["strides"], s["storage_offset"], s["storage_size"], s["elem_bytes"]) == ([M, N], [P, 1], 0, M * P, 4)
    lay = s["layout"]
    # storage M * P elements, M * N of them logical: the rest is every row's tail of P - N
    assert lay["covered"] == M * N and lay["padding"] == M * (P - N) and lay["padding_bytes"] == 4 * M * (P - N)
    assert lay["span"] == [0, (M - 1) * P + N - 1]
    assert (lay["before"], lay["gaps"], lay["after"]) == (0, (M - 1) * (P - N), P - N)
    assert not lay["contiguous"] and lay["expanded"] == []
    # drawn a row of storage (the row stride) per row: logical elements in columns 0..N-1, padding after
    pl = s["plane"]
    assert (pl["wrap"], pl["rows"], pl["cols"], pl["cell"]) == (P, M, P, [1, 1])
    want = np.zeros(M * P)
    want[_offsets((M, N), (P, 1), 0)] = 1
    assert np.array_equal(_covered(s), want)
    # the kernel read every logical element, nothing else
    assert _cells_of(s["cells"]) == _offsets((M, N), (P, 1), 0).tolist() and _kinds(s["cells"]) == {1}
    assert len(s["cells"]) == M and len(s["cover"]["runs"]) == M         # a run a row
    assert s["oob_lanes"] == 0 and s["halo"]["offset"] == []


def test_a_transposed_view_is_drawn_in_storage_order(client):
    rows = 4                               # x = base.t(), base (5, 6) contiguous: x[i, j] sits at i + 6 j
    s = _get(client, "/api/launch/1/storage/0")
    assert s["strides"] == [1, 6] and s["storage_size"] == 30
    lay = s["layout"]
    assert lay["padding"] == 0 and lay["covered"] == 30 and lay["order"] == [1, 0] and not lay["contiguous"]
    assert s["plane"]["wrap"] == 6                         # a storage row is a column of x
    assert np.array_equal(_covered(s), np.ones(30))
    read = _offsets((6, 5), (1, 6), 0, rows=rows)
    assert _cells_of(s["cells"]) == read.tolist()
    # in storage, what rows 0..3 of x read are columns 0..3 of every storage row
    drawn = np.zeros((5, 6), bool)
    drawn.flat[_cells_of(s["cells"])] = True
    assert drawn[:, :rows].all() and not drawn[:, rows:].any()


def test_a_slice_leaves_padding_before_between_and_after(client):
    s = _get(client, "/api/launch/2/storage/0")          # base (8, 8)[2:6, 1:4]
    offset, shape, strides = 2 * 8 + 1, (4, 3), (8, 1)
    assert (s["storage_offset"], s["shape"], s["strides"], s["storage_size"]) == (offset, list(shape), list(strides), 64)
    lay = s["layout"]
    last = offset + 3 * 8 + 2
    assert lay["span"] == [offset, last] and lay["covered"] == 12
    assert (lay["before"], lay["gaps"], lay["after"]) == (offset, last - offset + 1 - 12, 64 - last - 1)
    assert lay["padding"] == 64 - 12 and lay["padding_bytes"] == 4 * (64 - 12)
    want = np.zeros(64)
    want[_offsets(shape, strides, offset)] = 1
    assert np.array_equal(_covered(s), want)
    assert _cells_of(s["cells"]) == _offsets(shape, strides, offset).tolist()


def test_an_expanded_dim_covers_one_element_many_times(client):
    s = _get(client, "/api/launch/3/storage/0")          # (1, 5).expand(6, 5): strides (0, 1)
    lay = s["layout"]
    assert s["strides"] == [0, 1] and s["storage_size"] == 5
    assert lay["elements"] == 30 and lay["covered"] == 5 and lay["expanded"] == [0] and lay["padding"] == 0
    assert s["plane"]["wrap"] == 5
    assert s["cells"] == [[0, 5, 1, 1.0]]                    # each of the 5 read (by 6 rows each)


def test_the_storage_follows_a_program_and_an_op(client):
    # the transposed view: program (0, 0) reads rows 0..3, its op 0 is that load; the store is to out
    prog = _get(client, "/api/launch/1/storage/0?mode=program&program=0,0,0")
    op = _get(client, "/api/launch/1/storage/0?mode=op&program=0,0,0&op=0")
    read = _offsets((6, 5), (1, 6), 0, rows=4).tolist()
    assert _cells_of(prog["cells"]) == read == _cells_of(op["cells"])
    assert op["selection"] == {"mode": "op", "program": [0, 0, 0], "op": 0}
    out = _get(client, "/api/launch/1/storage/1?mode=op&program=0,0,0&op=1")
    assert out["cells"] == [[0, 4 * 5, 2, 1.0]]
    assert client.get("/api/launch/1/storage/0?mode=op&program=0,0,0&op=1").status_code == 400   # op 1 is out's
    assert client.get("/api/launch/1/storage/7").status_code == 404
    # a chosen row length: 5 elements a row, the read offsets at their own positions
    w = _get(client, "/api/launch/1/storage/0?wrap=5")
    assert (w["plane"]["wrap"], w["plane"]["rows"]) == (5, 6) and _cells_of(w["cells"]) == read


def test_out_of_bounds_lanes_sit_in_the_halo_past_the_storages_end(make_client):
    n, block = 250, 64                     # scale_off_by_one: "offs <= n" reads and writes offset n
    tr = _traced(lambda: B.run_scale(B.scale_off_by_one, False))
    s = _get(make_client(tr), "/api/launch/0/storage/0")
    assert s["storage_size"] == n and s["oob_lanes"] == 1 and s["oob_examples"] == [n]
    assert s["plane"]["wrap"] == block and s["plane"]["rows"] == -(-n // block)
    assert s["halo"]["offset"] == [n] and (s["halo"]["row"], s["halo"]["col"]) == ([n // block], [n % block])
    assert _cells_of(s["cells"]) == list(range(n))


def test_a_large_storage_is_downsampled_and_bounded(make_client):
    M, N, P = 2048, 2000, 2048                      # 4 M elements, 48 of every 2048 padding
    tile = (np.arange(16)[:, None] * P + np.arange(16)[None, :])
    lc = S.launch([S.tensor("x", (M, N), (P, 1), storage_size=M * P)],
                  [{"program": (0, 0, 0), "kind": "load", "tensor": 0, "offsets": tile}])
    c = make_client(Trace((lc,)))
    r = c.get("/api/launch/0/storage/0")
    assert len(r.get_data()) <= MAX_TENSOR_BYTES
    s = r.get_json()
    pl = s["plane"]
    assert pl["cell_rows"] * pl["cell_cols"] <= MAX_PLANE_CELLS and pl["wrap"] == P
    fr, fc = pl["cell"]
    # each cell's share of logical elements: the share of its columns below N
    cols = np.arange(pl["cell_cols"])
    share = np.clip(N - cols * fc, 0, fc) / fc
    assert np.allclose(_covered(s).reshape(pl["cell_rows"], pl["cell_cols"]), share[None, :], atol=1e-3)
    assert s["layout"]["padding"] == M * (P - N)
    zoomed = c.get("/api/launch/0/storage/0?mode=program&program=0,0,0&window=auto").get_json()
    assert zoomed["plane"]["cell"] == [1, 1] and zoomed["plane"]["windowed"]
    zp = zoomed["plane"]
    drawn = [((zp["origin"][0] + cell // zp["cell_cols"]) * P + zp["origin"][1] + cell % zp["cell_cols"])
             for cell in _cells_of(zoomed["cells"])]
    assert sorted(drawn) == sorted(tile.reshape(-1).tolist())


# --------------------------------------------------------------------------------------------------------
# one program's tiles
# --------------------------------------------------------------------------------------------------------
def _matmul(b_transposed: bool):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(SIZE, SIZE, generator=g)
    b = torch.randn(SIZE, SIZE, generator=g)
    b = b.t().contiguous().t() if b_transposed else b          # the same values, column-major strides
    L.matmul(triton_trace.trace(L.tiled_matmul), a, b, block=BLOCK, block_k=BLOCK)


def _cells(rows, cols) -> list:
    """Cells of a whole 64 x 64 plane (drawn element by element) at rows x cols, row-major."""
    return sorted(r * SIZE + c for r in rows for c in cols)


def _box(rows, cols) -> list:
    return [rows.start, rows.stop - 1, cols.start, cols.stop - 1]


@pytest.mark.parametrize("b_transposed", [False, True], ids=["b-contiguous", "b-transposed"])
def test_a_matmul_programs_tiles_and_its_k_trips(make_client, b_transposed):
    c = make_client(_traced(lambda: _matmul(b_transposed)))
    pm, pn = 1, 0
    mrows, ncols, every = range(pm * BLOCK, (pm + 1) * BLOCK), range(pn * BLOCK, (pn + 1) * BLOCK), range(SIZE)
    t = _get(c, f"/api/launch/0/tiles/{pm},{pn},0")
    assert (t["by"], t["steps"], t["trips"], t["step"]) == ("trip", SIZE // BLOCK, SIZE // BLOCK, None)
    assert t["ops"]["trip"] == [0, 0, 1, 1, -1] and t["outside"] == 1
    a, b, out = t["tensors"]
    assert [x["name"] for x in t["tensors"]] == ["a_ptr", "b_ptr", "c_ptr"]
    assert b["strides"] == ([1, SIZE] if b_transposed else [SIZE, 1])
    assert _cells_of(a["cells"]) == _cells(mrows, every) and a["box"] == _box(mrows, every)   # the A panel
    assert _cells_of(b["cells"]) == _cells(every, ncols) and b["box"] == _box(every, ncols)   # the B panel
    assert _cells_of(out["cells"]) == _cells(mrows, ncols) and _kinds(out["cells"]) == {2}   # the C tile
    assert _kinds(a["cells"]) == _kinds(b["cells"]) == {1}
    assert a["context"] == b["context"] == out["context"] == []
    for k in range(SIZE // BLOCK):
        kk = range(k * BLOCK, (k + 1) * BLOCK)
        s = _get(c, f"/api/launch/0/tiles/{pm},{pn},0?step={k}")
        a, b, out = s["tensors"]
        assert s["ops"]["trip"] == [k, k] and s["ops"]["seq"] == [3 * k, 3 * k + 1]
        assert _cells_of(a["cells"]) == _cells(mrows, kk) and a["box"] == _box(mrows, kk)
        assert _cells_of(b["cells"]) == _cells(kk, ncols) and b["box"] == _box(kk, ncols)
        assert out["cells"] == [] and out["box"] is None
        # the rest of what the program touches stays on the plane as context
        assert _cells_of(a["context"]) == sorted(set(_cells(mrows, every)) - set(_cells(mrows, kk)))
        assert _cells_of(b["context"]) == sorted(set(_cells(every, ncols)) - set(_cells(kk, ncols)))
        assert _cells_of(out["context"]) == _cells(mrows, ncols)
    assert c.get(f"/api/launch/0/tiles/{pm},{pn},0?step={SIZE // BLOCK}").status_code == 404
    assert c.get("/api/launch/0/tiles/2,0,0").status_code == 404


def test_without_a_repeated_line_the_steps_are_the_ops(client):
    t = _get(client, "/api/launch/0/tiles/0,0,0")            # the padded read: one load, one store
    assert (t["by"], t["steps"], t["trips"]) == ("op", 2, 0)
    x, out = t["tensors"]
    s0 = _get(client, "/api/launch/0/tiles/0,0,0?step=0")
    x0, out0 = s0["tensors"]
    assert len(_cells_of(x0["cells"])) == 30 and out0["cells"] == [] and len(_cells_of(out0["context"])) == 30
    assert x0["box"] == [0, 5, 0, 4]
    s1 = _get(client, "/api/launch/0/tiles/0,0,0?step=1")
    assert _kinds(s1["tensors"][1]["cells"]) == {2} and s1["ops"]["seq"] == [1]


def test_a_large_tensors_tile_is_framed_by_a_window(make_client):
    tr = synthetic_tiled(64, 64, 16, 16)                     # 1024 x 1019: far more than MAX_TILE_CELLS
    t = _get(make_client(tr), "/api/launch/0/tiles/3,5,0")
    for tile in t["tensors"]:
        pl = tile["plane"]
        assert pl["windowed"] and pl["cell"] == [1, 1] and pl["cell_rows"] * pl["cell_cols"] <= MAX_TILE_CELLS
        assert tile["box"] == [3 * 16, 3 * 16 + 15, 5 * 16, 5 * 16 + 15]
        assert len(_cells_of(tile["cells"])) == 256 and len(tile["cells"]) == 16         # a run a row


DATA = re.compile(r'<script type="application/json" id="tt-[0-9a-f]+-data">(.*?)</script>', re.S)


def test_a_notebook_output_carries_the_opened_programs_tiles_and_storage(make_client):
    tr = _traced(lambda: _matmul(False))
    data = json.loads(DATA.search(nb.launch_html(tr.launches[0], program=(1, 0, 0))).group(1))
    client = make_client(tr)
    urls = [R.url("tiles", i=0, pid=(1, 0, 0))] + [R.url("tiles", i=0, pid=(1, 0, 0), step=k) for k in (0, 1)]
    urls += [R.url("storage", i=0, t=t, mode="program", program=(1, 0, 0), window="auto") for t in range(3)]
    for url in urls:
        assert url in data["payloads"], url
        assert json.loads(zlib.decompress(base64.b64decode(data["payloads"][url]))) == client.get(url).get_json()
