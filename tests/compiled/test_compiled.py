"""Launch.compiled(target): the kernel compiled for a GPU target on this CPU-only machine, as its GPU launch
would be specialized, with every IR line mapped back to the user's source and every global memory op's
layout, instruction and vector width read from the compiler's own output.

Checked against committed fixtures (tests/helpers/compiled_cases.py wrote them from the compiler's raw text for
sm_80, sm_90 and sm_100), parsed here with this file's own regular expressions, and against source lines
found by searching the kernel's source text."""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers.modules import module_dict, with_module
import torch
import triton

import triton_trace
from triton_trace.analysis.units import change
from triton_trace.compiled.occupancy import occupancy
from triton_trace.compiled.source import kernel_module
from triton_trace.errors import CompileError, TraceUsageError
from helpers import compiled_cases
from helpers.paths import ROOT
import kernels as K


MAJOR = ".".join(triton.__version__.split(".")[:2])
FIXTURES = sorted(glob.glob(os.path.join(compiled_cases.FIXTURES, f"*.triton{MAJOR}.json")))


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "tt_cache"))


def _layout(line: str) -> dict:
    """``#blocked1 = #ttg.blocked<{sizePerThread = [1, 4], ..., order = [1, 0]}>`` -> its fields."""
    kind = re.search(r"#ttg\.(\w+)<", line).group(1)
    fields = {k: [int(x) for x in v.split(",") if x.strip()] for k, v in re.findall(r"(\w+) = \[([^\]]*)\]", line)}
    return {"kind": kind, **fields}


def _bytes(instr: str) -> int:
    if instr.startswith("cp.async"):
        return int(re.search(r"0x([0-9a-f]+)|, (\d+),", instr).group(1), 16)
    width = re.search(r"\.v(\d)\.[bfus](\d+)", instr) or re.search(r"()\.[bfus](\d+)\b", instr)
    return int(width.group(1) or 1) * int(width.group(2)) // 8


@pytest.mark.skipif(not FIXTURES, reason=f"no compiled fixtures for Triton {MAJOR} (tests/helpers/compiled_cases.py writes them)")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: os.path.basename(p).rsplit(".", 2)[0])
def test_layouts_and_vector_widths_are_the_compilers(path):
    fx = json.load(open(path))
    case = os.path.basename(path).split(".")[0]
    launch = compiled_cases.launch(case)
    c = launch.compiled(target=fx["target"])
    assert c.target == fx["target"] and c.num_warps == fx["num_warps"]
    source = open(launch.source_file).read().splitlines()
    assert len(c.ops) == len(fx["ops"]) > 0
    for ours, want in zip(c.ops, fx["ops"]):
        assert source[ours["line"] - 1].strip() == want["source_line"]
        assert ours["file"] == launch.source_file
        lay = dict(ours["layout"])
        lay.pop("name")
        assert {k: v for k, v in lay.items() if k in _layout(want["layout_line"])} == _layout(want["layout_line"])
        expected = "cp.async" if "async_copy_global_to_local" in want["ttgir"] else \
            "st" if want["ttgir"].startswith("tt.store") else "ld"
        assert ours["instruction"] == expected
        widths = [_bytes(p.split(" ", 1)[1] if p.startswith("@") else p) for p in want["ptx"]
                  if (p.lstrip("@%p0123456789 ").startswith("st.")) == (expected == "st") and "_group" not in p]
        assert ours["vector_bytes"] == max(widths)


def test_the_issue_cases_compile_as_measured_on_hardware():
    """The cases the GPU model got wrong by guessing: the matmul's A and B tiles use 16-byte cp.async with
    4-wide rows per thread; the softmax over rows of an odd stride can only use scalar 4-byte accesses."""
    mm = compiled_cases.launch("matmul_128x128x32_fp32_4warps").compiled("H200")
    loads = [o for o in mm.ops if o["direction"] == "load"]
    assert {o["instruction"] for o in loads} == {"cp.async"} and {o["vector_bytes"] for o in loads} == {16}
    assert {tuple(o["layout"]["sizePerThread"]) for o in loads} == {(1, 4)}
    sm = compiled_cases.launch("softmax_unaligned_rows").compiled("sm_90")
    assert {o["vector_bytes"] for o in sm.ops} == {4}
    assert "in_row_stride" not in sm.divisible_by_16


def test_every_ir_line_maps_to_the_source_line_that_wrote_it():
    launch = compiled_cases.launch("add_1024")
    c = launch.compiled("sm_90")
    src = open(launch.source_file).read().splitlines()
    load_lines = [i + 1 for i, t in enumerate(src) if "tl.load(" in t and launch.source_line <= i + 1 < launch.source_line + 12]
    store_line = next(i + 1 for i, t in enumerate(src) if "tl.store(" in t and i + 1 > launch.source_line)
    assert [o["line"] for o in c.ops if o["direction"] == "load"] == load_lines
    for stage in ("ttir", "ttgir", "ptx"):
        rows = c.ir_lines(store_line, file=launch.source_file, stage=stage)
        assert rows, stage
        text = c.ir[stage].splitlines()
        assert any(("tt.store" in text[r - 1]) or ("st.global" in text[r - 1]) for r in rows), stage
        mapped = [loc for loc in c.lines[stage] if loc]
        assert {f for f, _ in mapped} - {launch.source_file} <= {f for f, _ in mapped if "triton" in f}


def test_inlined_helpers_map_to_their_own_definition():
    k = triton_trace.trace(K.make_nested())
    K.poly(torch.randn(100), kernel=k)
    launch = triton_trace.current_trace().launches[-1]
    c = launch.compiled("sm_80")
    helper = module_dict(launch)["helpers"][0]
    assert helper["name"] == "_poly"
    body = helper["line"] + 1            # the helper's one-line body: return a * x * x + b
    assert c.ir_lines(body, file=helper["file"], stage="ttgir"), "the helper's arithmetic, inlined"


def test_specialization_follows_the_launcher(tmp_path):
    """As Triton's launcher: pointers at a 16-byte aligned element and integers divisible by 16 are marked
    divisible; an argument at an odd element offset, or an odd integer, is not; integers equal to 1 become
    constants."""
    k = triton_trace.trace(K.make_bias())
    x = torch.randn(1024 + 1)
    K.scale_bias(x[1:], x[1:].clone(), kernel=k)
    lc = triton_trace.current_trace().launches[-1]
    c = lc.compiled("sm_90")
    assert "x_ptr" not in c.divisible_by_16 and "bias_ptr" in c.divisible_by_16 and "n" in c.divisible_by_16
    assert c.signature["scale"] == "fp32"


def test_resources_and_occupancy():
    c = compiled_cases.launch("matmul_128x128x32_fp16_8warps").compiled("sm_90")
    assert c.num_warps == 8 and c.shared_bytes > 0 and c.registers and c.registers > 0
    occ = c.occupancy
    assert occ["warps_per_sm"] == occ["programs_per_sm"] * 8 <= 64
    # the arithmetic, by hand: 128 registers x 32 threads = 4096 per warp, 16 warps fit the 64K file
    assert occupancy(90, 8, 128, 0)["programs_per_sm"] == 2
    assert occupancy(90, 4, 32, 100_000) == {"programs_per_sm": 2, "warps_per_sm": 8, "occupancy": 0.125,
                                             "limited_by": "shared memory"}
    assert occupancy(80, 4, 32, 200_000)["programs_per_sm"] == 0


def test_compiles_are_cached_on_disk(monkeypatch):
    launch = compiled_cases.launch("transpose_32x32")
    first = launch.compiled("sm_80")
    from triton_trace.compiled import toolchain

    def refuse(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(toolchain, "compile_jit", refuse)
    again = launch.compiled("sm_80")
    assert again.ir == first.ir and again.ops == first.ops
    with pytest.raises(CompileError, match="transpose_kernel.*sm_86"):
        launch.compiled("sm_86")       # not cached: the (refused) compiler runs and its error is named


def test_targets_and_errors():
    launch = compiled_cases.launch("add_1024")
    with pytest.raises(TraceUsageError, match="give a CUDA architecture"):
        launch.compiled("sm_big")
    assert launch.compiled("B200").target == "sm_100" and launch.compiled(80).target == "sm_80"


def test_a_crafted_trace_cannot_run_code_through_its_module(tmp_path):
    """The module is rebuilt from a trace file: nothing but imports, constants and function definitions
    with plain defaults and annotations runs, and the viewer allows only Triton's and numerical imports."""
    launch = compiled_cases.launch("add_1024")
    mod = module_dict(launch)
    bad = [
        {**mod, "imports": ["import os; os.system('touch pwned')"]},
        {**mod, "constants": ["X = __import__('os').system('touch pwned')"]},
        {**mod, "helpers": [{"name": "h", "def_name": "h", "file": "f", "line": 1,
                             "source": "def h(x=__import__('os').system('touch pwned')):\n    return x\n"}]},
        {**mod, "helpers": [{"name": "h", "def_name": "h", "file": "f", "line": 1,
                             "source": "def h(x):\n    return x\nprint('side effect')\n"}]},
    ]
    for m in bad:
        with pytest.raises(TraceUsageError):
            kernel_module(with_module(launch, m))
    with pytest.raises(TraceUsageError, match="allowed here"):
        kernel_module(with_module(launch, {**mod, "imports": ["import subprocess"]}),
                      allowed_imports={"triton", "torch"})
    assert not os.path.exists("pwned")


def test_cli_ir_prints_the_mapped_ir(tmp_path):
    launch = compiled_cases.launch("add_1024")
    path = tmp_path / "t.ttrace"
    triton_trace.Trace((launch,)).save(path)        # signed with this user's key (the cache folder's)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "triton_trace", "ir", str(path), "--target", "A100"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "sm_80" in r.stdout and "tt.load as ld" in r.stdout
    r = subprocess.run([sys.executable, "-m", "triton_trace", "ir", str(path), "--stage", "ptx"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and re.search(r"vector_add\.py:\d+\s+@%p\d+ st\.global", r.stdout)
    r = subprocess.run([sys.executable, "-m", "triton_trace", "ir", str(path), "--launch", "3"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "holds 1 launch" in r.stderr


# ------------------------------------------------------------------------------------------------------
# the compiled layouts in the analysis (analysis/memory/layouts.py) and the what-if replays (analysis/advice/whatif.py)
# ------------------------------------------------------------------------------------------------------
from triton_trace.analysis.memory.layouts import request_order  # noqa: E402


def test_request_order_of_a_blocked_layout_by_hand():
    lay = {"kind": "blocked", "sizePerThread": [4], "threadsPerWarp": [32], "warpsPerCTA": [4], "order": [0]}
    got = request_order(lay, (1024,), 4, 4, write=False)
    w, j, l, v = np.meshgrid(np.arange(4), np.arange(2), np.arange(32), np.arange(4), indexing="ij")
    assert np.array_equal(got, j * 512 + w * 128 + l * 4 + v)        # tile of 512, repeated twice
    # a block half the layout's height: warps 2 and 3 hold warps 0 and 1's rows again
    lay2 = {"kind": "blocked", "sizePerThread": [1, 4], "threadsPerWarp": [4, 8], "warpsPerCTA": [4, 1], "order": [1, 0]}
    loads = request_order(lay2, (8, 32), 4, 4, write=False)
    assert np.array_equal(loads[2], loads[0]) and np.array_equal(loads[3], loads[1])
    stores = request_order(lay2, (8, 32), 4, 4, write=True)
    assert (stores[2:] == -1).all() and (stores[:2] >= 0).all()       # the redundant holders store nothing
    assert sorted(stores[stores >= 0].tolist()) == list(range(256))
    assert request_order({**lay2, "kind": "mma"}, (8, 32), 4, 4, write=False) is None


def test_compiled_layouts_count_requests_and_sectors_as_the_hardware_issues_them():
    """Softmax over 8 rows of 1000 floats with a row stride of 1100: Triton cannot prove the rows aligned, so
    every access is a scalar 4-byte load (one 128-byte request per warp and 32 columns). By hand: 32 requests
    per row; rows start 4400 bytes apart, so odd rows sit 16 bytes into a sector: even rows touch 31 x 4 + 1
    sectors, odd ones 31 x 5 + 2."""
    launch = compiled_cases.launch("softmax_unaligned_rows")
    rep = triton_trace.analyze(launch, gpu="H200").to_dict()["launches"][0]
    load = next(o for o in rep["ops"] if o["kind"] == "load")
    assert rep["compiled"]["layouts"] == "compiler" and rep["compiled"]["note"] is None
    assert load["requests"] == 8 * 32 and load["sectors"] == 4 * (31 * 4 + 1) + 4 * (31 * 5 + 2)
    assert load["compiled_as"].startswith("ld 4 B, blocked sizePerThread=[1]")
    model = triton_trace.analyze(launch, gpu="H200", layouts="model").to_dict()["launches"][0]
    assert model["compiled"]["layouts"] == "model" and next(o for o in model["ops"] if o["kind"] == "load")["requests"] == 64
    assert rep["compiled"]["occupancy"]["programs_per_sm"] > 0 and rep["compiled"]["registers"] > 0


def test_without_a_kernel_module_the_analysis_says_it_inferred_the_layouts():
    import dataclasses
    launch = compiled_cases.launch("add_1024")
    bare = dataclasses.replace(launch, module=None)
    rep = triton_trace.analyze(bare).to_dict()["launches"][0]
    assert rep["compiled"]["layouts"] == "model" and "without its kernel module" in rep["compiled"]["note"]
    assert all(o["compiled_as"] is None for o in rep["ops"])


def _matmul_trace(group):
    k = triton_trace.trace(K.make_matmul(), values=False)
    triton_trace.reset()
    a, b = torch.randn(256, 64), torch.randn(64, 512)
    K.matmul(a, b, kernel=k, block_m=32, block_n=32, block_k=32, group_m=group)
    return triton_trace.current_trace().launches[-1]


def test_group_m_what_if_equals_tracing_with_that_group_size():
    """The replay of the GROUP_M=1 trace in GROUP_M=4 order predicts exactly what analysing a GROUP_M=4 trace
    predicts (an L2 of 64 KiB, so the order matters); GROUP_M=8 changes nothing here, and gets no hint."""
    kw = dict(gpu="H200", l2_bytes=64 << 10, programs_in_flight=8, layouts="model", what_if=True)
    g1 = triton_trace.analyze(_matmul_trace(1), **kw).to_dict()["launches"][0]
    g4 = triton_trace.analyze(_matmul_trace(4), **kw).to_dict()["launches"][0]
    g8 = triton_trace.analyze(_matmul_trace(8), **kw).to_dict()["launches"][0]
    hint = next(h for h in g1["hints"] if h["kind"] == "program_order" and "GROUP_M=4" in h["message"])
    assert not any("GROUP_M=8" in h["message"] for h in g1["hints"])
    assert g8["metrics"]["dram_read_bytes"] == g1["metrics"]["dram_read_bytes"]
    before, after = g1["metrics"]["dram_read_bytes"], g4["metrics"]["dram_read_bytes"]
    assert f"({change(before, after)})" in hint["message"] and before != after
    src = open(g1["ops"][0]["file"]).read().splitlines()
    assert "GROUP_M" in src[hint["line"] - 1]
    assert triton_trace.analyze(_matmul_trace(1), **{**kw, "what_if": False}).to_dict()["launches"][0]["hints"] == \
        [h for h in g1["hints"] if h["kind"] not in ("program_order", "other_gpu")]


def test_other_gpu_what_if_equals_analysing_for_that_gpu():
    launch = _matmul_trace(1)
    h200 = triton_trace.analyze(launch, gpu="H200", layouts="model", what_if=True).to_dict()["launches"][0]
    a100 = triton_trace.analyze(launch, gpu="A100", layouts="model").to_dict()["launches"][0]
    hints = [h for h in h200["hints"] if h["kind"] == "other_gpu" and "A100" in h["message"]]
    want = a100["metrics"]["dram_read_bytes"]
    if abs(want - h200["metrics"]["dram_read_bytes"]) < 0.05 * h200["metrics"]["dram_read_bytes"]:
        assert not hints            # under the hint threshold
    else:
        assert f"{change(h200['metrics']['dram_read_bytes'], want)})" in hints[0]["message"]


def test_analysing_a_trace_never_imports_what_it_names(tmp_path):
    """A crafted trace whose kernel module imports another module: the analysis refuses the import (no side
    effect), keeps the inferred layouts and says why."""
    launch = compiled_cases.launch("add_1024")
    marker = tmp_path / "imported"
    (tmp_path / "evil_mod.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        mod = {**module_dict(launch), "imports": module_dict(launch)["imports"] + ["import evil_mod"]}
        crafted = with_module(launch, mod)
        rep = triton_trace.analyze(crafted).to_dict()["launches"][0]
    finally:
        sys.path.remove(str(tmp_path))
    assert not marker.exists()
    assert rep["compiled"]["layouts"] == "model" and "allowed here" in rep["compiled"]["note"]


def test_resource_hints_and_the_num_warps_what_if():
    """The 128x128 fp32 tile over 4 warps needs 255 registers and spills (as the H200 compile reported: 255
    registers, spills; 8 warps: 192 registers, none): the hints say so, and what_if=True compiles the other
    warp counts to show it."""
    launch = compiled_cases.launch("matmul_128x128x32_fp32_4warps")
    rep = triton_trace.analyze(launch, gpu="H200", what_if=True).to_dict()["launches"][0]
    kinds = {h["kind"]: h for h in rep["hints"]}
    assert rep["compiled"]["registers"] == 255 and rep["compiled"]["spill_bytes"] > 0
    assert "limited by registers" in kinds["occupancy"]["message"] and "spills" in kinds
    w8 = next(h for h in rep["hints"] if h["kind"] == "num_warps" and "num_warps=8" in h["message"])
    assert w8["effect"].startswith("no spills")
    assert w8["line"] == launch.source_line and w8["file"] == launch.source_file
    plain = triton_trace.analyze(launch, gpu="H200").to_dict()["launches"][0]
    assert not any(h["kind"] == "num_warps" for h in plain["hints"])


def test_crafted_modules_cannot_rebind_what_the_checks_trust():
    """Bypasses a review found, each refused with and without the viewer's import list: rebinding a
    builtin the literal check trusts (``float = eval``), a helper alias that is not a name, a decorator
    from the trace (``@atexit.register``), an import that rebinds ``tl``, a star import."""
    from triton_trace.compiled.source import SAFE_PACKAGES
    launch = compiled_cases.launch("add_1024")
    mod = module_dict(launch)

    def helper(**kw):
        return {"name": "h", "def_name": "h", "file": "f", "line": 1, "source": "def h(x):\n    return x\n", **kw}
    crafted = [
        {**mod, "constants": ["float = eval", "X = float(\"__import__('os').system('echo pwned')\")"]},
        {**mod, "helpers": [helper(source="def h(a=float('1')):\n    return a\n")], "constants": ["float = exec"]},
        {**mod, "helpers": [helper(name="__import__('os').system('echo pwned'); h")]},
        {**mod, "imports": mod["imports"] + ["import atexit"],
         "helpers": [helper(source="@atexit.register\ndef h():\n    return 1\n")]},
        {**mod, "imports": ["import os as tl"]},
        {**mod, "imports": ["from os import *"]},
    ]
    for m in crafted:
        for allowed in (None, SAFE_PACKAGES):
            with pytest.raises(TraceUsageError):
                kernel_module(with_module(launch, m), allowed)
    assert kernel_module(launch, SAFE_PACKAGES).kernel == "add_kernel"


def test_the_report_summary_says_how_each_launch_compiled():
    launch = compiled_cases.launch("matmul_128x128x32_fp32_4warps")
    text = triton_trace.analyze(launch).summary()
    assert "[compiled] launch 0 ('matmul_kernel') for sm_90: 4 warps, 255 registers per thread" in text
    assert "limited by registers" in text
    assert "[compiled]" not in triton_trace.analyze(launch, layouts="model").summary()


_WRITER = """
import os, sys
from triton_trace.compiled.toolchain import import_module
text, folder = open(sys.argv[1]).read(), sys.argv[2]
for _ in range(40):
    module, path = import_module(text, folder)
    assert module.VALUE == 12345
    os.unlink(path)
"""


def test_processes_importing_one_kernel_module_at_once_each_read_their_own_whole_file(tmp_path):
    """pytest-xdist workers compile the same kernel at once: each writes its module under a fresh random name
    (O_EXCL), so none reads another's half-written file, and no bytecode is written beside it."""
    import subprocess
    import sys
    text = "".join(f"# padding line {i:06d} to make the module slow to write\n" for i in range(60_000)) + \
        "VALUE = 12345\n"
    src = tmp_path / "text.py"
    src.write_text(text)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    folder = tmp_path / "modules"
    folder.mkdir()
    root = ROOT     # importable where not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, str(script), str(src), str(folder)], stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert not list(folder.iterdir())
