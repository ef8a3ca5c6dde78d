"""Every example runs as a user would run it (``python examples/NAME.py --no-serve``), exits 0 and prints
what its docstring promises. The examples run as subprocesses, two at a time, started once per module."""
from __future__ import annotations

import ast
import glob
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers.paths import ROOT
from helpers.procs import popen_with_sigint

EXAMPLES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "examples", "*.py")))
TIMEOUT = 300

# example -> regular expressions its output must match
EXPECTED = {
    "vector_add": [r"\[0\] add_kernel grid=\(40, 1, 1\)", r"last program \(39, 0, 0\) stores 16 of 256 lanes",
                   r"no findings"],
    "fused_softmax": [r"softmax_kernel grid=\(48, 1, 1\)", r"program 0 loads 100 of 128 lanes", r"row stride 128",
                      r"no findings"],
    "layer_norm": [r"match torch", r"layer_norm_bwd_dx grid=\(32, 1, 1\).*atomic_cas=32",
                   r"program 0 memory ops: atomic_cas, atomic_xchg, load, store", r"layer_norm_bwd_dwdb"],
    "matmul_grouped": [r"GROUP_M=1: loads [\d.]+ [kMG]?B, predicted DRAM traffic", r"GROUP_M=4: loads",
                       r"GROUP_M=4 moves [\d.]+% fewer bytes"],
    "out_of_bounds": [r"out_of_bounds: program \[0, 0, 0\], line \d+, tensor x_ptr, element offsets \[-1\]",
                      r"out_of_bounds: program \[7, 0, 0\], line \d+, tensor x_ptr, element offsets \[1000\]",
                      r"the fixed kernel: 0 finding\(s\)"],
    "torch_custom_op": [r"path 1, CPU fallback: 0 Triton launches traced",
                        r"path 2, Triton through wrap_triton: 3 launches traced", r"no findings in 3 launch"],
    "autotune": [r"scale_kernel: traced config \{'BLOCK': 64\} \(num_warps=2\), chosen by: first config; grid \(47, 1, 1\)",
                 r"scale_kernel_pinned: traced config \{'BLOCK': 256\} .*chosen by: pinned; grid \(12, 1, 1\)"],
}


def _run(name: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, os.path.join("examples", f"{name}.py"), "--no-serve"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def results():
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(EXAMPLES, pool.map(_run, EXAMPLES)))


def test_every_example_is_checked():
    assert set(EXAMPLES) == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(results, name):
    proc = results[name]
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    for pattern in EXPECTED[name]:
        assert re.search(pattern, proc.stdout), f"{name}: no line matches {pattern!r} in:\n{proc.stdout}"
    assert re.search(r"^trace: \d+ launch\(es\)", proc.stdout, re.M)                 # the trace summary
    assert re.search(r"^triton_trace(: no findings| found \d+ problem)", proc.stdout, re.M)  # the report summary
    assert "Traceback" not in proc.stderr


def test_grouped_matmul_predicts_less_dram_traffic(results):
    out = results["matmul_grouped"].stdout
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    dram = {int(g): float(v) * scale[u]
            for g, v, u in re.findall(r"GROUP_M=(\d+): loads .*predicted DRAM traffic ([\d.]+) ([kMG]?B)", out)}
    loads = set(re.findall(r"GROUP_M=\d+: loads ([\d.]+ [kMG]?B)", out))
    assert len(loads) == 1                     # the same bytes are loaded either way
    assert dram[4] < dram[1]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_is_a_readable_standalone_script(name):
    path = os.path.join(ROOT, "examples", f"{name}.py")
    with open(path) as f:
        source = f.read()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc and "--no-serve" in doc, f"{name}: the docstring says what it shows and how to run it"
    imports = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imports |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.split(".")[0] in ("kernels", "tests", "conftest") for m in imports)
    assert "triton_trace.launch(" in source and 'if __name__ == "__main__":' in source


def test_examples_help_does_not_run_anything():
    proc = subprocess.run([sys.executable, os.path.join("examples", "vector_add.py"), "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "--no-serve" in proc.stdout and "trace:" not in proc.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _poll(url: str, deadline: float) -> str:
    """GET ``url`` until it answers or the deadline passes."""
    while True:
        try:
            # the header the page sends: the server refuses API requests without it (a foreign page's)
            with urllib.request.urlopen(urllib.request.Request(url, headers={"X-TT-Client": "1"}), timeout=5) as resp:
                return resp.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_example_serves_the_trace_until_ctrl_c():
    port = _free_port()
    proc = popen_with_sigint([sys.executable, os.path.join("examples", "vector_add.py"), "--port", str(port)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        body = _poll(f"http://127.0.0.1:{port}/api/trace", time.monotonic() + TIMEOUT)
        assert "add_kernel" in body
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert f"port {port}" in out and "no findings" in out
    assert "Traceback" not in out


def test_a_second_ctrl_c_during_shutdown_exits_quietly():
    port = _free_port()
    proc = popen_with_sigint([sys.executable, os.path.join("examples", "vector_add.py"), "--port", str(port)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _poll(f"http://127.0.0.1:{port}/api/trace", time.monotonic() + TIMEOUT)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out
