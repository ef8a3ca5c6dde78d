"""triton_trace.diff and ``triton-trace diff``: two traces of the same kernel side by side, checked on a
planted bug and its fix (tests/kernels/value_bugs.py) against what torch says the outputs are."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import triton_trace
from triton_trace.analysis.diff import _index
from triton_trace.model import TensorInfo
from helpers.source import marked_line
from kernels import value_bugs as V


def traced(kernel, grid, *args, **kw):
    triton_trace.reset()
    triton_trace.trace(kernel)[grid](*args, **kw)
    t = triton_trace.current_trace()
    triton_trace.reset()
    return t


@pytest.fixture(scope="module")
def before_after():
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    broken, fixed = torch.empty_like(x), torch.empty_like(x)
    a = traced(V.softmax_no_max, (6,), x, broken, 40, BLOCK=64)
    b = traced(V.softmax, (6,), x, fixed, 40, BLOCK=64)
    return a, b, broken, fixed


def test_the_elements_that_differ_name_who_wrote_them_on_both_sides(before_after):
    a, b, broken, fixed = before_after
    d = triton_trace.diff(a, b)
    assert d.outputs_differ
    [launch] = d.launches
    [out] = [t for t in launch.outputs if t.tensor == "out_ptr"]
    exact = ~((broken == fixed) | (broken.isnan() & fixed.isnan()))     # what torch sees, bit for bit
    assert out.differing == int(exact.sum()) > 1 and out.compared == 240 and out.only_a == out.only_b == 0
    # within torch.isclose's tolerances only the NaN differs: the Inf / Inf of row 3, column 7
    [launch] = triton_trace.diff(a, b, rtol=1e-5, atol=1e-8).launches
    [out] = [t for t in launch.outputs if t.tensor == "out_ptr"]
    assert out.differing == int((~torch.isclose(broken, fixed, equal_nan=True)).sum()) == 1
    [e] = out.examples
    assert e["index"] == [3, 7] and e["offset"] == 3 * 40 + 7
    assert e["a"]["program"] == e["b"]["program"] == [3, 0, 0] and e["a"]["kind"] == "store"
    assert e["a"]["value"] == "nan" and e["b"]["value"] == pytest.approx(fixed[3, 7].item())
    assert e["a"]["line"] == marked_line(V.softmax_no_max) + 1           # the store, the line after the exp
    assert [f["kind"] for f in launch.findings_removed] == ["nonfinite"] and launch.findings_added == ()
    assert "out_ptr: 1 of 240 element(s) differ" in triton_trace.diff(a, b, rtol=1e-5, atol=1e-8).summary()


def test_the_same_kernel_twice_agrees_and_a_tolerance_is_a_tolerance():
    x = torch.randn(3, 40)
    a = traced(V.softmax, (3,), x, torch.empty_like(x), 40, BLOCK=64)
    b = traced(V.softmax, (3,), x, torch.empty_like(x), 40, BLOCK=64)
    same = triton_trace.diff(a, b, analyze=False)
    assert not same.outputs_differ and "outputs equal" in same.summary()
    c = traced(V.softmax, (3,), x * (1 + 1e-6), torch.empty_like(x), 40, BLOCK=64)
    assert triton_trace.diff(a, c, analyze=False).outputs_differ
    assert not triton_trace.diff(a, c, rtol=1e-4, analyze=False).outputs_differ


def test_view_index_of_a_storage_offset_follows_the_strides():
    info = TensorInfo("y", "float32", (4, 8), (1, 4), 0, 32, 4)       # torch.empty(8, 4).T
    assert _index(info, 13) == [1, 3] and _index(info, 40) is None
    off = TensorInfo("z", "float32", (3,), (2,), 5, 20, 4)             # z = base[5::2]
    assert _index(off, 9) == [2] and _index(off, 8) is None


def test_the_command_line(before_after, tmp_path):
    a, b, _, _ = before_after
    a.save(tmp_path / "a.ttrace")
    b.save(tmp_path / "b.ttrace")
    cli = [sys.executable, "-m", "triton_trace", "diff"]
    r = subprocess.run(cli + [str(tmp_path / "a.ttrace"), str(tmp_path / "b.ttrace"), "--rtol", "1e-5", "--atol", "1e-8"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "out_ptr: 1 of 240 element(s) differ" in r.stdout, r.stderr
    assert "+ " not in r.stdout and "- nonfinite" in r.stdout
    r = subprocess.run(cli + [str(tmp_path / "a.ttrace"), str(tmp_path / "b.ttrace"), "--json", "--outputs-only"],
                       capture_output=True, text=True, timeout=300)
    data = json.loads(r.stdout)
    assert r.returncode == 1 and data["outputs_differ"] and data["launches"][0]["outputs"][-1]["differing"] > 1
    r = subprocess.run(cli + [str(tmp_path / "b.ttrace"), str(tmp_path / "b.ttrace")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "outputs equal" in r.stdout
    (tmp_path / "bad.ttrace").write_bytes(b"not a trace")
    r = subprocess.run(cli + [str(tmp_path / "bad.ttrace"), str(tmp_path / "b.ttrace")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "bad.ttrace" in r.stderr
