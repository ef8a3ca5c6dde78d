"""Bring your own suite: run a test suite written for the GPU, unchanged, on the CPU (issue 40).

``cuda_on_cpu(gpu="H200")`` makes CUDA tensors CPU tensors that answer as ``cuda:0``, ``torch.cuda`` and
Triton's driver answer as one GPU of the analysis's table, and every Triton launch run through the
interpreter and traced; ``pytest --tt-cuda`` (triton_trace/pytest_plugin.py) and ``triton-trace pytest``
(command.py) install it for a whole test run. Modules by role: tensors (the CUDA tensors and factories),
cudaapi (``torch.cuda``), driver (Triton's driver), bench (``do_bench``'s predicted time), inductor
(torch.compile's Triton kernels through the tracer: on the redirect, or ``inductor_on_cpu`` for CPU
tensors), kernelsource (a kernel whose source a test replaced runs the new text), attention
(``F.scaled_dot_product_attention`` takes CUDA's backend, so a library's CUDA registration of it is reached),
redirect (the context manager that installs them all), command (the CLI subcommand).
"""
from __future__ import annotations

from .bench import PredictedTime
from .inductor import inductor_on_cpu
from .redirect import DEFAULT_GPU, Redirect, cuda_on_cpu, resolve_gpu
from .tensors import CudaTensor

__all__ = ["cuda_on_cpu", "Redirect", "resolve_gpu", "DEFAULT_GPU", "CudaTensor", "PredictedTime", "inductor_on_cpu"]
