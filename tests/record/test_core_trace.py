"""The trace API: decorator forms and options, program filters, value caps, launches and reset, running with
and without TRITON_INTERPRET, leaving Triton as it was found, and trace_all."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _ti
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.jit import JITFunction

import triton_trace
from triton_trace import TraceUsageError, trace
from triton_trace.record.session import trace_all
from helpers.paths import TESTS
import kernels as K


@triton_trace.trace
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def test_the_issue_example(tmp_path):
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(1000, 128),)](x, y, out, 1000, BLOCK=128)
    torch.testing.assert_close(out, x + y)
    tr = triton_trace.current_trace()
    tr.save(tmp_path / "add.ttrace")
    same = triton_trace.load(tmp_path / "add.ttrace")
    launch = same.launches[0]
    assert (launch.kernel_name, launch.grid, [t.name for t in launch.tensors]) == \
        ("add_kernel", (8, 1, 1), ["x_ptr", "y_ptr", "out_ptr"])
    acc = launch.accesses(program=(1, 0, 0))
    assert [(a.kind, a.tensor) for a in acc] == [("load", "x_ptr"), ("load", "y_ptr"), ("store", "out_ptr")]
    offs = 128 + np.arange(128)
    for a in acc:
        np.testing.assert_array_equal(a.offsets, offs)
        assert a.mask.all() and a.values.shape == (128,) and a.line > 0
    np.testing.assert_array_equal(acc[0].values, x.numpy()[offs])


def add_inputs(n=1000):
    return torch.randn(n), torch.randn(n)


@pytest.mark.parametrize("programs,kept", [
    (3, [(3, 0, 0)]),
    (np.int64(2), [(2, 0, 0)]),
    ((5,), [(5, 0, 0)]),
    ([0, (7, 0, 0)], [(0, 0, 0), (7, 0, 0)]),
    (lambda pid: pid[0] % 4 == 1, [(1, 0, 0), (5, 0, 0)]),
])
def test_program_filter_records_chosen_programs_while_all_run(programs, kept):
    x, y = add_inputs()
    out = K.add(x, y, kernel=trace(programs=programs)(K.make_add()), block=128)
    torch.testing.assert_close(out, x + y)
    lc = triton_trace.current_trace().launches[0]
    assert [tuple(p) for p in lc.programs()] == kept
    assert lc.recorded_ids.tolist() == [list(p) for p in kept]
    assert lc.recorded_programs == len(kept) and lc.skipped_programs == 8 - len(kept)
    skipped = {tuple(p) for p in lc.skipped_ids()}
    assert skipped == {(i, 0, 0) for i in range(8)} - set(kept)
    assert f"+{8 - len(kept)} not recorded" in triton_trace.current_trace().summary()


def test_values_off_and_capped():
    x, y = add_inputs()
    K.add(x, y, kernel=trace(values=False)(K.make_add()), block=128)
    K.add(x, y, kernel=trace(values=300, batch=False)(K.make_add()), block=128)
    K.add(x, y, kernel=trace(values=300)(K.make_add()), block=128)
    off, capped, batched = triton_trace.current_trace().launches
    assert all(a.values is None for a in off.accesses()) and not off.values_truncated
    acc = capped.accesses()
    assert capped.values_truncated and "values truncated" in triton_trace.current_trace().summary()
    # rows are recorded in execution order: program 0's two loads fit in the cap, nothing after them
    order = np.argsort([a.index for a in acc])
    with_values = [acc[i].values is not None for i in order]
    assert with_values == [True, True] + [False] * (len(acc) - 2)
    # batched, values are kept op by op for the whole chunk: under the cap, none of them fit
    assert batched.values_truncated and all(a.values is None for a in batched.accesses())


def test_lambda_grid_and_launch_options_are_accepted():
    x, y = add_inputs(300)
    out = torch.empty_like(x)
    kernel = trace(K.make_add())
    kernel[lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n=300, BLOCK=64, num_warps=4)
    torch.testing.assert_close(out, x + y)
    lc = triton_trace.current_trace().launches[0]
    assert lc.grid == (5, 1, 1) and lc.args == {"n": 300, "BLOCK": 64}


def test_several_launches_reset_and_frozen_traces():
    kernel = trace(K.make_add())
    x, y = add_inputs(100)
    K.add(x, y, kernel=kernel, block=64)
    first = triton_trace.current_trace()
    K.add(x, y, kernel=kernel, block=32)
    K.softmax(torch.randn(3, 10), kernel=trace(K.make_softmax()))
    tr = triton_trace.current_trace()
    assert len(first) == 1 and len(tr) == 3
    assert [lc.grid[0] for lc in tr.launches[:2]] == [2, 4] and tr.kernels() == ["add_kernel", "softmax_kernel"]
    triton_trace.reset()
    assert len(triton_trace.current_trace()) == 0 and len(tr) == 3


def _launch_add(k, grid=(1,), *tensors):
    z = torch.zeros(4)
    args = tensors or (z, z, z)
    return k[grid](*args, 4, BLOCK=4)


@pytest.mark.parametrize("make,call,match", [
    (lambda: trace(programs="all"), None, r"trace\(programs=\.\.\.\)"),
    (lambda: trace(values=-1), None, r"trace\(values=\.\.\.\) takes True, False or a number"),
    (lambda: trace(on_oob="ignore"), None, r"trace\(on_oob=\.\.\.\) is 'skip' or 'raise'"),
    (lambda: trace(lambda x: x), None, r"goes above @triton.jit"),
    (lambda: trace(outputs="nope")(K.make_add()), lambda k: K.add(*add_inputs(10), kernel=k), r"outputs=.*'nope'"),
    (lambda: trace(K.make_add()), lambda k: _launch_add(k, (1,), torch.zeros(4), torch.zeros(4)),
     r"kernel 'add_kernel': .*pass every parameter"),
    (lambda: trace(K.make_add()), lambda k: _launch_add(k, (1, 2, 3, 4)), r"grid must have 1 to 3"),
    (lambda: trace(K.make_add()), lambda k: _launch_add(k, "x"), r"grid must be a tuple of 1 to 3 ints"),
    (lambda: trace(config=5)(K.make_autotuned()), lambda k: K.scale(torch.zeros(4), 1.0, kernel=k),
     r"trace\(config=5\): the kernel has 2 configs"),
])
def test_bad_usage_names_what_to_fix(make, call, match):
    with pytest.raises(TraceUsageError, match=match):
        k = make()
        call(k)


# ------------------------------------------------------------------------------------------------------
# leaving Triton as it was found
# ------------------------------------------------------------------------------------------------------
def _triton_state():
    objs = {"tl": tl, "tl.core": tl.core, "tl.math": tl.math, "tl.tensor": tl.tensor, "tl.dtype": tl.dtype,
            "tl.condition": getattr(tl.core, "condition", tl.tensor), "tdb": tl.core.tensor_descriptor_base,
            "interpreter": _ti, "JITFunction": JITFunction, "InterpretedFunction": _ti.InterpretedFunction,
            "Autotuner": Autotuner, "Heuristics": Heuristics, "builder": _ti.interpreter_builder,
            "Builder": type(_ti.interpreter_builder), "ReduceOps": _ti.ReduceOps, "ScanOps": _ti.ScanOps,
            "knobs.runtime": triton.knobs.runtime}
    state = {k: dict(vars(v)) for k, v in objs.items()}
    state["rewritten_fn"] = dict(_ti.InterpretedFunction.rewritten_fn)
    state["environ"] = dict(os.environ)
    state["interpret"] = triton.knobs.runtime.interpret
    return state


def _assert_same(before, after):
    assert before.keys() == after.keys()
    for key in before:
        a, b = before[key], after[key]
        if isinstance(a, dict):
            assert a.keys() == b.keys(), (key, set(a) ^ set(b))
            changed = [n for n in a if a[n] is not b[n] and a[n] != b[n]]
            assert not changed, (key, changed)
        else:
            assert a == b, key


def test_triton_is_left_exactly_as_found():
    before = _triton_state()
    assert before["interpreter"]["_interpreter"] is _ti._interpreter
    x, y = add_inputs(100)
    K.add(x, y, kernel=trace(K.make_add()))
    K.poly(x, kernel=trace(K.make_nested()))
    K.softmax(torch.randn(3, 10), kernel=trace(K.make_softmax()))
    K.scale(x, 2.0, kernel=trace(K.make_autotuned()))
    with trace_all():
        K.square(x)
    _assert_same(before, _triton_state())
    plain = K.make_add()
    assert type(plain) is JITFunction and "run" not in vars(plain)
    assert plain.run.__func__ is vars(JITFunction)["run"]


@triton.jit
def _fails_in_program_2(x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if pid == 2:
        x = x + tl.zeros([2 * BLOCK], dtype=tl.float32)
    tl.store(x_ptr + tl.arange(0, BLOCK), x)


def test_triton_is_left_as_found_after_a_failure():
    before = _triton_state()
    with pytest.raises(triton_trace.ProgramError):
        trace(_fails_in_program_2)[(4,)](torch.zeros(8), BLOCK=8)
    _assert_same(before, _triton_state())


def test_runs_under_triton_interpret(tmp_path):
    """With TRITON_INTERPRET=1 set before triton is imported, @triton.jit makes InterpretedFunctions."""
    script = tmp_path / "interp.py"
    script.write_text(f"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [{TESTS!r}, {os.path.dirname(TESTS)!r}]
import numpy as np, torch, triton
from triton.runtime.interpreter import InterpretedFunction
import triton_trace, kernels as K
from triton_trace.record.session import trace_all
k = K.make_add()
assert isinstance(k, InterpretedFunction), type(k)
x, y = torch.randn(300), torch.randn(300)
assert torch.equal(K.add(x, y, kernel=triton_trace.trace(k), block=64), x + y)
lc = triton_trace.current_trace().launches[0]
a = lc.accesses(program=4)[0]
assert (a.offsets == 256 + np.arange(64)).all() and (a.mask == (a.offsets < 300)).all()
out = K.scale(x, 2.0, kernel=triton_trace.trace(K.make_autotuned()))
assert torch.allclose(out, 2 * x) and triton_trace.current_trace().launches[1].config["kwargs"] == {{"BLOCK": 32}}
triton_trace.reset()
with trace_all(kernels="add_kernel"):
    assert torch.equal(K.add(x, y, block=64), x + y)
    s = torch.randn(3, 10)
    assert torch.allclose(K.softmax(s), torch.softmax(s, 1))     # runs in Triton's own interpreter
assert triton_trace.current_trace().kernels() == ["add_kernel"]
assert os.environ["TRITON_INTERPRET"] == "1" and triton.knobs.runtime.interpret
print("OK")
""")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().endswith("OK")


# ------------------------------------------------------------------------------------------------------
# trace_all
# ------------------------------------------------------------------------------------------------------
def test_trace_all_traces_undecorated_kernels():
    runs = {cls: vars(cls)["run"] for cls in (JITFunction, Autotuner, Heuristics)}
    x, y = add_inputs(200)
    with trace_all(programs=[1], values=False):
        torch.testing.assert_close(K.add(x, y, block=64), x + y)
        torch.testing.assert_close(K.scale(x, 3.0), 3 * x)
        torch.testing.assert_close(K.square(x, block=32), x * x)
    assert {cls: vars(cls)["run"] for cls in runs} == runs
    add, scale, square = triton_trace.current_trace().launches
    assert add.recorded_ids.tolist() == [[1, 0, 0]] and add.skipped_programs == 3
    assert all(a.values is None for a in add.accesses())
    assert scale.config["kwargs"] == {"BLOCK": 32} and square.config["heuristics"] == {"EVEN": False}


def test_trace_all_filters_by_kernel_name(monkeypatch):
    x, y = add_inputs(100)
    with trace_all(kernels=["softmax_kernel"]):
        # not traced; CPU tensors cannot run a compiled kernel, so it runs through the interpreter unrecorded
        torch.testing.assert_close(K.add(x, y), x + y)
        s = torch.randn(3, 10)
        torch.testing.assert_close(K.softmax(s), torch.softmax(s, 1))
    assert triton_trace.current_trace().kernels() == ["softmax_kernel"]


def test_trace_all_leaves_unselected_gpu_launches_to_triton(monkeypatch):
    from triton_trace.record import session
    calls = []
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, grid, warmup=False, **kw: calls.append(self.fn.__name__))
    monkeypatch.setattr(session, "_on_gpu", lambda args, kwargs: True)     # as if the tensors were on a GPU
    x, y = add_inputs(100)
    with trace_all(kernels=["softmax_kernel"]):
        K.add(x, y)                          # not traced: goes to the class's own run
    assert calls == ["add_kernel"]
    assert triton_trace.current_trace().kernels() == []


def test_decorated_kernel_keeps_its_options_inside_trace_all():
    x, y = add_inputs(200)
    with trace_all():
        K.add(x, y, kernel=trace(programs=[0])(K.make_add()), block=64)
        K.add(x, y, block=64)
    own, other = triton_trace.current_trace().launches
    assert own.recorded_programs == 1 and other.recorded_programs == 4
