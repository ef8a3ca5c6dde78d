"""A library's conftest, as GPU suites write them: it asks the device at import time (before any test
runs), which works only if the CUDA redirect is installed before conftest files are imported."""
import pytest
import torch
import triton

CAPABILITY = torch.cuda.get_device_capability()          # read at import, as FlagGems' conftest does
DEVICE = triton.runtime.driver.active.get_active_torch_device()
SMS = torch.cuda.get_device_properties(0).multi_processor_count


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def _sync_in_teardown():
    yield
    torch.cuda.synchronize()
