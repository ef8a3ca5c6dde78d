"""Launch by launch (benchmarks/fidelity/launches.py): Triton's language tests, each launch on the GPU and
traced, compared bit for bit.

Without CUDA the GPU run is skipped, saying so; the comparison itself is checked on the CPU: the ulp
classes against numpy's own neighbours of a float, the snapshots' aliasing, and the whole pipeline with
Triton's interpreter standing in for the GPU on a few of its tests (atomics, whose inputs the trace must
not see updated by the reference run, and reinterpreted uint32 tensors).
"""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIDELITY = os.path.join(ROOT, "benchmarks", "fidelity")
sys.path.insert(0, FIDELITY)

import bitcompare as bc  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_numpys_neighbours(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 4, 2000)).astype(dtype)
    up = np.nextafter(x, np.asarray(np.inf, dtype))
    up3 = np.nextafter(np.nextafter(up, np.asarray(np.inf, dtype)), np.asarray(np.inf, dtype))
    assert (bc.ulp_distance(_bits(x), _bits(up)) == 1).all()
    assert (bc.ulp_distance(_bits(up3), _bits(x)) == 3).all()
    # the key orders bit patterns as the values they encode
    keys = bc.ordered(_bits(x))
    assert (x[np.argsort(keys, kind="stable")] == np.sort(x)).all()


def test_classes_of_a_float32_output():
    ref = np.array([1.0, -0.0, np.nan, 3.0, 5.0], np.float32)
    trace = ref.copy()
    trace[0] = np.nextafter(np.float32(1.0), np.float32(2.0))
    trace[1] = 0.0                                               # -0.0 and +0.0: adjacent
    trace[2] = -np.float32(np.nan)                               # NaN with its sign flipped
    d = bc.compare_bits("z", "float32", _bits(ref), _bits(trace), ref, trace)
    assert (d.status, d.differing, d.beyond, d.max_ulp) == ("1ulp", 3, 0, 1)
    trace[4] = np.float32(5.0000005)                             # 1 ulp at 5.0 is 4.8e-7: this is 1
    trace[3] = np.float32(3.0000005)                             # 2 ulp at 3.0 (ulp 2.4e-7)
    d = bc.compare_bits("z", "float32", _bits(ref), _bits(trace), ref, trace)
    assert (d.status, d.beyond, d.max_ulp) == ("beyond", 1, 2)
    assert d.examples[0]["index"] == [3] and d.examples[0]["ulp"] == 2
    only_nan = ref.copy()
    only_nan[2] = -np.float32(np.nan)
    assert bc.compare_bits("z", "float32", _bits(ref), _bits(only_nan)).status == "nan_bits"
    assert bc.compare_bits("z", "float32", _bits(ref), _bits(ref.copy())).status == "exact"


def test_integers_are_exact_or_beyond():
    a = np.arange(10, dtype=np.int32)
    b = a.copy()
    b[4] += 1
    d = bc.compare_bits("i", "int32", a.view(np.uint32), b.view(np.uint32))
    assert (d.status, d.differing, d.beyond) == ("beyond", 1, 1)


def test_fp8_nans_follow_their_format():
    e4 = np.array([0x7F, 0xFF, 0x7E], np.uint8)                 # e4m3fn: 0x7f/0xff are NaN, 0x7e = 448
    assert bc.nan_mask(e4, "float8_e4m3fn").tolist() == [True, True, False]
    e5 = np.array([0x7C, 0x7D, 0xFE], np.uint8)                 # e5m2: 0x7c = Inf, 0x7d and 0xfe NaN
    assert bc.nan_mask(e5, "float8_e5m2").tolist() == [False, True, True]


def test_snapshot_keeps_aliasing_and_leaves_the_originals_alone():
    base = torch.arange(12, dtype=torch.float32)
    x, y = base[2:10].view(2, 4), base[::3]
    snap = bc.snapshot({"x": x, "y": y, "n": 5, "pair": (x, y)})
    assert snap["n"] == 5 and snap["x"].stride() == x.stride() and snap["x"].storage_offset() == 2
    snap["x"][0, 1] = -1.0                                      # base[3]: also y[1] in the copy
    assert snap["y"][1].item() == -1.0 and snap["pair"][1][1].item() == -1.0
    assert base[3].item() == 3.0                                # the test's tensor is untouched
    assert sorted(bc.flatten(snap)) == ["n", "pair[0]", "pair[1]", "x", "y"]


def _launches(out, *args, timeout=900):
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, os.path.join(FIDELITY, "launches.py"), "--out", str(out), *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else None
    return r, summary


def test_help_runs_anywhere():
    r = subprocess.run([sys.executable, os.path.join(FIDELITY, "launches.py"), "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "--reference" in r.stdout


def test_pipeline_against_the_interpreter(tmp_path):
    """Atomics and reinterpreted uint32 tensors, with the plain interpreter as the reference: if the trace
    saw the reference's updates (no isolating snapshot) an atomic add would land twice and differ; if a
    TensorWrapper were not unwrapped its output would not be compared at all."""
    r, s = _launches(tmp_path, "--reference", "interpreter", "--workers", "1", "--files", "language/test_core.py",
                     "-k", "test_atomic_rmw and add and (int32 or uint32) and all_pos and None")
    assert s is not None, r.stdout + r.stderr
    assert "failed" not in s["pytest_tail"], s["pytest_tail"]
    assert s["launches"] >= 2 and s["by_status"]["exact"] == s["launches"], s["classes"]
    with gzip.open(tmp_path / "launches.jsonl.gz", "rt") as f:
        recs = [json.loads(line) for line in f]
    dtypes = {o["dtype"] for rec in recs for o in rec["outputs"]}
    assert {"int32", "uint32"} <= dtypes, dtypes


@needs_gpu
def test_integer_launches_are_bit_exact_on_the_gpu(tmp_path):
    """Integer arithmetic has one answer: every launch of these tests must match the GPU bit for bit."""
    r, s = _launches(tmp_path, "--workers", "4", "--files", "language/test_core.py",
                     "-k", "(test_bin_op and int32-int32) or (test_atomic_rmw and int32) or test_shift_op")
    assert s is not None, r.stdout + r.stderr
    assert s["launches"] > 20 and s["by_status"]["exact"] == s["launches"], s["classes"]


def test_a_kernel_patched_like_triton_tests_is_traced_as_patched():
    """Triton's tests build kernels with JITFunction._unsafe_update_src (on a GPU; under the interpreter they
    exec the source instead). The GPU compiles .src; the trace must run .src too, not the template's .fn."""
    import triton
    import triton.language as tl
    import triton_trace
    from launch_plugin import as_written

    @triton.jit
    def template(X, Z, N: tl.constexpr):
        offs = tl.arange(0, N)
        x = tl.load(X + offs)
        z = GENERATE_TEST_HERE  # noqa: F821 (replaced before launch, as test_core's patch_kernel does)
        tl.store(Z + offs, z)

    kernel = triton.JITFunction(template.fn)
    kernel._unsafe_update_src(kernel.src.replace("GENERATE_TEST_HERE", "x * 3 - 1"))
    x = torch.arange(16, dtype=torch.float32)
    z = torch.zeros(16)
    with pytest.raises(Exception, match="GENERATE_TEST_HERE"):
        triton_trace.trace(kernel)[(1,)](x, z, N=16)
    rebuilt = as_written(kernel)
    assert rebuilt is not kernel and as_written(rebuilt) is rebuilt
    triton_trace.trace(rebuilt)[(1,)](x, z, N=16)
    assert torch.equal(z, x * 3 - 1)
    plain = triton.JITFunction(template.fn)
    assert as_written(plain) is plain                     # an unpatched kernel is traced as it is


def test_every_mismatch_class_of_the_committed_gpu_run_is_explained():
    """benchmarks/fidelity/launches_h100/summary.json is the GPU run RESULTS_launches.md describes: every op
    class with a launch that is not bit-exact must be named in its explanations."""
    results = os.path.join(FIDELITY, "launches_h100", "summary.json")
    summary = json.load(open(results))
    text = open(os.path.join(FIDELITY, "RESULTS_launches.md")).read()
    explained = text[text.index("### Every mismatch class"):]
    families = {row["family"] for row in summary["rows"]
                if any(row[k] for k in ("nan_bits", "1ulp", "beyond", "trace_error"))}
    missing = sorted(f for f in families if f not in explained)
    assert not missing, missing
    total = sum(summary["by_status"].values())
    assert total == summary["launches"] and f"{summary['by_status']['exact']:,}" in text
