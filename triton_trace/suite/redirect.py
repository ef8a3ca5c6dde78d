"""``cuda_on_cpu``: a test suite written for the GPU runs on the CPU, unchanged, inside one block.

What it installs, all put back in ``finally`` in reverse order:

- torch: the factory mode and ``torch.Generator`` of tensors.py (CUDA tensors are CPU tensors that say
  ``cuda:0``), ``torch.cuda`` answering as the GPU (cudaapi.py), ``torch.autocast("cuda")`` casting on the
  CPU, and torch's ``overwrite_module_params_on_conversion`` so ``model.cuda()`` makes CUDA parameters;
- Triton: the redirect's driver as ``triton.runtime.driver.active`` (driver.py, through
  record/interp/activedriver.py), ``triton.testing.do_bench`` answering a predicted time (bench.py), and
  a kernel whose source a test replaced (``_unsafe_update_src``) running the new source (kernelsource.py), and
  every kernel launch routed through the interpreter: traced into ``current_trace()`` (``trace=True``, with
  ``trace_all``) or run untraced (``trace=False``: what ``pytest --tt-cuda`` installs for the whole session,
  each test then tracing its own launches);
- ``poison_empty``: ``torch.empty`` and its kin filled with poison (record/memory/poison.py);
- torch.compile: Inductor generating CUDA Triton kernels for the GPU, run through the interpreter and
  traced under Inductor's kernel names (inductor.py; inference only).

The GPU is a key of the analysis's table (analysis/gpus.py); its SM count, memory, L2 and architecture
are what torch and Triton report, and the predicted times are computed for it.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import torch
import triton.testing

from ..analysis.gpus import GPU, GPUS
from ..errors import TraceUsageError
from ..record.interp.activedriver import driver_active
from ..record.patching import Scope
from ..record.memory.poison import poisoning
from ..record.session import trace_all
from . import bench, cudaapi, inductor, kernelsource, tensors
from .driver import SuiteDriver

DEFAULT_GPU = "H200"


@dataclass(frozen=True)
class Redirect:
    """What ``cuda_on_cpu`` yields: the GPU it answers as."""
    key: str
    gpu: GPU
    driver: SuiteDriver
    poison_empty: bool = False

    def describe(self) -> str:
        g = self.gpu
        return (f"answering as {g.device_name} ({self.key}: sm_{g.arch}, {g.sms} SMs, {g.total_memory >> 30} GiB)"
                + ("; torch.empty poisoned" if self.poison_empty else ""))


def resolve_gpu(name: str) -> str:
    """The table's key for ``name`` (any case), or a TraceUsageError listing the keys."""
    for key in GPUS:
        if key.lower() == str(name).lower():
            return key
    raise TraceUsageError(f"unknown GPU {name!r} for the CUDA redirect; choose one of {', '.join(sorted(GPUS))} "
                          f"(triton_trace/analysis/gpus.py)")


def _future_params(scope: Scope) -> None:
    """``module.cuda()`` assigns each converted tensor to ``param.data``, which keeps the parameter a plain
    CPU tensor; torch's own switch makes it a new (CUDA) parameter instead."""
    future = torch.__future__
    before = future.get_overwrite_module_params_on_conversion()
    future.set_overwrite_module_params_on_conversion(True)
    scope.on_restore(lambda: future.set_overwrite_module_params_on_conversion(before))


@contextmanager
def cuda_on_cpu(gpu: str = DEFAULT_GPU, *, trace: bool = True, poison_empty: bool = False):
    """Run CUDA code on the CPU inside the block, answering as ``gpu`` (H200, H100, H100-PCIe, A100).

    ``trace``: every Triton launch is traced into ``triton_trace.current_trace()`` (else it runs through the
    interpreter untraced). ``poison_empty``: memory from ``torch.empty`` & co. is filled with poison and a
    kernel reading it before writing gets an ``uninitialized_read`` finding. Yields a ``Redirect``.
    """
    key = resolve_gpu(gpu)
    g = GPUS[key]
    driver = SuiteDriver(key, g)
    scope, stack = Scope(), ExitStack()
    try:
        inductor.install(scope, stack)        # first: importing dynamo reads torch.cuda's own functions
        cudaapi.install(scope, cudaapi.CudaAPI(g))
        scope.set_attr(torch, "Generator", tensors.Generator)
        scope.set_attr(torch, "set_default_device", tensors.set_default_device(torch.set_default_device))
        scope.set_attr(torch, "get_default_device", tensors.get_default_device(torch.get_default_device))
        scope.on_restore(lambda: tensors.DEFAULT_CUDA.__setitem__(0, False))
        _future_params(scope)
        scope.set_attr(triton.testing, "do_bench", bench.do_bench)
        scope.set_attr(triton.testing, "do_bench_cudagraph", bench.do_bench_cudagraph)
        kernelsource.install(scope)
        stack.enter_context(driver_active(driver))
        stack.enter_context(tensors.CudaFactories())
        stack.enter_context(poisoning(poison_empty))
        stack.enter_context(trace_all(poison_empty=False) if trace else trace_all(kernels=()))
        yield Redirect(key, g, driver, poison_empty)
    finally:
        try:
            stack.close()
        finally:
            scope.restore()
