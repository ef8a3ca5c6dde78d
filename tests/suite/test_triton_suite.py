"""A deterministic sample of Triton's own interpreter language tests (tests/triton_suite, release 3.6),
run plain and with every launch traced: no test may fail traced unless DIFFERENCES.md explains it, and
the traced tests must really have gone through the tracer. The whole suite runs on the GPU machine's 16
cores with tests/triton_suite/on_gpu_machine.sh (results in benchmarks/suites/triton_suite/)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.paths import TESTS

EVERY = int(os.environ.get("TT_SUITE_EVERY", "5"))


@pytest.mark.slow
def test_triton_suite_sample_traced_like_plain(tmp_path):
    workers = "2" if (os.cpu_count() or 1) >= 2 else "1"
    proc = subprocess.run([sys.executable, os.path.join(TESTS, "triton_suite", "run_suite.py"), "--every", str(EVERY),
                           "--workers", workers, "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=1800)
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert proc.returncode == 0, (tmp_path / "summary.md").read_text()
    assert summary["regressions"] == {}
    assert summary["plain"]["passed"] > 0.75 * (summary["collected"] - summary["plain"]["skipped"])
    assert summary["traced_tests_with_launches"] >= 0.95 * summary["traced_passed"] > 0
