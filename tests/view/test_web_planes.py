"""Small multiples (GET /api/launch/<i>/planes/<t>): every plane of a 3-D tensor along its outer dim, through
the Flask client. Program p of the kernel below reads plane p of x and writes rows p..p+3 of plane p of y
(masked to the plane); every expected cell is computed here with numpy from that rule and the tensors
themselves, never read back from the tool."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.view import embed
from triton_trace.view.limits import MAX_PANELS, MAX_PLANE_CELLS, MAX_TENSOR_BYTES, MULTIPLES_DEFAULT

WRITTEN = 4           # rows program p writes, from row p on


@triton.jit
def plane_rows_kernel(x_ptr, y_ptr, sxb, sxr, R: tl.constexpr, C: tl.constexpr):
    p = tl.program_id(0)
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + p * sxb + r * sxr + c)
    tl.store(y_ptr + p * R * C + r * C + c, x * 2.0 + p, mask=(r >= p) & (r < p + 4))


def run(x: torch.Tensor) -> torch.Tensor:
    B, R, C = x.shape
    y = torch.zeros(B, R, C)
    plane_rows_kernel[(B,)](x, y, x.stride(0), x.stride(1), R=R, C=C)
    return y


def written(B, R, C) -> np.ndarray:
    """(B, R, C) bool: the elements of y the kernel writes (program p: rows p..p+3 of plane p)."""
    p, r = np.arange(B)[:, None, None], np.arange(R)[None, :, None]
    return np.broadcast_to((r >= p) & (r < p + WRITTEN), (B, R, C))


@pytest.fixture(scope="module")
def traced():
    """Launches: 0 a (4, 8, 16) x and y; 1 a (40, 8, 4) one (more planes than MAX_PANELS); 2 a (4, 128, 128)
    one (each panel downsampled); 3 an x expanded from one plane (stride 0: every plane is the same storage)."""
    triton_trace.reset()
    g = torch.Generator().manual_seed(0)
    kernel = triton_trace.trace(plane_rows_kernel)
    xs = [torch.randn(4, 8, 16, generator=g), torch.randn(40, 8, 4, generator=g), torch.randn(4, 128, 128, generator=g),
          torch.randn(1, 8, 16, generator=g).expand(4, 8, 16)]
    ys = []
    for x in xs:
        B, R, C = x.shape
        y = torch.zeros(B, R, C)
        kernel[(B,)](x, y, x.stride(0), x.stride(1), R=R, C=C)
        ys.append(y)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr, xs, ys


@pytest.fixture
def client(traced, make_client):
    return make_client(traced[0])


def get(client, url):
    r = client.get(url)
    assert r.status_code == 200, (url, r.get_data(as_text=True)[:300])
    return r.get_json()


def test_every_plane_of_a_3d_tensor_holds_what_its_program_wrote(client, traced):
    _, xs, ys = traced
    x, y = xs[0].numpy(), ys[0].numpy()
    B, R, C = x.shape
    want = written(B, R, C)
    d = get(client, "/api/launch/0/planes/1?mode=all")
    assert (d["dim"], d["first"], d["total"], d["dropped"], d["elements_hidden"]) == (0, 0, B, [], 0)
    assert d["elements"] == int(want.sum()) and [p["index"] for p in d["panels"]] == list(range(B))
    for k, panel in enumerate(d["panels"]):
        pl, cells = panel["plane"], panel["cells"]
        assert (pl["row_dim"], pl["col_dim"], pl["index"][0], pl["cell"]) == (1, 2, k, [1, 1])
        rows, cols = np.nonzero(want[k])
        assert cells["cell"] == (rows * C + cols).tolist()              # row-major cells of plane k
        assert set(cells["kinds"]) == {2} and set(cells["program"]) == {k}
        assert set(cells["writers"]) == {1} and set(cells["lanes"]) == {1}
        expect = (x[k] * np.float32(2) + np.float32(k))[rows, cols]
        np.testing.assert_allclose(np.array(cells["value"], float), expect, rtol=1e-5)
        assert panel["halo"] == {"row": [], "col": [], "offset": [], "hidden": 0}
    # x: program p read all of plane p
    d = get(client, "/api/launch/0/planes/0?mode=all")
    for k, panel in enumerate(d["panels"]):
        assert panel["cells"]["cell"] == list(range(R * C)) and set(panel["cells"]["program"]) == {k}
        np.testing.assert_allclose(np.array(panel["cells"]["value"], float), x[k].reshape(-1), rtol=1e-5)


def test_one_programs_selection_touches_its_own_plane_only(client, traced):
    B, R, C = traced[1][0].shape
    want = written(B, R, C)
    d = get(client, "/api/launch/0/planes/1?mode=program&program=2")
    assert d["selection"] == {"mode": "program", "program": [2, 0, 0], "op": None}
    got = [len(p["cells"]["cell"]) for p in d["panels"]]
    assert got == [0, 0, int(want[2].sum()), 0]
    # the program's store op alone (op 1: its load is op 0)
    d = get(client, "/api/launch/0/planes/1?mode=op&program=3&op=1")
    assert [len(p["cells"]["cell"]) for p in d["panels"]] == [0, 0, 0, int(want[3].sum())]


def test_planes_past_the_cap_are_stepped_to(client, traced):
    B, R, C = traced[1][1].shape                       # 40 planes of 8 x 4
    want = written(B, R, C)
    first = get(client, "/api/launch/1/planes/1?mode=all")
    assert (first["total"], len(first["panels"])) == (B, MAX_PANELS)
    rest = get(client, f"/api/launch/1/planes/1?mode=all&first={MAX_PANELS}")
    assert [p["index"] for p in rest["panels"]] == list(range(MAX_PANELS, B))
    # the elements on planes not drawn are counted as hidden
    assert first["elements_hidden"] == int(want[MAX_PANELS:].sum()) and rest["elements_hidden"] == int(want[:MAX_PANELS].sum())
    assert client.get(f"/api/launch/1/planes/1?first={B}").status_code == 400


def test_big_planes_are_downsampled_to_their_share_of_the_cells(client, traced):
    B, R, C = traced[1][2].shape                       # 4 planes of 128 x 128
    want = written(B, R, C)
    d = get(client, "/api/launch/2/planes/1?mode=all")
    per = MAX_PLANE_CELLS // B
    for k, panel in enumerate(d["panels"]):
        pl = panel["plane"]
        fr, fc = pl["cell"]
        assert pl["cell_rows"] * pl["cell_cols"] <= per and fr * fc > 1
        share = want[k].reshape(R // fr, fr, C // fc, fc).mean(axis=(1, 3)).reshape(-1)
        assert panel["cells"]["cell"] == np.flatnonzero(share).tolist()
        np.testing.assert_allclose(panel["cells"]["fill"], share[share > 0], atol=1e-4)
        assert "value" not in panel["cells"]
    assert len(client.get("/api/launch/2/planes/0?mode=all").data) <= MAX_TENSOR_BYTES


def test_an_expanded_tensor_shows_its_one_plane_on_every_panel(client, traced):
    x = traced[1][3]
    assert x.stride(0) == 0
    B, R, C = x.shape
    d = get(client, "/api/launch/3/planes/0?mode=all")
    for panel in d["panels"]:
        cells = panel["cells"]
        assert cells["cell"] == list(range(R * C)) and set(cells["kinds"]) == {1}
        assert set(cells["program"]) == {0} and set(cells["programs"]) == {B}     # every program read it


def test_bad_requests_name_what_to_fix(client, small_trace, make_client):
    vector = make_client(small_trace).get("/api/launch/0/planes/0?mode=all")     # a 1-D tensor
    assert vector.status_code == 400 and "small multiples need rank 3" in vector.get_json()["error"]
    assert client.get("/api/launch/0/planes/1?dim=1").status_code == 400          # rows are dim 1
    assert client.get("/api/launch/0/planes/1?index=0,0").status_code == 400


def test_a_notebook_output_carries_the_small_multiples_the_page_opens(traced):
    tr = traced[0]
    lc = tr.launches[0]
    assert embed.panels_first(lc.tensors[1].shape) and not embed.panels_first(tr.launches[1].tensors[1].shape)
    assert 4 <= MULTIPLES_DEFAULT < 40
    from triton_trace.view.lookup import TraceIndex
    answers, _ = embed.snapshot(TraceIndex(tr), {"view": "launch", "li": 0, "pid": [1, 0, 0], "op": None})
    assert "/api/launch/0/planes/1?mode=program&program=1%2C0%2C0" in answers
    assert "/api/launch/0/planes/0?mode=all" in answers
