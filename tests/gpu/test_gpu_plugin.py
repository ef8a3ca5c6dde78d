"""pytest --triton-trace on tests that launch kernels on CUDA tensors: traced on CPU copies, the results
written back, findings fail the test. Skipped without CUDA (CI has none).

Run on the GPU machine with: python -m pytest -q tests/gpu
"""
import os
import re
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SUITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_suite_gpu")


def test_cuda_kernels_are_traced_and_checked():
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "triton_trace.pytest_plugin",
                        f"--rootdir={SUITE}", f"--confcutdir={SUITE}", "-rA", "--triton-trace", SUITE],
                       capture_output=True, text=True, timeout=600)
    got = {m.group(2).split("::")[-1]: m.group(1) for m in re.finditer(r"^(PASSED|FAILED) (\S+)", r.stdout, re.M)}
    assert got == {"test_cuda_unmasked_bug": "FAILED", "test_cuda_masked_clean": "PASSED"}, r.stdout[-3000:]
    assert "out_of_bounds" in r.stdout and "2 test(s) launched 2 traced kernel launch(es)" in r.stdout
