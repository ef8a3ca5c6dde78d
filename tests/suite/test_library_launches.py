"""Launch by launch through a library's own suite (benchmarks/fidelity/library_launches.py), on a tiny library
of our own in FlagGems' style (tests/fixtures/library_like: a LibEntry-like caching wrapper, an autotuned
reduction, a strided view class passed as kernel arguments), with Triton's interpreter under the CUDA
redirect standing in for the GPU. The counts are the tests' own: every launch the library makes, relaunches
of a kept kernel included, each compared once, all bit-exact against the interpreter."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch
import triton
import triton.language as tl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIDELITY = os.path.join(ROOT, "benchmarks", "fidelity")
LIBRARY = os.path.join(ROOT, "tests", "fixtures", "library_like")
sys.path.insert(0, FIDELITY)

from launch_plugin import as_tensor, configs_chosen  # noqa: E402

# test_neg: 3 shapes x 2 dtypes, one launch each (the second and third of a dtype are the caching wrapper's
# own relaunches); test_row_sum: 2 shapes; test_scale: 2 sizes, its arguments the library's view class
EXPECTED_ROWS = {("test_neg", "float16"): 3, ("test_neg", "float32"): 3, ("test_row_sum", "float32"): 2,
                 ("test_scale", "float32"): 2}
EXPECTED_KERNELS = {("neg_kernel", "float16"): 3, ("neg_kernel", "float32"): 3, ("row_sum_kernel", "float32"): 2,
                    ("scale_kernel", "float32"): 2}


def _run(out, *args):
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, os.path.join(FIDELITY, "library_launches.py"), "--out", str(out),
                        "--reference", "interpreter", "--workers", "1", "--custom", LIBRARY, "check_ops.py", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    path = out / "library_like" / "summary.json"
    return r, (json.loads(path.read_text()) if path.exists() else None)


def test_every_launch_of_a_library_suite_is_compared(tmp_path):
    r, s = _run(tmp_path)
    assert r.returncode == 0 and s is not None, r.stdout + r.stderr
    assert "10 passed" in s["pytest_tail"], s["pytest_tail"]
    assert s["launches"] == 10 and s["tests_with_launches"] == 10 and s["tests_cut_by_deadline"] == 0
    assert s["by_status"]["exact"] == 10, s["classes"]
    rows = {(row["family"], row["dtypes"]): row["exact"] for row in s["rows"]}
    assert rows == EXPECTED_ROWS
    kernels = {(row["kernel"], row["dtypes"]): row["exact"] for row in s["by_kernel"]}
    assert kernels == EXPECTED_KERNELS
    table = (tmp_path / "table.md").read_text()
    assert "| neg_kernel | float16 | 3 | 3 | 0 | 0 | 0 | 0 |" in table


def test_the_budget_stops_new_tests(tmp_path):
    r, s = _run(tmp_path, "--budget", "0.001")
    assert s is not None, r.stdout + r.stderr
    assert s["launches"] == 0 and s["tests_cut_by_deadline"] == 10
    assert r.returncode == 1                # nothing compared is a failure of the run


def test_a_run_stopped_at_its_limit_keeps_what_it_compared(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("TRITON_INTERPRET", None)
    start = time.time()         # seed 0 runs test_a_launch first
    r = subprocess.run([sys.executable, os.path.join(FIDELITY, "library_launches.py"), "--out", str(tmp_path),
                        "--reference", "interpreter", "--workers", "1", "--seed", "0", "--limit", "40",
                        "--custom", LIBRARY, "check_slow.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert time.time() - start < 200                      # the hanging test did not hold the run for 600 s
    s = json.loads((tmp_path / "library_like" / "summary.json").read_text())
    assert s["launches"] == 1 and s["by_status"]["exact"] == 1, r.stdout + r.stderr
    assert "stopped at the 40 s limit" in (tmp_path / "library_like" / "pytest.log").read_text()


@triton.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _tuned(x_ptr, n, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0, mask=tl.arange(0, BLOCK) < n)


def test_the_trace_is_offered_only_the_config_the_reference_chose():
    configs = list(_tuned.configs)
    _tuned.best_config = configs[1]
    _tuned.cache[("key",)] = configs[0]
    with configs_chosen(_tuned):
        assert _tuned.configs == [configs[1]] and _tuned.cache == {}
    assert _tuned.configs == configs and _tuned.cache == {("key",): configs[0]}


class _View:
    """A library's view class: data_ptr, dtype, untyped_storage, shape and stride, no tensor."""

    def __init__(self, base, offset, shape, strides):
        self._base, self.dtype, self.shape, self._strides = base, base.dtype, shape, strides
        self._ptr = base.data_ptr() + offset * base.element_size()

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def untyped_storage(self):
        return self._base.untyped_storage()


def test_a_view_class_becomes_a_tensor_of_the_same_memory():
    base = torch.arange(24, dtype=torch.float32)
    t = as_tensor(_View(base, 2, (3, 4), (5, 1)))
    assert torch.is_tensor(t) and t.data_ptr() == base.data_ptr() + 8 and t.stride() == (5, 1)
    assert torch.equal(t, base[2:].as_strided((3, 4), (5, 1)))
    flipped = as_tensor(_View(base, 23, (24,), (-1,)))       # torch has no negative strides: the rest, flat
    assert flipped.data_ptr() == base.data_ptr() + 23 * 4 and flipped.shape == (1,)
    assert as_tensor(base) is base and as_tensor(3) == 3
    pair = as_tensor((_View(base, 0, (2,), (1,)), 7))
    assert torch.is_tensor(pair[0]) and pair[1] == 7


@pytest.mark.parametrize("script", ["library_launches.py", "launches.py"])
def test_help_runs_anywhere(script):
    r = subprocess.run([sys.executable, os.path.join(FIDELITY, script), "--help"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "--reference" in r.stdout and "--budget" in r.stdout
