"""The ``narrow_vector`` hint (analysis/advice/vectorize.py): a load or store whose data is contiguous and
aligned at run time while the kernel compiled for the GPU moves it in narrower vectors.

Each case checks the compiled kernel itself first (its PTX has no vector loads, or has them), independently of
the hint, then the hint's instruction and sector counts against counts made here by hand from the layout's
definition (thread t of warp w holds elements rep * tile + w * spt * 32 + t * spt + e) and the byte address of
every access (storages start 256-byte aligned on a GPU). A fixed twin (``tl.multiple_of`` on the pitch or the
offset) must compile to exactly the wider layout the hint predicted, and get no hint. A pitch that is odd,
or a view starting one element into its storage, is not aligned at run time: no hint, though the compiled
kernel is as narrow."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis import context
from triton_trace.analysis.memory.layouts import blocked

TARGET = "H200"                 # analyze()'s default GPU: sm_90
WARPS = 4


@triton.jit
def scale_rows(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, x * 2, mask=mask)


@triton.jit
def scale_rows_fixed(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    start = tl.multiple_of(row * stride, 4)      # on the argument itself it would be lost: it is no op
    x = tl.load(x_ptr + start + cols, mask=mask)
    tl.store(y_ptr + start + cols, x * 2, mask=mask)


@triton.jit
def tile(x_ptr, y_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :])
    tl.store(y_ptr + rm[:, None] * stride + rn[None, :], x + 1)


@triton.jit
def tile_fixed(x_ptr, y_ptr, stride, ALIGN: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = tl.multiple_of(rm[:, None] * stride, [ALIGN, ALIGN]) + rn[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, x + 1)


@triton.jit
def segments(x_ptr, y_ptr, starts_ptr, BLOCK: tl.constexpr):
    """Each program copies BLOCK elements from an offset read from memory (jagged rows)."""
    start = tl.load(starts_ptr + tl.program_id(0))
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + start + cols, tl.load(x_ptr + start + cols) * 3)


@triton.jit
def segments_fixed(x_ptr, y_ptr, starts_ptr, BLOCK: tl.constexpr):
    start = tl.multiple_of(tl.load(starts_ptr + tl.program_id(0)), 4)
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + start + cols, tl.load(x_ptr + start + cols) * 3)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def _run(kernel, grid, *args, **meta):
    """(the launch, its analysis summary) of one traced launch."""
    kernel = triton_trace.trace(kernel)
    kernel[grid](*args, **meta)
    tr = triton_trace.current_trace()
    return tr.launches[-1], triton_trace.analyze(tr, gpu=TARGET).to_dict()["launches"][-1]


def _compiled_accesses(launch) -> tuple:
    """(the compiled kernel's global load and store instructions, as the PTX lists them; its memory ops)."""
    c = launch.compiled(TARGET)
    ptx = [line.strip() for line in c.ir["ptx"].splitlines() if re.search(r"\b(ld|st)\.global", line)]
    return ptx, [o for o in c.ops if o["direction"] in ("load", "store") and o["layout"]]


def _narrow(summary) -> list:
    return [h for h in summary["hints"] if h["kind"] == "narrow_vector"]


def _numbers(hint) -> dict:
    """The counts a hint's text gives."""
    issue = re.search(r"would issue ([\d,]+) instructions instead of ([\d,]+) \((\d+) per warp", hint["effect"])
    same = re.search(r"the same ([\d,]+) sectors", hint["effect"])
    moved = re.search(r"fetch ([\d,]+) sectors instead of ([\d,]+)", hint["effect"])
    per_warp = re.search(r", (\d+) instructions per warp\)", hint["message"])
    n = lambda s: int(s.replace(",", ""))
    sectors = (n(same.group(1)), n(same.group(1))) if same else (n(moved.group(1)), n(moved.group(2)))
    return {"requests_wide": n(issue.group(1)), "requests": n(issue.group(2)), "per_warp_wide": int(issue.group(3)),
            "per_warp": int(per_warp.group(1)), "sectors_wide": sectors[0], "sectors": sectors[1],
            "bytes": int(re.search(r"(\d+)-byte vectors", hint["effect"]).group(1))}


def _hand_counts(row_starts, elem_bytes: int, rows: int, cols: int, spt: int, tpw: tuple, wpc: tuple) -> tuple:
    """(instructions, sectors, instructions per warp) of a (rows, cols) block per program, row r of program p
    starting at element ``row_starts[p][r]``, under the blocked layout sizePerThread [1, spt], threadsPerWarp
    ``tpw``, warpsPerCTA ``wpc`` (order [1, 0]) issuing ``spt`` elements per instruction. Every element
    active, every storage 256-byte aligned."""
    tile_r, tile_c = tpw[0] * wpc[0], spt * tpw[1] * wpc[1]
    assert cols % tile_c == 0
    requests = sectors = 0
    per_warp = max(rows // tile_r, 1) * (cols // tile_c)
    for starts in row_starts:
        for w in range(WARPS):
            wr, wc = divmod(w, wpc[1])
            for rep_r in range(max(rows // tile_r, 1)):
                for rep_c in range(cols // tile_c):
                    touched = set()
                    for lane in range(32):
                        lr, lc = divmod(lane, tpw[1])
                        r = (rep_r * tile_r + wr * tpw[0] + lr) % rows
                        c0 = rep_c * tile_c + wc * spt * tpw[1] + lc * spt
                        first = (starts[r] + c0) * elem_bytes
                        touched.update(range(first // 32, (first + spt * elem_bytes - 1) // 32 + 1))
                    requests += 1
                    sectors += len(touched)
    return requests, sectors, per_warp


def _rows_of(x: torch.Tensor, bm: int) -> list:
    """Per program of a (M, N) view read BM rows at a time: each row's first element, from the storage start."""
    m = x.shape[0]
    return [[x.storage_offset() + (p * bm + r) * x.stride(0) for r in range(bm)] for p in range(m // bm)]


CASES = [  # (name, dtype, rows of the block, pitch (elements), the alignment the fix promises, widest vector)
    ("fp32 rows padded to 1028", torch.float32, 1, 1028, 4, 4),
    ("fp32 tiles padded to 68", torch.float32, 16, 68, 4, 4),
    ("fp16 tiles padded to 72", torch.float16, 16, 72, 8, 8),
]


def _launch_case(dtype, bm, pitch, align, fixed: bool):
    """bm 1: 16 rows of 1024 columns, one row per program; else 64 rows of 64 columns, bm rows per program."""
    x = torch.randn(16 if bm == 1 else 64, pitch).to(dtype)
    y = torch.empty_like(x)
    if bm == 1:
        return x, _run(scale_rows_fixed if fixed else scale_rows, (16,), x, y, pitch, 1024, BLOCK=1024)
    if fixed:
        return x, _run(tile_fixed, (4,), x, y, pitch, ALIGN=align, BM=bm, BN=64)
    return x, _run(tile, (4,), x, y, pitch, BM=bm, BN=64)


@pytest.mark.parametrize("name,dtype,bm,pitch,align,wide", CASES, ids=[c[0] for c in CASES])
def test_aligned_pitch_compiled_narrow_gets_the_hint(name, dtype, bm, pitch, align, wide):
    x, (launch, summary) = _launch_case(dtype, bm, pitch, align, fixed=False)
    eb = x.element_size()
    ptx, ops = _compiled_accesses(launch)
    # the compiler could not prove the pitch aligned: one element per instruction
    assert ptx and not any(re.search(r"\.v[248]\.", p) for p in ptx), ptx
    assert {o["vector_bytes"] for o in ops} == {eb}
    assert all(o["layout"]["sizePerThread"] == [1] * len(o["layout"]["sizePerThread"]) for o in ops)
    hints = _narrow(summary)
    assert sorted(h["op"] for h in hints) == ["load", "store"]
    cols = 1024 if bm == 1 else 64
    rows = _rows_of(x[:, :cols] if bm == 1 else x, bm)
    lay = ops[0]["layout"]
    tpw = tuple(lay["threadsPerWarp"]) if bm > 1 else (1, 32)
    wpc = tuple(lay["warpsPerCTA"]) if bm > 1 else (1, WARPS)
    now = _hand_counts(rows, eb, bm, cols, 1, tpw, wpc)
    # the wider layout: Triton's for sizePerThread = wide (BlockedEncodingAttr::get, worked by hand here)
    wide_tpw = (32 // min(32, cols // wide), min(32, cols // wide))
    wide_wpc = (WARPS, 1) if bm > 1 else (1, WARPS)
    after = _hand_counts(rows, eb, bm, cols, wide, wide_tpw if bm > 1 else (1, 32), wide_wpc)
    for h in hints:
        got = _numbers(h)
        assert got["bytes"] == wide * eb == 16
        assert (got["requests"], got["sectors"], got["per_warp"]) == now
        assert (got["requests_wide"], got["sectors_wide"], got["per_warp_wide"]) == after
        assert 0 < h["saving"] == pytest.approx(1 - after[0] / now[0])
        assert f"tl.multiple_of(row * stride, {wide})" in h["effect"]
        op = next(o for o in summary["ops"] if o["kind"] == h["op"] and o["tensor"] == h["tensor"])
        assert (op["requests"], op["sectors"]) == now[:2]        # the analysis counted the compiled layout alike


@pytest.mark.parametrize("name,dtype,bm,pitch,align,wide", CASES, ids=[c[0] for c in CASES])
def test_the_fixed_twin_compiles_to_the_predicted_layout_and_gets_no_hint(name, dtype, bm, pitch, align, wide):
    x, (_, before) = _launch_case(dtype, bm, pitch, align, fixed=False)
    triton_trace.reset()
    _, (launch, summary) = _launch_case(dtype, bm, pitch, align, fixed=True)
    ptx, ops = _compiled_accesses(launch)
    assert ptx and all(re.search(r"\.v[248]\.", p) for p in ptx), ptx
    assert {o["vector_bytes"] for o in ops} == {16}
    assert _narrow(summary) == []
    shape = (1024,) if bm == 1 else (bm, 64)
    order = [0] if bm == 1 else [1, 0]
    for o in ops:
        lay = {k: o["layout"][k] for k in ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order")}
        assert lay == {k: v for k, v in blocked(shape, wide, order, WARPS).items() if k != "kind"}
    # what the hint predicted is what the fixed kernel's own layout gives
    for h in _narrow(before):
        op = next(o for o in summary["ops"] if o["kind"] == h["op"] and o["tensor"] == h["tensor"])
        got = _numbers(h)
        assert (op["requests"], op["sectors"]) == (got["requests_wide"], got["sectors_wide"])


def test_offsets_loaded_from_memory():
    """Segment starts read from memory: the compiler knows nothing of them; all are multiples of 4, and a
    512-element block gives each of the 128 threads 4 elements: 16-byte vectors, one instruction a warp."""
    starts = [0, 520, 1040, 2000]
    x = torch.randn(4096)
    y = torch.empty_like(x)
    launch, summary = _run(segments, (4,), x, y, torch.tensor(starts, dtype=torch.int32), BLOCK=512)
    ptx, ops = _compiled_accesses(launch)
    assert not any(re.search(r"\.v[248]\.", p) for p in ptx)
    assert {o["vector_bytes"] for o in ops if o["shape"] == [512]} == {4}
    hints = _narrow(summary)
    assert sorted(h["tensor"] for h in hints) == ["x_ptr", "y_ptr"]
    rows = [[s] for s in starts]
    now = _hand_counts(rows, 4, 1, 512, 1, (1, 32), (1, WARPS))
    after = _hand_counts(rows, 4, 1, 512, 4, (1, 32), (1, WARPS))
    assert now[2] == 4 and after[2] == 1
    for h in hints:
        got = _numbers(h)
        assert (got["requests"], got["sectors"], got["per_warp"]) == now
        assert (got["requests_wide"], got["sectors_wide"], got["per_warp_wide"]) == after
    triton_trace.reset()
    fixed, summary = _run(segments_fixed, (4,), x, y, torch.tensor(starts, dtype=torch.int32), BLOCK=512)
    assert {o["vector_bytes"] for o in _compiled_accesses(fixed)[1] if o["shape"] == [512]} == {16}
    assert _narrow(summary) == []


def test_a_partly_masked_run_narrows_the_vector():
    """Rows of 1028 elements (16-byte aligned) but only 1022 columns live: the run of 4 holding columns
    1020..1023 is half masked, so one predicate cannot cover it; runs of 2 are whole: 8-byte vectors."""
    x = torch.randn(16, 1028)
    y = torch.empty_like(x)
    _, summary = _run(scale_rows, (16,), x, y, 1028, 1022, BLOCK=1024)
    hints = _narrow(summary)
    assert hints and all(_numbers(h)["bytes"] == 8 for h in hints)
    assert all("a mask bound it can see is a multiple of 2" in h["effect"] for h in hints)


@pytest.mark.parametrize("what", ["odd pitch", "view one element in"])
def test_unaligned_at_run_time_gets_no_hint(what):
    """Both kernels compile narrow. With an odd pitch no row but the first starts aligned: no hint at all. A
    view one element into its storage has a 16-byte pitch, yet every row of it starts 4 bytes past a 16-byte
    boundary: no hint for its load; the output, a fresh tensor of that pitch, is aligned: its store gets one."""
    if what == "odd pitch":
        x = torch.randn(16, 1025)
        y = torch.empty_like(x)
    else:
        x = torch.randn(16 * 1028 + 1)[1:].view(16, 1028)
        y = torch.empty(16, 1028)
    launch, summary = _run(scale_rows, (16,), x, y, x.stride(0), 1024, BLOCK=1024)
    ptx, ops = _compiled_accesses(launch)
    assert {o["vector_bytes"] for o in ops} == {4}
    assert not any(re.search(r"\.v[248]\.", p) for p in ptx)
    assert [h["tensor"] for h in _narrow(summary)] == ([] if what == "odd pitch" else ["y_ptr"])


def test_the_lane_by_lane_path_gives_the_same_hints(monkeypatch):
    """Rows checked one by one (no pattern shortcuts) give exactly the hints the pattern path gives."""
    x = torch.randn(64, 68)
    y = torch.empty_like(x)
    _, fast = _run(tile, (4,), x, y, 68, BM=16, BN=64)
    monkeypatch.setattr(context, "SHORTCUTS", False)
    slow = triton_trace.analyze(triton_trace.current_trace(), gpu=TARGET).to_dict()["launches"][-1]
    assert _narrow(fast) and _narrow(slow) == _narrow(fast)
