"""The Triton release the tests run under, and what it cannot run."""
from __future__ import annotations

import pytest
import triton

TRITON_39 = tuple(int(v) for v in triton.__version__.split(".")[:2]) >= (3, 9)


def runnable(case):
    """Skip a case of tests/kernels/broken.py that this release cannot run (3.9 removed block pointers)."""
    if TRITON_39 and "block_pointer" in case.name:
        pytest.skip("Triton 3.9's interpreter removed block pointers")
