"""The report's contract: JSON-ready, deterministic (also across save/load of the trace), the documented
schema, bounded per-program columns, and the public entry points."""
import json

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.analysis import report as report_module
import kernels as K
from kernels.broken import CASES

LAUNCH_KEYS = {"index", "kernel", "grid", "recorded_programs", "skipped_programs", "completed", "config",
               "execution", "numerics", "inline_asm_approx", "checks_skipped", "value_stats", "metrics", "roofline", "balance", "tensors", "programs",
               "ops", "lines", "hints", "compiled", "precision"}
METRIC_KEYS = {"load_bytes", "store_bytes", "load_lanes", "store_lanes", "masked_lanes", "load_sectors",
               "store_sectors", "sector_efficiency", "unique_load_bytes", "dram_bytes_predicted", "flops",
               "arithmetic_intensity", "l2_hit_rate", "l1_hit_sectors"}
FINDING_KEYS = {"kind", "severity", "kernel", "launch", "program", "file", "line", "tensor", "op", "message",
                "count", "rows", "offsets", "indices", "lanes", "valid_range", "other", "extent"}


@pytest.fixture
def mixed_trace():
    """A clean matmul, a racy kernel and a kernel with out-of-bounds lanes, in one trace."""
    K.matmul(torch.randn(32, 16), torch.randn(16, 32), kernel=trace(K.make_matmul()))
    for name in ("two_programs_write_one_row", "missing_mask"):
        case = next(c for c in CASES if c.name == name)
        case.run(case.broken, False)
    return triton_trace.current_trace()


def dumps(report):
    return json.dumps(report.to_dict(), sort_keys=True, allow_nan=False)


def test_to_dict_is_json_and_deterministic(mixed_trace, tmp_path):
    first = dumps(triton_trace.analyze(mixed_trace))
    assert first == dumps(triton_trace.analyze(mixed_trace))
    path = tmp_path / "t.ttrace"
    mixed_trace.save(path)
    assert dumps(triton_trace.analyze(triton_trace.load(path))) == first
    assert json.loads(first) == triton_trace.analyze(mixed_trace).to_dict()


def test_schema(mixed_trace):
    d = triton_trace.analyze(mixed_trace).to_dict()
    assert d["schema"] == report_module.SCHEMA and len(d["launches"]) == 3
    for lc in d["launches"]:
        assert set(lc) == LAUNCH_KEYS and METRIC_KEYS <= set(lc["metrics"])
        assert len(lc["grid"]) == 3 and isinstance(lc["kernel"], str)
        cols = lc["programs"]
        assert {"pid", "load_bytes", "store_bytes", "sectors", "sector_efficiency", "dram_bytes", "flops",
                "findings"} <= set(cols)
        assert all(len(v) == cols["count"] for v in cols.values() if isinstance(v, list))
        for o in lc["ops"]:
            assert {"kind", "tensor", "file", "line", "bytes", "sectors", "sector_efficiency", "pattern"} <= set(o)
    kinds = [f["kind"] for f in d["findings"]]
    assert kinds == sorted(kinds, key=lambda k: ("out_of_bounds", "race").index(k))      # most severe first
    for f in d["findings"]:
        assert set(f) == FINDING_KEYS
    # one finding per cause: the racy store (programs 0, 1 on row 0 and 2, 3 on row 1); the unmasked
    # accesses of three tensors
    assert d["finding_counts"]["race"] == 1 and d["finding_counts"]["out_of_bounds"] == 3
    assert d["launches"][1]["programs"]["findings"] == [1, 1, 1, 1]        # every program takes part
    store = next(o for o in d["launches"][1]["ops"] if o["kind"] == "store")
    assert store["findings"] == 1


def test_every_documented_key_is_in_the_module_docstring(mixed_trace):
    d = triton_trace.analyze(mixed_trace).to_dict()
    doc = report_module.__doc__
    keys = set(d) | set(d["params"]) | set(d["launches"][0]) | set(d["launches"][0]["metrics"]) | FINDING_KEYS
    keys |= set(d["launches"][0]["ops"][0]) | set(d["launches"][0]["lines"][0]) | set(d["launches"][0]["tensors"][0])
    keys |= set(d["launches"][0]["programs"]) | set(d["launches"][0]["balance"])
    keys |= set(d["launches"][0]["roofline"]["H200"]) | set(d["kinds"][0])
    for f in d["findings"]:                               # the extent, every level of it
        x = f["extent"]
        keys |= set(x) | set(x["programs"]) | set(x["elements"]) | set(x["elements"]["first"][0])
        for part in ("past_end", "mask_lanes", "writers", "readers"):
            keys |= set(x.get(part) or {})
        keys |= set((x.get("accesses") or [{}])[0])
    assert sorted(k for k in keys if f'"{k}"' not in doc) == []


def test_program_columns_are_bounded(mixed_trace):
    report = triton_trace.analyze(mixed_trace, max_programs=2)
    cols = report.to_dict()["launches"][0]["programs"]
    assert cols["truncated"] and cols["count"] == 4 and len(cols["pid"]) == 2
    assert len(report.programs(0)["pid"]) == 4


def test_check_returns_the_report_of_a_clean_trace():
    K.add(torch.randn(100), torch.randn(100), kernel=trace(K.make_add(), outputs=("out_ptr",)))
    report = triton_trace.check(triton_trace.current_trace())
    assert isinstance(report, triton_trace.Report) and report.ok
    lines = report.summary().splitlines()
    assert lines[0] == "triton_trace: no findings in 1 launch(es)"
    assert lines[1].split()[:3] == ["launch", "kernel", "grid"]
    assert lines[2].split()[:4] == ["0", "add_kernel", "1x1x1", "1"]
    assert triton_trace.analyze(triton_trace.current_trace().launches[0]).ok      # a single Launch works too


@triton.jit
def _fails_in_program_3(x, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    if pid == 3:
        v = tl.reshape(v, (3, 5))      # not a power of two: the interpreter raises here
    tl.store(x + offs, v + 1)


def test_a_launch_that_raised_is_analysed_and_the_summary_says_it_stopped():
    x = torch.zeros(80)
    with pytest.raises(triton_trace.ProgramError, match=r"program \(3, 0, 0\)"):
        trace(_fails_in_program_3)[(5,)](x, BLOCK=16)
    assert x.tolist() == [1.0] * 48 + [0.0] * 32           # what programs 0-2 stored reached the caller
    report = triton_trace.analyze(triton_trace.current_trace())
    d = report.launch(0)
    assert d["completed"] is False and d["recorded_programs"] == 4
    assert d["metrics"]["load_bytes"] == 4 * 64 and d["metrics"]["store_bytes"] == 3 * 64
    assert "launch 0 ('_fails_in_program_3') did not complete" in report.summary()
