"""triton_trace.compare on a real GPU: correct kernels agree within the tolerance their ops call for; a
kernel with a race (non-atomic read-modify-write from every program) and a tf32 dot differ, and every
differing element names the program, op and line that stored it in the trace. Skips without CUDA."""
from __future__ import annotations

import inspect

import pytest
import torch
import triton
import triton.language as tl

import kernels as K
import triton_trace

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
pytestmark = [needs_gpu, pytest.mark.gpu]


@triton.jit
def count_racy(counter_ptr, BLOCK: tl.constexpr):
    c = tl.load(counter_ptr + tl.arange(0, BLOCK))
    tl.store(counter_ptr + tl.arange(0, BLOCK), c + 1)          # every program: load, add, store, no atomics


@triton.jit
def dot_default_precision(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))   # tf32 on the GPU by default


def test_correct_kernels_agree():
    x, y = torch.randn(10_000, device="cuda"), torch.randn(10_000, device="cuda")
    r = triton_trace.compare(K.make_add(), (triton.cdiv(10_000, 1024),), x, y, torch.empty_like(x), 10_000, BLOCK=1024)
    assert r.ok and [o.name for o in r.outputs] == ["out_ptr"] and "elementwise" in r.outputs[0].tolerance
    s = torch.randn(64, 1000, device="cuda")
    out = torch.empty_like(s)
    r = triton_trace.compare(K.make_softmax(), (64,), out, s, s.stride(0), out.stride(0), 1000, BLOCK=1024)
    assert r.ok, r.summary()
    assert "sums of up to 1024 terms" in r.outputs[0].tolerance
    a, b = torch.randn(128, 96, device="cuda"), torch.randn(96, 64, device="cuda")
    c = torch.zeros(128, 64, device="cuda")
    r = triton_trace.compare(K.make_matmul(), (triton.cdiv(128, 32) * triton.cdiv(64, 32),), a, b, c, 128, 64, 96,
                             a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                             BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2)
    assert r.ok, r.summary()
    assert not c.any()                                           # compare() works on copies: c stays zero


def test_a_race_that_the_gpus_scheduling_exposes():
    counter = torch.zeros(32, device="cuda")
    r = triton_trace.compare(count_racy, (4096,), counter, BLOCK=32)
    assert not r.ok and counter.sum().item() == 0                  # the user's counter is untouched
    [o] = r.outputs
    assert o.name == "counter_ptr" and o.differing == 32
    e = o.examples[0]
    assert e["trace"] == 4096.0 and e["gpu"] < 4096.0              # the trace runs programs one after another
    lines, first = inspect.getsourcelines(count_racy.fn)
    store = first + next(k for k, text in enumerate(lines) if "tl.store" in text)
    assert e["program"] == [4095, 0, 0] and e["line"] == store
    assert "stored by program (4095, 0, 0)" in r.summary()


def test_a_tf32_dot_is_outside_the_fp32_bound():
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    r = triton_trace.compare(dot_default_precision, (1,), a, b, torch.empty(64, 64, device="cuda"), N=64)
    [o] = r.outputs
    assert "tl.dot over K = 64" in o.tolerance
    assert o.differing > 0 and o.max_abs_diff > 1e-4              # tf32 keeps 10 mantissa bits


SCRIPT = """
import torch, triton, triton.language as tl

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n) + tl.load(y_ptr + i, mask=i < n), mask=i < n)

@triton.jit
def bump(counter_ptr, BLOCK: tl.constexpr):
    c = tl.load(counter_ptr + tl.arange(0, BLOCK))
    tl.store(counter_ptr + tl.arange(0, BLOCK), c + 1)

x = torch.randn(5000, device="cuda")
out = torch.empty_like(x)
add[(5,)](x, x, out, 5000, BLOCK=1024)
assert torch.equal(out, x + x)                  # the script's own launches still run, and right
counter = torch.zeros(16, device="cuda")
bump[(2048,)](counter, BLOCK=16)
print("script done")
"""


def test_the_command_line_compares_every_launch_of_a_script(tmp_path):
    import subprocess
    import sys
    (tmp_path / "racy.py").write_text(SCRIPT)
    r = subprocess.run([sys.executable, "-m", "triton_trace", "diff", "--gpu", str(tmp_path / "racy.py")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr
    assert "script done" in r.stdout and "add: GPU and trace agree" in r.stdout
    assert "bump: GPU and trace differ" in r.stdout and "counter_ptr: 16 of 16 element(s) differ" in r.stdout
    assert "2 launch(es) compared, 1 differ" in r.stderr
