"""``triton-trace pytest [--gpu GPU] [pytest arguments...]``: run a test suite written for the GPU on the CPU.

The same as ``pytest --tt-cuda=GPU ...`` (triton_trace/pytest_plugin.py holds all the logic): every test
traced and checked, CUDA answered by the CPU as GPU (H200 by default). pytest's own arguments pass through
untouched; ``--gpu`` is read only before them, since a suite's conftest may define a ``--gpu`` of its own.
"""
from __future__ import annotations

import os
import sys

from .redirect import DEFAULT_GPU

USAGE = f"""usage: triton-trace pytest [--gpu GPU] [pytest arguments...]

Run a pytest suite written for the GPU on this machine's CPU: CUDA tensors, torch.cuda and Triton's driver
answer as GPU (H200, H100, H100-PCIe, A100; default {DEFAULT_GPU}), every Triton kernel runs through the
interpreter, traced, and a test whose kernels have findings fails with them. The same as
pytest --tt-cuda=GPU; see pytest --help for the other --tt-* and --triton-trace-* options."""


def _split(argv: list) -> tuple:
    """(gpu, pytest's arguments): ``--gpu X`` / ``--gpu=X`` only before the first other argument."""
    gpu, rest = DEFAULT_GPU, list(argv)
    while rest:
        if rest[0] == "--gpu" and len(rest) > 1:
            gpu, rest = rest[1], rest[2:]
        elif rest[0].startswith("--gpu="):
            gpu, rest = rest[0].split("=", 1)[1], rest[1:]
        else:
            break
    return gpu, rest


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    gpu, args = _split(argv)
    if not any(a == "--tt-cuda" or a.startswith("--tt-cuda=") for a in args):
        args.insert(0, f"--tt-cuda={gpu}")
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):      # the plugin's entry point is not loaded then
        args[:0] = ["-p", "triton_trace.pytest_plugin"]
    import pytest
    return int(pytest.main(args))
