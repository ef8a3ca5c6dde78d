"""A kernel made anew with the code of a kernel rewritten before (a kernel defined inside a test function, one
per test case; a notebook cell run again) runs that rewrite instead of rewriting its source again. The reuse
gives the outputs (checked against torch) and the trace of a fresh rewrite, and is never made across different
globals, defaults or closures."""
import importlib.util

import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.record.interp import hooks, rewrites
from helpers.batch import assert_same_traces


DEFAULT_N = 4


def _make():
    @triton.jit
    def twice_plus_one(X, Out, N: tl.constexpr = DEFAULT_N):
        offs = tl.arange(0, N)
        v = tl.load(X + offs)
        if tl.program_id(0) == 0:
            v = v * 2.0
        tl.store(Out + offs, v + 1.0)
    return twice_plus_one


def _launch(kernel, x, **kw):
    triton_trace.reset()
    out = torch.zeros_like(x)
    trace(kernel)[(1,)](x, out, **kw)
    return out, triton_trace.current_trace()


def test_a_kernel_made_again_reuses_the_rewrite_and_records_the_same(monkeypatch):
    monkeypatch.setattr(rewrites, "_BY_CODE", {})
    x = torch.randn(16)
    first, second = _make(), _make()
    assert first.fn is not second.fn and first.fn.__code__ == second.fn.__code__
    out1, t1 = _launch(first, x, N=16)                   # rewritten from its source
    out2, t2 = _launch(second, x, N=16)                  # the same rewrite
    assert hooks.rewritten(second.fn, kernel=True) is hooks.rewritten(first.fn, kernel=True)
    assert torch.equal(out1, x * 2.0 + 1.0) and torch.equal(out2, out1)
    assert_same_traces(t1, t2)
    # and the same as a rewrite made without the reuse
    monkeypatch.setattr(rewrites, "_BY_CODE", {})
    third = _make()
    out3, t3 = _launch(third, x, N=16)
    assert hooks.rewritten(third.fn, kernel=True) is not hooks.rewritten(first.fn, kernel=True)
    assert torch.equal(out3, out1)
    assert_same_traces(t1, t3)


def test_other_defaults_or_a_closure_are_rewritten_anew(monkeypatch):
    monkeypatch.setattr(rewrites, "_BY_CODE", {})
    x = torch.randn(16)
    four, eight = _make(), _make()
    eight.fn.__defaults__ = (8,)                         # same code, another default
    out4, _ = _launch(four, x)
    out8, _ = _launch(eight, x)
    assert hooks.rewritten(four.fn, kernel=True) is not hooks.rewritten(eight.fn, kernel=True)
    assert torch.equal(out4[:4], x[:4] * 2.0 + 1.0) and torch.equal(out4[4:], torch.zeros(12))
    assert torch.equal(out8[:8], x[:8] * 2.0 + 1.0) and torch.equal(out8[8:], torch.zeros(8))

    def scaled(scale):
        @triton.jit
        def scale_by(X, Out, N: tl.constexpr):
            offs = tl.arange(0, N)
            tl.store(Out + offs, tl.load(X + offs) * scale)
        return scale_by

    for s in (2.0, 3.0):
        out, _ = _launch(scaled(s), x, N=16)
        assert torch.equal(out, x * s)


def test_the_same_file_in_two_modules_keeps_each_modules_globals(tmp_path, monkeypatch):
    monkeypatch.setattr(rewrites, "_BY_CODE", {})
    path = tmp_path / "scaled_kernel.py"
    path.write_text("import triton\nimport triton.language as tl\nSCALE = 1.0\n\n\n@triton.jit\n"
                    "def scale_by(X, Out, N: tl.constexpr):\n    offs = tl.arange(0, N)\n"
                    "    tl.store(Out + offs, tl.load(X + offs) * SCALE)\n")
    modules = []
    for name, scale in (("scaled_a", 2.0), ("scaled_b", 5.0)):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod.SCALE = scale
        modules.append(mod)
    x = torch.randn(16)
    a, b = (m.scale_by for m in modules)
    assert a.fn.__code__ == b.fn.__code__
    out_a, _ = _launch(a, x, N=16)
    out_b, _ = _launch(b, x, N=16)
    assert torch.equal(out_a, x * 2.0) and torch.equal(out_b, x * 5.0)
