"""Metrics on real kernels, against numbers computed by hand."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import kernels as K
import triton_trace
from triton_trace import trace


@triton.jit
def strided_copy(x, out, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i * STRIDE))


def analyzed(**params):
    return triton_trace.analyze(triton_trace.current_trace(), **params)


def launch_dict(report, i=0):
    return report.to_dict()["launches"][i]


def op(d, kind, tensor):
    return next(o for o in d["ops"] if o["kind"] == kind and o["tensor"] == tensor)


def test_contiguous_fp32_loads_of_128_lanes_take_16_sectors_each():
    K.add(torch.randn(1024), torch.randn(1024), kernel=trace(K.make_add()), block=128)
    report = analyzed()
    rows = report.rows()
    loads = rows["kind"] == 0
    assert (rows["sectors"][loads] == 16).all() and (rows["used_bytes"][loads] == 512).all()
    d = launch_dict(report)
    x = op(d, "load", "x_ptr")
    assert (x["sectors"], x["sector_efficiency"], x["pattern"], x["rows"]) == (128, 1.0, "contiguous", 8)
    m = d["metrics"]
    assert (m["load_bytes"], m["store_bytes"], m["load_lanes"], m["masked_lanes"]) == (8192, 4096, 2048, 0)
    assert (m["load_sectors"], m["store_sectors"], m["sector_efficiency"]) == (256, 128, 1.0)


def test_a_stride_2_load_wastes_half_of_every_sector():
    x, out = torch.randn(2 * 256), torch.empty(256)
    trace(strided_copy)[(2,)](x, out, STRIDE=2, BLOCK=128)
    torch.testing.assert_close(out, x[::2])
    d = launch_dict(analyzed())
    ld = op(d, "load", "x")
    assert (ld["sectors"], ld["sector_efficiency"], ld["pattern"], ld["stride"]) == (64, 0.5, "strided", 2)
    assert op(d, "store", "out")["sector_efficiency"] == 1.0


def test_a_stride_2_load_in_a_wide_block_takes_the_stores_layout():
    # 1024 elements over 128 threads: the contiguous store gives each thread 4 consecutive elements, and the
    # load's def-use slice inherits that layout, so each of its scalar instructions spreads a warp over 32
    # sectors (8 floats apart). Nsight Compute on an H200 counted exactly this: 2,097,152 load sectors for
    # 2,097,152 elements (benchmarks/fidelity/RESULTS.md).
    x, out = torch.randn(2 * 1024), torch.empty(1024)
    trace(strided_copy)[(1,)](x, out, STRIDE=2, BLOCK=1024)
    torch.testing.assert_close(out, x[::2])
    d = launch_dict(analyzed())
    ld = op(d, "load", "x")
    assert (ld["requests"], ld["sectors"]) == (1024 // 32, 1024)
    st = op(d, "store", "out")
    assert (st["requests"], st["sectors"], st["sector_efficiency"]) == (1024 // 128, 128, 1.0)


def test_matmul_flops_are_2mnk():
    M, N, Kd = 32, 48, 64
    K.matmul(torch.randn(M, Kd), torch.randn(Kd, N), kernel=trace(K.make_matmul()), block_m=16, block_n=16,
             block_k=16)
    d = launch_dict(analyzed())
    assert d["metrics"]["dot_flops"] == 2 * M * N * Kd
    dot = op(d, "dot", None)
    assert dot["rows"] == (M // 16) * (N // 16) * (Kd // 16) and dot["flops"] == 2 * M * N * Kd
    assert d["roofline"]["H100"]["dot_peak"] == "tf32"
    assert d["metrics"]["arithmetic_intensity"] == pytest.approx(
        d["metrics"]["flops"] / d["metrics"]["dram_bytes_predicted"], rel=1e-5)


def test_transposed_store_costs_the_ideal_number_of_sectors():
    n = 64
    x = torch.randn(n, n)
    y = K.transpose(x, kernel=trace(K.make_transpose()), block_m=16, block_n=16)
    torch.testing.assert_close(y, x.t())
    d = launch_dict(analyzed())
    ideal = n * n * 4 // 32
    st, ld = op(d, "store", "y_ptr"), op(d, "load", "x_ptr")
    assert (st["sectors"], st["sector_efficiency"], st["fast_dim"]) == (ideal, 1.0, 0)
    assert (ld["sectors"], ld["fast_dim"]) == (ideal, 1)
    # A row-major grouping of the same lanes into warps would touch far more sectors.
    lc = triton_trace.current_trace().launches[0]
    naive = 0
    for a in lc.accesses(kind="store"):
        groups = (a.offsets.reshape(-1, 32) * 4) // 32
        naive += sum(len(np.unique(g)) for g in groups)
    assert naive >= 4 * ideal


def test_grouped_program_order_saves_dram_traffic_only_on_a_small_l2():
    a, b = torch.randn(128, 32), torch.randn(32, 128)
    small = dict(l2_bytes=8 << 10, l2_ways=4, programs_in_flight=8)
    dram = {}
    for group in (1, 2):
        triton_trace.reset()
        K.matmul(a, b, kernel=trace(K.make_matmul()), block_m=16, block_n=16, block_k=16, group_m=group)
        small_m = launch_dict(analyzed(**small))["metrics"]
        large_m = launch_dict(analyzed())["metrics"]
        dram[group] = small_m["dram_read_bytes"]
        assert large_m["dram_read_bytes"] == large_m["unique_load_bytes"] == (128 * 32 + 32 * 128) * 4
        assert small_m["load_bytes"] == large_m["load_bytes"] == 8 * 8 * 2 * 2 * 16 * 16 * 4
    assert dram[2] < 0.8 * dram[1]


def test_reuse_and_per_tensor_counts():
    x, w, b = torch.randn(8, 32), torch.randn(32), torch.randn(32)
    K.layer_norm_fwd(x, w, b, kernel=trace(K.make_layer_norm_fwd()), block=32)
    d = launch_dict(analyzed())
    t = {e["name"]: e for e in d["tensors"]}
    assert (t["W"]["load_elements"], t["W"]["unique_load_elements"], t["W"]["load_reuse"]) == (256, 32, 8.0)
    assert t["X"]["load_elements"] == 3 * 256 and t["X"]["unique_load_bytes"] == 1024
    assert (t["Y"]["store_bytes"], t["Mean"]["store_elements"]) == (1024, 8)
    assert t["W"]["dram_read_bytes"] == 128            # read from DRAM once, then from L2
    assert d["metrics"]["unique_load_bytes"] == sum(e["unique_load_bytes"] for e in d["tensors"])


def test_levels_add_up_and_programs_are_columnar():
    K.add(torch.randn(1000), torch.randn(1000), kernel=trace(K.make_add()), block=128)
    report = analyzed()
    d = launch_dict(report)
    m, p = d["metrics"], d["programs"]
    assert p["count"] == 8 and not p["truncated"] and p["pid"][7] == [7, 0, 0]
    assert all(len(v) == 8 for k, v in p.items() if isinstance(v, list))
    for key in ("load_bytes", "store_bytes", "load_sectors", "store_sectors", "masked_lanes", "flops"):
        assert sum(p[key]) == m[key]
    assert sum(p["dram_bytes"]) == m["dram_bytes_predicted"]
    assert sum(o["bytes"] for o in d["ops"]) == sum(ln["bytes"] for ln in d["lines"]) == 12000
    assert [ln["kinds"] for ln in d["lines"]] == [["load"], ["load"], ["math", "store"]]
    assert m["masked_lanes"] == 3 * 24 and m["masked_share"] == round(72 / 3072, 4)
    rows = report.rows()
    assert len(rows["sectors"]) == triton_trace.current_trace().launches[0].num_ops


def test_balance_finds_the_light_tail_program():
    K.add(torch.randn(1000), torch.randn(1000), kernel=trace(K.make_add()), block=128)
    bal = launch_dict(analyzed(programs_in_flight=3))["balance"]
    assert bal["bytes"]["light"] == {"count": 1, "pids": [[7, 0, 0]]}
    assert bal["bytes"]["heavy"]["count"] == 0 and bal["bytes"]["median"] == 3 * 512
    assert (bal["waves"], bal["last_wave_fill"]) == (3, round(2 / 3, 3))


def test_roofline_of_a_memory_bound_kernel():
    K.add(torch.randn(4096), torch.randn(4096), kernel=trace(K.make_add()), block=128)
    d = launch_dict(analyzed())
    for gpu, r in d["roofline"].items():
        assert r["bound"] == "memory" and r["time_s"] == r["memory_s"] > 0
    assert d["roofline"]["H200"]["memory_s"] == pytest.approx(3 * 4096 * 4 / 4.8e12)
    assert set(d["roofline"]) >= {"A100", "H100", "H200"}


def test_autotune_config_sets_the_warp_count():
    K.scale(torch.randn(200), 3.0, kernel=trace(K.make_autotuned()))
    lc = triton_trace.current_trace().launches[0]
    assert lc.config["num_warps"] == 1
    d = launch_dict(analyzed())
    ld = op(d, "load", "x_ptr")
    assert ld["vector_width"] == 1 and ld["requests"] == ld["rows"] * 1     # 32 lanes: one request


def test_shared_layout_shortcut_gives_the_per_row_result(monkeypatch):
    """Rows that are one row's pattern shifted by whole lines are computed once; the report must be the one
    the row-by-row path gives, for streams, partial blocks, tiles, strided views and matmul tiles."""
    import json

    from triton_trace.analysis.memory import coalescing
    torch.manual_seed(0)
    K.add(torch.randn(1 << 14), torch.randn(1 << 14), kernel=trace(K.make_add()), block=256)
    K.add(torch.randn(10003), torch.randn(10003), kernel=trace(K.make_add()), block=128)
    K.softmax(torch.randn(64, 100), kernel=trace(K.make_softmax()))
    K.transpose(torch.randn(256, 256), kernel=trace(K.make_transpose()), block_m=32, block_n=32)
    K.transpose(torch.randn(60, 40).t(), kernel=trace(K.make_transpose()))
    K.matmul(torch.randn(64, 64), torch.randn(64, 64), kernel=trace(K.make_matmul()), block_m=16, block_n=16)
    tr = triton_trace.current_trace()
    fast = json.dumps(triton_trace.analyze(tr).to_dict(), sort_keys=True)
    monkeypatch.setattr(coalescing, "_requests", coalescing._requests_rows)
    assert json.dumps(triton_trace.analyze(tr).to_dict(), sort_keys=True) == fast
