"""Storage offsets back to view indices, for every kind of view, checked against brute force.

The brute force is ``TensorInfo.view_offsets()``: the storage offset of every view element, in view
order. Whatever a layout is (transposed, strided, offset, broadcast, overlapping), the tensor view must
draw an element exactly when its storage offset was touched.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from triton_trace.model import TensorInfo
from triton_trace.view.tensormap import MAX_CELLS, PlaneError, cell_sizes, cells, invertible, locate, make_plane, \
    view_index
from helpers import webcases as K


def info_of(t: torch.Tensor, name="t") -> TensorInfo:
    st = t.untyped_storage().nbytes() // t.element_size()
    return TensorInfo(name, "float32", tuple(t.shape), tuple(t.stride()), t.storage_offset(), st, t.element_size())


def views():
    base = torch.zeros(6, 10)
    big = torch.zeros(4, 5, 6)
    return {
        "contiguous": base,
        "transposed": base.t(),
        "row slice with offset": base[2:5],
        "column slice": base[:, 3:8],
        "stepped": base[::2, 1::3],
        "3-D permuted": big.permute(2, 0, 1),
        "3-D sliced": big[1:3, ::2, 4:],
        "broadcast (stride 0)": torch.zeros(7).expand(3, 7),
        "overlapping as_strided": torch.zeros(40).as_strided((4, 5), (3, 1), 2),
        "1-D strided": torch.zeros(50)[3::4],
    }


@pytest.mark.parametrize("name", list(views()))
def test_locate_matches_brute_force(name):
    t = views()[name]
    info = info_of(t)
    full = info.view_offsets()                                 # storage offset of every view element
    rng = np.random.default_rng(1)
    storage = np.arange(info.storage_size)
    touched = np.unique(rng.choice(storage, size=max(1, len(storage) // 3), replace=False))
    rank = len(info.shape)
    if rank == 2:
        planes = [(None, None, None)]
    elif rank == 3:
        planes = [(0, 2, (0, 1, 0)), (2, 1, (1, 0, 0))]
    else:
        planes = [(None, None, None)]
    hit = set(touched.tolist())
    for rows, cols, index in planes:
        plane = make_plane(info, rows, cols, index, wrap=7 if rank == 1 else None)
        pos, entry, placed, r, c = locate(info, plane, touched)
        want = set()                                           # brute force: walk the plane's elements
        for pr in range(plane.rows):
            for pc in range(plane.cols):
                if rank == 1 and pr * plane.wrap + pc >= info.shape[0]:
                    continue
                if full[_idx(plane, pr, pc, rank)] in hit:
                    want.add((pr, pc))
        assert set(zip(r.tolist(), c.tolist())) == want
        assert len(pos) == len(want)                           # each drawn element once
        for e, rr, cc in zip(entry, r, c):                     # and drawn with its own storage element
            assert touched[e] == full[_idx(plane, rr, cc, rank)]
    assert invertible(info) == (name not in ("broadcast (stride 0)", "overlapping as_strided"))


def _idx(plane, r, c, rank):
    if rank == 1:
        return (int(r) * plane.wrap + int(c),)
    idx = list(plane.index)
    idx[plane.row_dim], idx[plane.col_dim] = int(r), int(c)
    return tuple(idx)


def test_view_index_inverts_a_transposed_view():
    info = info_of(torch.zeros(5, 8)[1:, 2:].t())                # shape (6, 4), strides (1, 8), offset 10
    off = info.view_offsets()
    idx, ok = view_index(info, off.reshape(-1))
    assert ok.all()
    assert [tuple(i) for i in idx] == [(a, b) for a in range(6) for b in range(4)]
    _, ok = view_index(info, np.array([0, 9, 16, 40]))           # before the view, row padding, past the end
    assert not ok.any()


def test_downsampling_and_windows():
    info = TensorInfo("big", "float32", (1000, 3000), (3000, 1), 0, 3_000_000, 4)
    plane = make_plane(info)
    assert plane.cell_rows * plane.cell_cols <= MAX_CELLS and plane.fr > 1
    assert cell_sizes(plane, np.arange(plane.cell_rows * plane.cell_cols)).sum() == 3_000_000
    w = make_plane(info, window=(10, 30, 100, 140))
    assert (w.rows, w.cols, w.fr, w.fc, w.r0, w.c0) == (20, 40, 1, 1, 10, 100)
    pos, entry, placed, r, c = locate(info, w, np.array([10 * 3000 + 100, 29 * 3000 + 139, 9 * 3000 + 100]))
    assert pos.tolist() == [0, 19 * 40 + 39] and placed.tolist() == [True, True, False]
    assert cells(w, pos).tolist() == [0, 19 * 40 + 39]
    for bad in ((0, 0, 0, 1), (5, 2, 0, 1), (0, 1001, 0, 1), (-1, 2, 0, 1)):
        with pytest.raises(PlaneError):
            make_plane(info, window=bad)


def test_wrapped_1d_cell_sizes():
    info = TensorInfo("v", "float32", (10,), (1,), 0, 10, 4)
    plane = make_plane(info, wrap=4)                               # rows of 4, 4, 2
    assert (plane.rows, plane.cols) == (3, 4)
    assert cell_sizes(plane, np.arange(12)).tolist() == [1] * 10 + [0, 0]


def test_empty_tensor():
    info = TensorInfo("e", "float32", (0, 5), (5, 1), 0, 0, 4)
    plane = make_plane(info)
    assert (plane.rows, plane.cols) == (0, 5)
    pos, entry, placed, _, _ = locate(info, plane, np.zeros(0, np.int64))
    assert len(pos) == 0 and len(placed) == 0


def test_scalar_tensor():
    info = TensorInfo("s", "float32", (), (), 3, 8, 4)
    plane = make_plane(info)
    pos, entry, placed, _, _ = locate(info, plane, np.array([2, 3]))
    assert pos.tolist() == [0] and placed.tolist() == [False, True]


# ---------------------------------------------------------------------------------------------------------
# through the API: a zoomed window and a blocked grid
# ---------------------------------------------------------------------------------------------------------
def test_auto_window_zooms_to_the_selection(make_client):
    c = make_client(K.synthetic_tiled(64, 64, 16, 16))
    d = c.get("/api/launch/0/tensor/0?mode=program&program=5,7&window=auto").get_json()
    pl = d["plane"]
    assert pl["windowed"] and pl["cell"] == [1, 1]
    r0, c0 = pl["origin"]
    got = {(r0 + k // pl["cell_cols"], c0 + k % pl["cell_cols"]) for k in d["cells"]["cell"]}
    assert got == {(r, cc) for r in range(80, 96) for cc in range(112, 128)}
    assert d["elements"] == 256 and d["elements_hidden"] == 0
    small = c.get("/api/launch/0/tensor/0?mode=program&program=5,7&window=0,8,0,8").get_json()
    assert small["plane"]["full"] == [1024, 1019] and small["elements_hidden"] == 256
    for bad in ("1,2,3", "5,2,0,1", "0,2000,0,1", "a,b,c,d"):
        r = c.get(f"/api/launch/0/tensor/0?mode=all&window={bad}")
        assert r.status_code == 400 and r.get_json()["status"] == 400


def test_big_grids_are_blocked(make_client):
    c = make_client(K.synthetic_tiled(256, 256, 1, 1, ragged=0))
    d = c.get("/api/launch/0/grid").get_json()
    assert d["block"] == [2, 2] and d["cols"] * d["rows"] <= 1 << 14
    assert sum(d["metrics"]["load_bytes"]) == 256 * 256 * 4
    assert len(c.get("/api/launch/0/grid").get_data()) < 1_000_000
