"""Reproducers: any traced launch becomes a folder with launch.py and launch_data.npz that runs as it is, in a
fresh process, and reproduces the traced outputs bit for bit (compared byte for byte with the storages the
trace kept after the launch, not with the tool's own report)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.modules import module_dict, with_module
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import TraceFileError, TraceUsageError
from helpers.paths import ROOT, TESTS
import kernels as K


sys.path.insert(0, os.path.join(ROOT, "benchmarks", "fidelity"))


def _run(script, *flags, env=None):
    env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True, env=env,
                          cwd=os.path.dirname(str(script)), timeout=600)


def test_every_test_and_example_kernel_reproduces_bit_for_bit(tmp_path):
    """Every kernel of tests/kernels (library-style and tutorial kernels included) and of examples/, traced
    with inputs=True; each launch's reproducer runs in a fresh process."""
    import repro_all
    status = repro_all.main(["--out", str(tmp_path), "--workers", "2"])
    import json
    res = json.load(open(tmp_path / "repro_results.json"))
    failed = [(r["kernel"], r["last"], r["stderr"][-800:]) for r in res["rows"] if not r["ok"]]
    assert status == 0 and not failed, failed
    assert res["summary"]["reproducers"] >= 40


@triton.jit
def _shift_add(x_ptr, y_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE + tl.load(y_ptr + offs, mask=m), mask=m)


def test_aliasing_arguments_stay_aliased(tmp_path):
    """out and x are views of one storage (out = x[1:]): the reproducer rebuilds both on one storage, so the
    in-place update reads what earlier programs wrote exactly as the traced run did."""
    base = torch.randn(4097)
    x, out, y = base[:-1], base[1:], torch.randn(4096)
    triton_trace.reset()
    triton_trace.trace(_shift_add, inputs=True)[(64,)](x, y, out, 4096, SCALE=2.0, BLOCK=64)
    launch = triton_trace.current_trace().launches[-1]
    script = launch.reproducer(tmp_path / "r")
    text = open(script).read()
    assert "'x_ptr': {'storage': 0" in text and "'out_ptr': {'storage': 0" in text and "'offset': 1" in text
    r = _run(script)
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr
    r = _run(script, "--plain")
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr


def test_plain_mode_reports_where_the_plain_interpreter_differs(tmp_path):
    """The plain interpreter cannot run a float argument used as a tensor (eps.to(...)): --plain says so
    with the interpreter's error and a non-zero status, while the traced reproducer matches."""
    x, w = torch.randn(8, 200), torch.randn(200)
    triton_trace.reset()
    K.rms_norm(x, w, kernel=triton_trace.trace(K.make_rms_norm(), inputs=True))
    script = triton_trace.current_trace().launches[-1].reproducer(tmp_path / "r")
    assert _run(script).returncode == 0
    r = _run(script, "--plain")
    assert r.returncode == 1 and "has no attribute 'to'" in r.stderr


def test_gpu_mode_without_cuda_says_so_in_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: tests/gpu runs the --gpu reproducers")
    triton_trace.reset()
    K.add(torch.randn(1000), torch.randn(1000), kernel=triton_trace.trace(K.make_add(), inputs=True))
    script = triton_trace.current_trace().launches[-1].reproducer(tmp_path / "r")
    r = _run(script, "--gpu")
    assert r.returncode == 2 and r.stdout.strip().count("\n") == 0 and "cuda" in r.stdout.lower()


def _stats(a: np.ndarray) -> tuple:
    f = a[np.isfinite(a)]
    return f.mean(), f.std(), f.min(), f.max(), int(np.isnan(a).sum()), int(np.isinf(a).sum())


@pytest.mark.parametrize("kept", [True, False], ids=["from-kept-inputs", "from-recorded-loads"])
def test_statistical_inputs_match_the_recorded_statistics(tmp_path, kept):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(20_000, generator=g) * 3 + 5
    x[::1000] = float("nan")
    y = torch.rand(20_000, generator=g) * 10 - 2
    triton_trace.reset()
    K.add(x, y, kernel=triton_trace.trace(K.make_add(), inputs=kept), block=256)
    launch = triton_trace.current_trace().launches[-1]
    script = launch.reproducer(tmp_path / "r", data="stats")
    data = np.load(tmp_path / "r" / "launch_data.npz")
    for k, src in enumerate((x, y)):
        got = _stats(data[f"input_{k}"].view(np.float32).astype(np.float64))
        want = _stats(src.double().numpy())
        assert got[4:] == want[4:]                                     # NaN and Inf counts
        assert abs(got[0] - want[0]) < 0.05 * want[1] and abs(got[1] / want[1] - 1) < 0.1
        assert want[2] <= got[2] and got[3] <= want[3]                 # inside the recorded range
    r = _run(script)
    assert r.returncode == 0 and "statistical stand-ins" in r.stdout
    assert "statistical stand-ins" in open(script).read()


def test_inputs_over_the_budget_are_not_kept_and_the_reproducer_says_why(tmp_path):
    triton_trace.reset()
    K.add(torch.randn(10_000), torch.randn(10_000), kernel=triton_trace.trace(K.make_add(), inputs="64KB"))
    launch = triton_trace.current_trace().launches[-1]
    assert launch.inputs is None and "more than the limit of 64000 bytes" in module_dict(launch)["inputs"]["note"]
    with pytest.raises(TraceUsageError, match="no exact inputs.*more than the limit"):
        launch.reproducer(tmp_path / "r", data="exact")
    script = launch.reproducer(tmp_path / "r")
    assert "EXACT = False" in open(script).read() and "more than the limit" in open(script).read()


def test_a_failing_launch_keeps_its_inputs_and_its_reproducer_fails_the_same_way(tmp_path):
    @triton.jit
    def checked(x_ptr, limit, N: tl.constexpr):
        v = tl.load(x_ptr + tl.arange(0, N))
        tl.device_assert(v < limit, "value over the limit")

    triton_trace.reset()
    x = torch.arange(16, dtype=torch.float32)
    with pytest.raises(Exception, match="value over the limit"):
        triton_trace.trace(checked, inputs=True)[(1,)](x, 10.0, N=16, debug=True)
    launch = triton_trace.current_trace().launches[-1]
    assert not launch.completed and launch.inputs is not None
    script = launch.reproducer(tmp_path / "r")
    assert "did not complete" in open(script).read()
    r = _run(script)
    assert r.returncode != 0 and "value over the limit" in (r.stdout + r.stderr)


def test_kept_inputs_survive_the_trace_file_and_a_crafted_size_is_refused(tmp_path):
    triton_trace.reset()
    K.add(torch.randn(3000), torch.randn(3000), kernel=triton_trace.trace(K.make_add(), inputs=True))
    trace = triton_trace.current_trace()
    path = tmp_path / "t.ttrace"
    trace.save(path)
    back = triton_trace.load(path).launches[0]
    lc = trace.launches[0]
    assert np.array_equal(back.inputs, lc.inputs) and np.array_equal(back.finals, lc.finals)
    desc = dict(module_dict(lc)["inputs"], storages=[s + 8 for s in module_dict(lc)["inputs"]["storages"]])
    bad = with_module(lc, {**module_dict(lc), "inputs": desc})
    triton_trace.Trace((bad,)).save(tmp_path / "bad.ttrace")
    with pytest.raises(TraceFileError, match="kept inputs"):
        triton_trace.load(tmp_path / "bad.ttrace")


def test_cli_run_inputs_then_repro(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(
        "import sys, torch\n"
        f"sys.path.insert(0, {TESTS!r})\n"
        "import kernels as K\n"
        "K.softmax(torch.randn(33, 100)[:, :90])\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, "-m", "triton_trace", "run", "--inputs", str(script), "-o",
                        str(tmp_path / "t.ttrace")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "triton_trace", "repro", str(tmp_path / "t.ttrace"), "--launch", "-1",
                        "-o", str(tmp_path / "rep")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and "exact inputs" in r.stderr, r.stderr
    r = _run(tmp_path / "rep" / "launch.py", "--save", str(tmp_path / "again.ttrace"))
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr
    again = triton_trace.load(tmp_path / "again.ttrace").launches[0]
    first = triton_trace.load(tmp_path / "t.ttrace").launches[0]
    assert np.array_equal(again.ops["line"] - again.source_line, first.ops["line"] - first.source_line)
    r = subprocess.run([sys.executable, "-m", "triton_trace", "repro", str(tmp_path / "t.ttrace"), "--launch", "5"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "holds 1 launch" in r.stderr


def test_a_kernel_using_what_cannot_be_carried_over_is_named(tmp_path):
    class Opaque:
        pass
    thing = Opaque()

    def body(x_ptr, N: tl.constexpr):
        if thing is None:
            tl.store(x_ptr, 1.0)
        tl.store(x_ptr + tl.arange(0, N), tl.zeros([N], tl.float32))
    triton_trace.reset()
    try:
        triton_trace.trace(triton.jit(body))[(1,)](torch.ones(8), N=8)
    except Exception:
        pass
    launch = triton_trace.current_trace().launches[-1]
    assert any(m["name"] == "thing" and "Opaque" in m["why"] for m in module_dict(launch)["missing"])
    script = launch.reproducer(tmp_path / "r", data="stats")
    assert "# NOTE: 'thing' was not carried over" in open(script).read()


import enum  # noqa: E402


class _Mode(enum.IntEnum):
    SCALE = 3


_FACTOR = np.float64(1.5)
_SCALE = _Mode.SCALE          # an IntEnum member: carried as its value


@triton.jit
def _uses_globals(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * _FACTOR + _SCALE)


def test_numpy_scalars_and_enums_are_carried_over(tmp_path):
    x = torch.randn(16)
    triton_trace.reset()
    triton_trace.trace(_uses_globals, inputs=True)[(1,)](x, torch.empty(16), N=16)
    launch = triton_trace.current_trace().launches[-1]
    consts = module_dict(launch)["constants"]
    assert "_FACTOR = 1.5" in consts and "_SCALE = 3" in consts and not module_dict(launch)["missing"]
    r = _run(launch.reproducer(tmp_path / "r"))
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr


def test_statistical_views_of_one_storage_keep_their_own_statistics(tmp_path):
    base = torch.cat([torch.randn(4096) * 0.1, torch.randn(4096) * 10 + 100])
    x, y = base[:4096], base[4096:]
    triton_trace.reset()
    K.add(x, y, kernel=triton_trace.trace(K.make_add(), inputs=True), block=256)
    launch = triton_trace.current_trace().launches[-1]
    launch.reproducer(tmp_path / "r", data="stats")
    data = np.load(tmp_path / "r" / "launch_data.npz")["input_0"].view(np.float32)
    lo, hi = data[:4096], data[4096:8192]
    assert abs(lo.mean()) < 0.05 and 0.05 < lo.std() < 0.2 and abs(hi.mean() - 100) < 1 and 5 < hi.std() < 15


def test_text_from_the_trace_cannot_escape_the_script(tmp_path):
    import ast
    triton_trace.reset()
    K.add(torch.randn(100), torch.randn(100), kernel=triton_trace.trace(K.make_add(), inputs=True))
    launch = triton_trace.current_trace().launches[-1]
    evil = '"""\nimport os; os.system("echo pwned")\n"""'
    mod = {**module_dict(launch), "missing": [{"name": "x\nimport os", "why": evil}]}
    crafted = with_module(launch, mod, completed=False, error=evil)
    script = crafted.reproducer(tmp_path / "r", data="stats")
    tree = ast.parse(open(script).read())
    assert [type(n).__name__ for n in tree.body[:3]] == ["Expr", "Import", "Import"]   # docstring, os, sys
    assert not any(isinstance(n, ast.Import) and n.names[0].name == "os" and n.lineno > 20 for n in tree.body)
    bad = {**module_dict(launch), "params": {**module_dict(launch)["params"],
                                              "n": {"kind": "value", "expr": "__import__('os').getcwd()"}}}
    with pytest.raises(TraceUsageError, match="not a constant"):
        with_module(launch, bad).reproducer(tmp_path / "r2")
