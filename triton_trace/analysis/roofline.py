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

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .context import DOT, MATH, LaunchContext

T = 1e12


@dataclass(frozen=True)
class GPU:
    name: str
    sms: int
    l2_bytes: int
    dram_bytes_per_s: float
    fp32: float          # non-tensor FP32 FLOP/s
    fp64: float          # FP64 tensor-core FLOP/s
    tf32: float          # tensor-core FLOP/s by input type, dense
    fp16: float
    fp8: float
    programs_per_sm: int = 2     # default occupancy for programs_in_flight (a guess: make it a parameter)

    @property
    def default_programs_in_flight(self) -> int:
        return self.sms * self.programs_per_sm


GPUS = {
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP32 19.5 TF, FP64 tensor 19.5 TF, TF32 156 TF,
    # FP16/BF16 312 TF, HBM2e 2,039 GB/s; the A100 whitepaper: 108 SMs, 40 MB L2. No FP8 (FP16 rate).
    "A100": GPU("A100-SXM4-80GB", 108, 40 << 20, 2.039e12, 19.5 * T, 19.5 * T, 156 * T, 312 * T, 312 * T),
    # NVIDIA H100 datasheet (SXM5): FP32 67 TF, FP64 tensor 67 TF, TF32 989 / FP16 1,979 / FP8 3,958 TF
    # with sparsity (half dense), HBM3 3.35 TB/s; Hopper whitepaper: 132 SMs, 50 MB L2.
    "H100": GPU("H100-SXM5-80GB", 132, 50 << 20, 3.35e12, 67 * T, 67 * T, 494.5 * T, 989.5 * T, 1979 * T),
    # NVIDIA H100 datasheet (PCIe): FP32 51 TF, FP64 tensor 51 TF, TF32 756 / FP16 1,513 / FP8 3,026 TF
    # sparse, 2.0 TB/s; 114 SMs, 50 MB L2.
    "H100-PCIe": GPU("H100-PCIe-80GB", 114, 50 << 20, 2.0e12, 51 * T, 51 * T, 378 * T, 756.5 * T, 1513 * T),
    # NVIDIA H200 datasheet (SXM): the H100 SXM's compute with HBM3e at 4.8 TB/s. NVIDIA lists no L2 size;
    # the lent H200 reports 62,914,560 bytes (torch.cuda.get_device_properties().L2_cache_size, 60 MiB).
    "H200": GPU("H200-SXM-141GB", 132, 62914560, 4.8e12, 67 * T, 67 * T, 494.5 * T, 989.5 * T, 1979 * T),
}

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
