"""A GPU suite's conftest, with what suites bring that a CPU cannot run (tests/suite/test_cuda_suite_bad.py runs
this folder under --tt-cuda, in a child process)."""
import pytest
import torch

from kernels import warp_swap


@pytest.fixture
def device():
    return torch.device("cuda")


@pytest.fixture
def swapped_table(device):
    """A fixture that launches a kernel with inline assembly: the test is skipped in its setup."""
    return warp_swap(torch.arange(8, dtype=torch.float32, device=device))
