"""``@trace(poison_empty=True)`` (record/memory/poison.py): tensors from ``torch.empty`` and its kin are
poisoned from the decoration on, so a kernel reading one before writing it gets an ``uninitialized_read``
finding with no ``outputs=`` declared; without the option nothing is poisoned and nothing is found. The
switch lasts for the rest of the process, so each case runs in a child process of its own."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import triton_trace
from triton_trace.errors import TraceUsageError

SCRIPT = r'''
import json, sys
import torch, triton, triton.language as tl
import triton_trace
from triton_trace.record.memory import poison

@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=m) + tl.load(x_ptr + offs, mask=m), mask=m)

def kinds(out):
    report = triton_trace.analyze(triton_trace.current_trace(), layouts="model", what_if=False)
    launch = triton_trace.current_trace().launches[-1]
    return {"kinds": sorted({f.kind for f in report.findings}), "poisoned": launch.meta.get("poisoned"),
            "messages": [f.message for f in report.findings], "still": poison.still_poisoned(out)}

before = torch.empty(100)                       # made before the decoration: never poisoned
on = sys.argv[1] == "on"
if sys.argv[2] == "inside":                     # decorated inside a block that pushed torch function modes
    from triton_trace.suite import cuda_on_cpu
    with cuda_on_cpu(poison_empty=False):
        kernel = triton_trace.trace(poison_empty=on)(accumulate_kernel)
else:
    kernel = triton_trace.trace(poison_empty=on)(accumulate_kernel)
result = {"stack": [type(m).__name__ for m in torch.overrides._get_current_function_mode_stack()]}
x = torch.ones(100)
out = torch.empty(100)
kernel[(2,)](x, out, 100, BLOCK=64)
result["empty"] = kinds(out)
triton_trace.reset()
zeros = torch.zeros(100)
kernel[(2,)](x, zeros, 100, BLOCK=64)
result["zeros"] = kinds(zeros)
triton_trace.reset()
kernel[(2,)](x, before, 100, BLOCK=64)
result["before"] = kinds(before)
result["kin"] = [poison.still_poisoned(t) for t in (torch.empty_like(x), x.new_empty(3),
                                                    torch.empty_strided((4, 4), (4, 1)))]
with triton_trace.trace_all(poison_empty=True):     # a block of its own stacks on it and leaves it
    torch.empty(2)
result["after_block"] = poison.still_poisoned(torch.empty(5))
result["stack_after"] = [type(m).__name__ for m in torch.overrides._get_current_function_mode_stack()]
print(json.dumps(result))
'''


def _run(tmp_path, option: str, where: str = "top") -> dict:
    script = tmp_path / "poison_script.py"            # a file: @triton.jit reads its kernel's source
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script), option, where], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("where", ["top", "inside"])
def test_poison_empty_on_reports_a_read_of_an_empty_buffer(tmp_path, where):
    got = _run(tmp_path, "on", where)
    assert got["empty"]["kinds"] == ["uninitialized_read"] and got["empty"]["poisoned"] == ["out_ptr"]
    assert "never-written torch.empty result 'out_ptr'" in got["empty"]["messages"][0]
    assert got["zeros"] == {"kinds": [], "poisoned": None, "messages": [], "still": False}
    assert "uninitialized_read" not in got["before"]["kinds"] and got["before"]["poisoned"] is None   # made before
    assert got["kin"] == [True, True, True]
    assert got["after_block"]
    # one mode, at the bottom of torch's stack: a block that was open at the decoration left it in place
    assert got["stack"] == got["stack_after"] == ["PoisonEmpty"]


def test_poison_empty_off_finds_nothing(tmp_path):
    got = _run(tmp_path, "off")
    # the buffer holds what the allocator left: no uninitialised read is found, whatever else garbage does
    assert "uninitialized_read" not in got["empty"]["kinds"] and got["empty"]["poisoned"] is None
    assert not got["empty"]["still"]
    assert got["kin"] == [False, False, False] and not got["after_block"]
    assert got["stack"] == got["stack_after"] == []


def test_poison_empty_takes_a_bool():
    with pytest.raises(TraceUsageError, match="poison_empty"):
        triton_trace.trace(poison_empty="yes")
    with pytest.raises(TraceUsageError, match="poison_empty"):
        with triton_trace.trace_all(poison_empty=1):
            pass
