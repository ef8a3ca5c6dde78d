"""Work and the roofline: FLOPs, arithmetic intensity, and a lower bound on each GPU's kernel time.

FLOPs count what ran: 2*M*N*K for every executed ``tl.dot`` (one "dot" row per call, loop trips
included; the recorder's M already folds a batch dim in) plus the elementwise floating-point math the
recorder counted per (program, line) in "math" rows (an FMA counts two). Reductions and scans are not
counted (their combine steps are, when they run as elementwise math).

Time lower bound = max(DRAM bytes / bandwidth, dot FLOPs / tensor-core peak + math FLOPs / FP32 peak).
The DRAM bytes are the cache simulation's. The tensor-core peak is chosen by the narrowest float dtype
among the launch's tensors: fp8 -> FP8, fp16/bf16 -> FP16, fp32 -> TF32 (Triton's default
``input_precision`` for fp32 dots), fp64 -> FP64. Peaks are dense (no 2:4 sparsity), at boost clock.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import DOT, MATH, LaunchContext
from ..gpus import GPUS  # noqa: F401  (re-exported: analysis.roofline.GPUS)

_PEAK_BY_DTYPE = (("float8", "fp8"), ("float16", "fp16"), ("bfloat16", "fp16"), ("float32", "tf32"),
                  ("float64", "fp64"))


def flops(ctx: LaunchContext) -> tuple:
    """(dot FLOPs, elementwise FLOPs) per row."""
    aux = ctx.launch.ops["aux"].astype(np.int64).reshape(-1, 3)
    dot = np.where(ctx.kind == DOT, 2 * aux[:, 0] * aux[:, 1] * aux[:, 2], 0)
    math = np.where(ctx.kind == MATH, aux[:, 0], 0)
    return dot, math


def dot_precision(ctx: LaunchContext) -> str:
    names = [t.dtype for t in ctx.launch.tensors]
    for prefix, peak in _PEAK_BY_DTYPE:
        if any(n.startswith(prefix) for n in names):
            return peak
    return "tf32"


def _ratio(a: float, b: float) -> Optional[float]:
    return float(a) / float(b) if b else None


def roofline(dot_flops: int, math_flops: int, dram_bytes: int, precision: str) -> dict:
    """Lower-bound time and the limiting resource on every GPU of the table."""
    out = {}
    for key in sorted(GPUS):
        g = GPUS[key]
        memory_s = dram_bytes / g.dram_bytes_per_s
        compute_s = dot_flops / getattr(g, precision) + math_flops / g.fp32
        peak_flops = getattr(g, precision) if dot_flops >= math_flops else g.fp32
        out[key] = {
            "name": g.name,
            "memory_s": memory_s,
            "compute_s": compute_s,
            "time_s": max(memory_s, compute_s),
            "bound": "compute" if compute_s > memory_s else "memory",
            "ridge_intensity": peak_flops / g.dram_bytes_per_s,   # FLOP/byte where the two meet
            "dot_peak": precision,
        }
    return out


def intensity(total_flops: int, dram_bytes: int) -> Optional[float]:
    return _ratio(total_flops, dram_bytes)
