"""The Triton driver the CUDA redirect makes active: Triton sees the chosen GPU of the analysis's table.

Code that asks Triton about the device (``get_current_target()`` for Hopper/Blackwell switches,
``utils.get_device_properties`` for an SM count or shared memory, ``get_active_torch_device()``,
autotune pruning by the target) gets that GPU's answers. Kernels never reach a launcher: the redirect
routes every launch through the interpreter first, so anything that would load or launch a binary
raises ``RequiresGPU``.
"""
from __future__ import annotations

import torch
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from ..analysis.gpus import GPU
from ..errors import RequiresGPU
from . import bench


class _Utils:
    """``driver.active.utils``: the device properties Triton's CUDA driver reads through libcuda."""

    def __init__(self, gpu: GPU):
        self.gpu = gpu

    def get_device_properties(self, device=0) -> dict:
        g = self.gpu
        return {"max_shared_mem": g.shared_mem_optin, "max_num_regs": 65536, "multiprocessor_count": g.sms,
                "warpSize": 32, "sm_clock_rate": g.sm_clock_khz, "mem_clock_rate": g.mem_clock_khz,
                "mem_bus_width": g.mem_bus_bits}

    def load_binary(self, *args, **kwargs):
        raise RequiresGPU("loading a compiled Triton kernel (driver.utils.load_binary)")


class _NoLauncher:
    def __init__(self, *args, **kwargs):
        raise RequiresGPU("launching a compiled Triton kernel (its launcher)")


class SuiteDriver(DriverBase):
    """``triton.runtime.driver.active`` under the redirect, for one GPU of the table."""

    def __init__(self, key: str, gpu: GPU):
        super().__init__()
        self.key, self.gpu = key, gpu
        self.utils = _Utils(gpu)
        self.launcher_cls = _NoLauncher

    @classmethod
    def is_active(cls) -> bool:
        return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp      # the CUDA backend's own table
        return ty_to_cpp(ty)

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", self.gpu.arch, 32)

    def get_active_torch_device(self):
        return torch.device("cuda", 0)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device) -> None:
        torch.cuda.set_device(device)

    def get_current_stream(self, device=None) -> int:
        return torch.cuda.current_stream().cuda_stream

    def get_device_capability(self, device=None) -> tuple:
        return divmod(self.gpu.arch, 10)

    def get_device_interface(self):
        return torch.cuda

    def get_benchmarker(self):
        return bench.do_bench

    def get_empty_cache_for_benchmark(self):
        # do_bench flushes the L2 with a 256 MB buffer between runs; the prediction starts from a cold
        # L2 anyway (the analysis's cache simulation), so a token buffer does
        return torch.empty(1, dtype=torch.int, device="cuda")

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def allocate_default_profile_scratch(self, size: int, alignment: int, stream):
        return torch.zeros(size, dtype=torch.int8, device="cuda")

    def __repr__(self) -> str:
        return f"<triton_trace SuiteDriver: {self.gpu.device_name} (sm_{self.gpu.arch}) on the CPU>"
