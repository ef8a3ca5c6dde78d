"""Unit tests of the analysis on small synthetic launches built with numpy (no Triton): the coalescing
model, the cache simulation against a plain Python LRU, view membership, and the sanitizer's rules."""
import numpy as np
import pytest

from triton_trace.analysis import analyze
from triton_trace.analysis.memory import jitsteps
from triton_trace.analysis.memory.lockstep import _lockstep
from triton_trace.analysis.checks.sanitizer import view_positions
from triton_trace.errors import TraceUsageError
from triton_trace.model import TensorInfo
from helpers.synthetic import launch, tensor


def op_of(report, i=0):
    return report.to_dict()["launches"][0]["ops"][i]


# ----------------------------------------------------------------------------------------------------------
# coalescing
# ----------------------------------------------------------------------------------------------------------
def test_contiguous_fp32_128_lanes_is_16_sectors_at_full_efficiency():
    lc = launch([tensor("x", (128,))], [{"kind": "load", "offsets": np.arange(128)}])
    for warps, requests in ((4, 4), (1, 1)):        # 128 threads: 1 element each; 32 threads: float4 each
        op = op_of(analyze(lc, num_warps=warps))
        assert (op["sectors"], op["cache_lines"], op["requests"]) == (16, 4, requests)
        assert op["sector_efficiency"] == 1.0 and op["pattern"] == "contiguous"
        assert op["vector_width"] == {4: 1, 1: 4}[warps]


def test_stride_2_wastes_half_of_each_sector():
    lc = launch([tensor("x", (256,))], [{"kind": "load", "offsets": 2 * np.arange(128)}])
    op = op_of(analyze(lc))
    assert (op["sectors"], op["requests"], op["sector_efficiency"]) == (32, 4, 0.5)
    assert (op["pattern"], op["stride"], op["vector_width"]) == ("strided", 2, 1)


def test_broadcast_gather_and_scalar_patterns():
    rng = np.random.default_rng(0)
    lc = launch([tensor("x", (4096,))], [
        {"kind": "load", "offsets": np.full(64, 7)},
        {"kind": "load", "offsets": rng.permutation(4096)[:64]},
        {"kind": "load", "offsets": np.array(3)},
    ])
    ops = analyze(lc).to_dict()["launches"][0]["ops"]
    assert [o["pattern"] for o in ops] == ["broadcast", "gather", "scalar"]
    assert ops[0]["sectors"] == 2 and ops[0]["requests"] == 2        # one sector per warp-wide request
    assert ops[2]["sectors"] == 1 and ops[2]["bytes"] == 4


def test_masked_lanes_issue_nothing():
    mask = np.arange(128) < 40
    lc = launch([tensor("x", (128,))], [{"kind": "load", "offsets": np.arange(128), "mask": mask}])
    d = analyze(lc).to_dict()["launches"][0]
    assert d["metrics"]["masked_lanes"] == 88 and d["metrics"]["load_bytes"] == 160
    assert d["metrics"]["masked_share"] == round(88 / 128, 4)
    assert d["ops"][0]["sectors"] == 5 and d["ops"][0]["requests"] == 2


def test_lanes_are_ordered_along_the_contiguous_dim():
    """A 2-D block whose offsets are contiguous along dim 0 (a transposed store) costs the ideal number
    of sectors, not the row-major grouping's."""
    bm, bn, M = 32, 32, 1024
    rm, rn = np.arange(bm)[:, None], np.arange(bn)[None, :]
    lc = launch([tensor("y", (M, M))], [{"kind": "store", "offsets": rn * M + rm}])
    op = op_of(analyze(lc))
    assert op["fast_dim"] == 0 and op["pattern"] == "contiguous"
    assert op["sectors"] == bm * bn * 4 // 32 and op["sector_efficiency"] == 1.0
    row_major = (rn * M + rm).reshape(-1, 32) * 4 // 32
    naive = sum(len(np.unique(g)) for g in row_major)
    assert naive == 8 * op["sectors"]


def test_vector_width_limited_by_alignment_and_element_size():
    lc = launch([tensor("x", (4096,)), tensor("h", (4096,), eb=2)], [
        {"kind": "load", "offsets": 1 + np.arange(1024)},           # starts one float in: 4-byte aligned only
        {"kind": "load", "tensor": 1, "offsets": np.arange(2048)},  # fp16: 8 per 16 bytes
    ])
    ops = analyze(lc).to_dict()["launches"][0]["ops"]
    assert [o["vector_width"] for o in ops] == [1, 8]
    # misaligned, alone in its slice: 32 requests of 32 consecutive floats, each straddling 5 sectors, not 4
    assert (ops[0]["requests"], ops[0]["sectors"]) == (32, 160)
    assert (ops[1]["requests"], ops[1]["sectors"]) == (8, 128)


def test_load_takes_the_elements_per_thread_of_its_slice():
    # A misaligned load beside an aligned load of the same shape and order: Triton's coalescing pass gives
    # the misaligned one the slice's 4 elements per thread, issued as 4 scalar instructions per thread.
    lc = launch([tensor("x", (4096,))], [
        {"kind": "load", "offsets": 1 + np.arange(1024)},
        {"kind": "load", "offsets": np.arange(1024)},
    ])
    ops = analyze(lc, num_warps=4).to_dict()["launches"][0]["ops"]
    assert [o["vector_width"] for o in ops] == [1, 4]
    sectors = 0
    for warp_base in range(0, 1024, 32 * 4):            # each warp holds 32 threads x 4 elements
        for j in range(4):                              # instruction j: element j of every thread
            offs = 1 + warp_base + 4 * np.arange(32) + j
            sectors += len(np.unique(offs * 4 // 32))
    assert (ops[0]["requests"], ops[0]["sectors"]) == (32, sectors)
    assert (ops[1]["requests"], ops[1]["sectors"]) == (8, 128)


# ----------------------------------------------------------------------------------------------------------
# the cache
# ----------------------------------------------------------------------------------------------------------
def reference_lru(sets, lines, masks, reads, writes, n_sets, ways):
    state = [dict() for _ in range(n_sets)]     # line -> [last use, valid bits, dirty bits]
    fetched, dirtied = [], []
    for t, (s, ln, m, r, w) in enumerate(zip(sets, lines, masks, reads, writes)):
        cache = state[s]
        if ln not in cache:
            if len(cache) == ways:
                del cache[min(cache, key=lambda k: cache[k][0])]
            cache[ln] = [t, 0, 0]
        entry = cache[ln]
        fetched.append(bin(m & ~entry[1] & 15).count("1") if r else 0)
        dirtied.append(bin(m & ~entry[2] & 15).count("1") if w else 0)
        entry[0], entry[1], entry[2] = t, entry[1] | m, entry[2] | (m if w else 0)
    return np.array(fetched), np.array(dirtied)


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.skipif(
    not jitsteps.available(), reason="the compiled loops cannot be built here"))])
@pytest.mark.parametrize("seed", range(4))
def test_lockstep_lru_matches_a_plain_python_lru(seed, jit):
    rng = np.random.default_rng(seed)
    n, n_sets, ways = 3000, 4, 3
    lines = rng.integers(0, 40, n)
    sets = lines % n_sets
    masks = rng.integers(1, 16, n)
    reads = rng.random(n) < 0.7
    writes = ~reads | (rng.random(n) < 0.2)
    got = _lockstep(sets, lines, masks, reads, writes, n_sets, ways, jit=jit)      # lock step / compiled loop
    want = reference_lru(sets, lines, masks, reads, writes, n_sets, ways)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_reuse_within_the_cache_is_not_fetched_twice():
    t = tensor("x", (1024,))
    ops = [{"kind": "load", "program": (p,), "offsets": np.arange(1024)} for p in range(8)]
    m = analyze(launch([t], ops)).to_dict()["launches"][0]["metrics"]
    assert m["load_bytes"] == 8 * 4096 and m["unique_load_bytes"] == 4096
    assert m["dram_read_bytes"] == 4096 and m["dram_write_bytes"] == 0


def test_a_small_cache_refetches_and_writes_back_once_per_dirtied_sector():
    t, o = tensor("x", (4096,)), tensor("out", (4096,))
    ops = []
    for p in range(4):
        ops += [{"kind": "load", "program": (p,), "tensor": 0, "offsets": np.arange(4096)},
                {"kind": "store", "program": (p,), "tensor": 1, "offsets": p * 1024 + np.arange(1024)}]
    big = analyze(launch([t, o], ops), programs_in_flight=1)
    small = analyze(launch([t, o], ops), programs_in_flight=1, l2_bytes=4096, l2_ways=4)
    mb, ms = (r.to_dict()["launches"][0]["metrics"] for r in (big, small))
    assert mb["dram_read_bytes"] == 16384 and ms["dram_read_bytes"] == 4 * 16384
    assert mb["dram_write_bytes"] == ms["dram_write_bytes"] == 16384


# ----------------------------------------------------------------------------------------------------------
# views
# ----------------------------------------------------------------------------------------------------------
VIEWS = [
    tensor("contig", (4, 6)),
    tensor("transposed", (6, 4), (1, 6)),
    tensor("slice", (3, 5), (8, 1), storage_offset=9, storage_size=40),
    tensor("step", (4, 3), (10, 3), storage_offset=1, storage_size=40),
    tensor("expanded", (3, 4), (0, 1), storage_size=4),
    tensor("overlap", (4, 4), (2, 1), storage_size=12),       # as_strided windows: indices are not unique
    tensor("empty", (0, 4), (4, 1), storage_size=8),
]


@pytest.mark.parametrize("t", VIEWS, ids=lambda t: t.name)
def test_view_positions_agree_with_brute_force(t):
    off = np.arange(-3, t.storage_size + 3)
    inside, idx = view_positions(t, off)
    vo = t.view_offsets()
    np.testing.assert_array_equal(inside, np.isin(off, vo.reshape(-1)))
    for o, ok, i in zip(off, inside, idx):
        if ok:
            assert vo[tuple(i)] == o


# ----------------------------------------------------------------------------------------------------------
# the sanitizer's rules
# ----------------------------------------------------------------------------------------------------------
def kinds(lc):
    return sorted({f.kind for f in analyze(lc).findings})


def test_conflict_rules_between_programs():
    t = tensor("x", (16,))
    e = np.arange(4)

    def two(k0, k1):
        return launch([t], [{"kind": k0, "program": (0,), "offsets": e}, {"kind": k1, "program": (1,), "offsets": e}])
    assert kinds(two("store", "store")) == ["race"]
    assert kinds(two("store", "load")) == ["race"]
    assert kinds(two("load", "store")) == ["race"]
    assert kinds(two("atomic_add", "load")) == ["race"]
    assert kinds(two("store", "atomic_add")) == ["race"]
    assert kinds(two("atomic_add", "atomic_max")) == []
    assert kinds(two("load", "load")) == []
    one = launch([t], [{"kind": k, "offsets": e} for k in ("store", "load", "store")])
    assert kinds(one) == []                      # one program may do anything to its own elements


def _locked(p, lock_offset, kind="store"):
    return [{"kind": "atomic_cas", "program": (p,), "tensor": 1, "offsets": np.array(lock_offset)},
            {"kind": "load", "program": (p,), "offsets": np.arange(4)},
            {"kind": kind, "program": (p,), "offsets": np.arange(4)},
            {"kind": "atomic_xchg", "program": (p,), "tensor": 1, "offsets": np.array(lock_offset)}]


def test_a_common_lock_orders_accesses_and_different_locks_do_not():
    ts = [tensor("x", (16,)), tensor("lock", (2,), eb=4)]
    assert kinds(launch(ts, _locked(0, 0) + _locked(1, 0) + _locked(2, 0))) == []
    assert kinds(launch(ts, _locked(0, 0) + _locked(1, 1))) == ["race"]
    after_release = _locked(0, 0) + _locked(1, 0) + [{"kind": "store", "program": (1,), "offsets": np.arange(4)}]
    assert kinds(launch(ts, after_release)) == ["race"]


def test_uninitialized_reads_follow_the_sequential_order():
    t = tensor("out", (8,))
    e = np.arange(8)
    own = launch([t], [{"kind": "store", "offsets": e}, {"kind": "load", "offsets": e}], outputs=("out",))
    assert kinds(own) == []
    before = launch([t], [{"kind": "load", "program": (0,), "offsets": e},
                          {"kind": "store", "program": (1,), "offsets": e}], outputs=("out",))
    assert kinds(before) == ["race", "uninitialized_read"]
    after = launch([t], [{"kind": "store", "program": (0,), "offsets": e},
                         {"kind": "load", "program": (1,), "offsets": e}], outputs=("out",))
    assert kinds(after) == ["race"]              # initialised in the interpreter's order, but unordered on a GPU
    atomic = launch([t], [{"kind": "atomic_add", "offsets": e}], outputs=("out",))
    assert kinds(atomic) == ["uninitialized_read"]
    not_declared = launch([t], [{"kind": "load", "offsets": e}, {"kind": "store", "offsets": e}])
    assert kinds(not_declared) == []


def test_coverage_and_double_writes_of_declared_outputs():
    t = tensor("out", (8,))
    part = launch([t], [{"kind": "store", "offsets": np.arange(6)}], outputs=("out",))
    f = analyze(part).findings
    assert [x.kind for x in f] == ["unwritten_output"] and f[0].count == 2 and f[0].indices == ((6,), (7,))
    twice = launch([t], [{"kind": "store", "offsets": np.arange(8)}, {"kind": "store", "offsets": np.arange(4)}],
                   outputs=("out",))
    f = analyze(twice).findings
    assert [x.kind for x in f] == ["double_write"] and f[0].count == 4 and f[0].line == 11
    skipped = launch([t], [{"kind": "load", "offsets": np.arange(2)}], outputs=("out",), skipped_programs=3)
    d = analyze(skipped).to_dict()
    assert d["findings"] == [] and "unwritten_output" in d["launches"][0]["checks_skipped"][0]


def test_bounds_and_views():
    base = tensor("x", (4, 6), (8, 1), storage_size=32)         # rows of 8, 6 used
    lc = launch([base], [{"kind": "load", "offsets": np.array([0, 5, 6, 7, 8, 31, 32, -1])}])
    f = {x.kind: x for x in analyze(lc).findings}
    assert sorted(f) == ["out_of_bounds", "out_of_view"]
    assert f["out_of_bounds"].offsets == (32, -1) and f["out_of_bounds"].valid_range == (0, 31)
    assert f["out_of_bounds"].lanes == ((6,), (7,))
    assert f["out_of_view"].offsets == (6, 7, 31) and f["out_of_view"].valid_range == (0, 29)
    assert f["out_of_view"].severity == "warning" and f["out_of_bounds"].severity == "error"


def test_findings_are_grouped_and_capped():
    t = tensor("x", (64,))
    ops = [{"kind": "load", "program": (p,), "offsets": 64 + np.arange(32)} for p in range(50)]
    r = analyze(launch([t], ops), max_findings=10, max_examples=3)
    assert len(r.findings) == 10 and r.suppressed == 40 and r.finding_counts["out_of_bounds"] == 50
    assert all(f.count == 32 and len(f.offsets) == 3 for f in r.findings)
    assert [f.program[0] for f in r.findings] == list(range(10))
    assert "and 40 more" in r.summary(limit=10)


def test_work_metrics_and_roofline():
    ops = [{"kind": "dot", "program": (p,), "aux": (16, 32, 8)} for p in range(3)]
    ops += [{"kind": "math", "program": (0,), "aux": (100, 0, 0)}, {"kind": "load", "offsets": np.arange(64)}]
    d = analyze(launch([tensor("a", (64,))], ops)).to_dict()["launches"][0]
    assert d["metrics"]["dot_flops"] == 3 * 2 * 16 * 32 * 8 and d["metrics"]["math_flops"] == 100
    roof = d["roofline"]["H200"]
    assert roof["time_s"] == max(roof["memory_s"], roof["compute_s"]) > 0
    assert roof["dot_peak"] == "tf32"
    assert d["metrics"]["arithmetic_intensity"] == round(d["metrics"]["flops"] / 256, 6)


def test_bad_parameters_and_inputs_are_refused():
    lc = launch([tensor("x", (4,))], [{"kind": "load", "offsets": np.arange(4)}])
    with pytest.raises(TraceUsageError, match="unknown GPU"):
        analyze(lc, gpu="Z80")
    with pytest.raises(TraceUsageError, match="warp_size"):
        analyze(lc, warp_size=0)
    with pytest.raises(TraceUsageError, match="Trace"):
        analyze([lc])


def test_an_empty_launch_analyses():
    d = analyze(launch([], [])).to_dict()
    assert d["launches"][0]["metrics"]["lanes"] == 0 and d["findings"] == []


def test_recorded_program_order_and_programs_without_ops():
    t = tensor("out", (8,))
    e = np.arange(8)
    ops = [{"kind": "store", "program": (0,), "offsets": e}, {"kind": "load", "program": (2,), "offsets": e}]
    in_order = launch([t], ops, outputs=("out",), recorded_ids=np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0]]))
    d = analyze(in_order).to_dict()
    assert d["launches"][0]["programs"]["pid"] == [[0, 0, 0], [1, 0, 0], [2, 0, 0]]
    assert d["launches"][0]["programs"]["memory_ops"] == [1, 0, 1]
    assert [f["kind"] for f in d["findings"]] == ["race"]
    reversed_order = launch([t], ops, outputs=("out",), recorded_ids=np.array([[2, 0, 0], [1, 0, 0], [0, 0, 0]]))
    assert kinds(reversed_order) == ["race", "uninitialized_read"]    # program 2 ran first: its load read garbage


def test_groups_past_the_cap_are_counted_per_program_without_being_built():
    t = tensor("x", (16,))
    ops = [{"kind": "store", "program": (p,), "offsets": np.arange(4)} for p in range(30)]   # all race
    ops += [{"kind": "load", "program": (p,), "offsets": 16 + np.arange(4)} for p in range(30)]   # all OOB
    r = analyze(launch([t], ops), max_findings=5)
    d = r.to_dict()
    assert d["finding_counts"]["out_of_bounds"] == 30 and d["finding_counts"]["race"] == 1
    assert len(d["findings"]) == 5 and d["suppressed"] == 26
    # every program: its own out-of-bounds load (a line each) and the one race all 30 take part in
    assert d["launches"][0]["programs"]["findings"] == [2] * 30
    (race,) = [f for f in analyze(launch([t], ops)).findings if f.kind == "race"]
    assert race.extent["writers"]["count"] == 30 and race.extent["elements"]["count"] == 4


@pytest.mark.parametrize("scenario", ["stream", "tiled", "gather"])
def test_benchmark_launches_analyse_cleanly(scenario):
    from benchmarks.speed import bench_analysis
    lc = getattr(bench_analysis, scenario)(200_000)
    d = analyze(lc).to_dict()
    assert d["findings"] == [] and d["launches"][0]["metrics"]["lanes"] == len(lc.offsets)
    assert d["launches"][0]["metrics"]["store_sector_efficiency"] > 0.99
    assert set(bench_analysis.stages(lc)) >= {"coalescing", "L2 simulation", "check_races"}


def test_arguments_that_alias_one_storage_race_with_each_other():
    # out = x[0:64], src = x[8:72]: program 1 loads what program 0 stores, through the other argument.
    storage = lambda name, off: TensorInfo(name, "float32", (64,), (1,), off, 72, 4, storage=0)
    ops = [{"program": (0,), "kind": "store", "tensor": 0, "offsets": np.arange(0, 32)},
           {"program": (1,), "kind": "load", "tensor": 1, "offsets": np.arange(8, 40)}]
    found = analyze(launch([storage("out", 0), storage("src", 8)], ops)).findings
    assert [(f.kind, f.tensor, f.program, f.other["program"], f.other["tensor"], f.count) for f in found] == \
        [("race", "out", (0, 0, 0), (1, 0, 0), "src", 24)]
    assert "view the same memory" in found[0].message and found[0].offsets[:2] == (8, 9)
    # Without the storage link (an older trace) they are separate memories: nothing to compare.
    apart = [TensorInfo("out", "float32", (64,), (1,), 0, 72, 4), TensorInfo("src", "float32", (64,), (1,), 8, 72, 4)]
    assert analyze(launch(apart, ops)).ok
    # Different element sizes on one storage compare in the smaller unit (a uint8 view of fp32 memory).
    mixed = [storage("out", 0), TensorInfo("raw", "uint8", (288,), (1,), 0, 288, 1, storage=0)]
    ops = [{"program": (0,), "kind": "store", "tensor": 0, "offsets": np.arange(4)},
           {"program": (1,), "kind": "load", "tensor": 1, "offsets": np.arange(12, 16)}]
    f = analyze(launch(mixed, ops)).findings
    assert [(x.kind, x.offsets) for x in f] == [("race", (3,))]
