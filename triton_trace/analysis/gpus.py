"""The GPUs the analysis models: SM count, L2 size, DRAM bandwidth and peak rates, with their sources.

Their own module, below the analyses that use them (the cache simulation's L2, the context's defaults,
the roofline, the web view's GPU list), so none of those import each other to reach the table."""
from __future__ import annotations

from dataclasses import dataclass

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
    arch: int = 90               # CUDA compute capability: the target its layouts are compiled for
    # What the device reports (torch.cuda.get_device_properties, Triton's driver utils), for suites run
    # against this GPU on the CPU (triton_trace.suite): the H100 SXM's, read on a lent H100, by default.
    device_name: str = "NVIDIA H100 80GB HBM3"
    total_memory: int = 85017493504
    shared_mem_optin: int = 232448       # bytes per block, opt-in (Triton's max_shared_mem)
    shared_mem_per_sm: int = 233472
    sm_clock_khz: int = 1980000
    mem_bus_bits: int = 5120

    @property
    def mem_clock_khz(self) -> int:
        """The memory clock that gives this GPU's DRAM bandwidth on its bus, as Triton computes it back
        (triton.testing.get_dram_gbps: clock x bus width x 2 / 8)."""
        return round(self.dram_bytes_per_s * 8 / (2 * self.mem_bus_bits) / 1e3)

    @property
    def default_programs_in_flight(self) -> int:
        return self.sms * self.programs_per_sm


GPUS = {
    # NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP32 19.5 TF, FP64 tensor 19.5 TF, TF32 156 TF,
    # FP16/BF16 312 TF, HBM2e 2,039 GB/s; the A100 whitepaper: 108 SMs, 40 MB L2. No FP8 (FP16 rate).
    # (device: the A100 datasheet's 80 GB, 164 KB shared memory per SM of which 163 KB per block,
    # 1410 MHz boost clock, a 5120-bit HBM2e bus)
    "A100": GPU("A100-SXM4-80GB", 108, 40 << 20, 2.039e12, 19.5 * T, 19.5 * T, 156 * T, 312 * T, 312 * T,
                arch=80, device_name="NVIDIA A100-SXM4-80GB", total_memory=80 << 30, shared_mem_optin=166912,
                shared_mem_per_sm=167936, sm_clock_khz=1410000),
    # NVIDIA H100 datasheet (SXM5): FP32 67 TF, FP64 tensor 67 TF, TF32 989 / FP16 1,979 / FP8 3,958 TF
    # with sparsity (half dense), HBM3 3.35 TB/s; Hopper whitepaper: 132 SMs, 50 MB L2.
    "H100": GPU("H100-SXM5-80GB", 132, 50 << 20, 3.35e12, 67 * T, 67 * T, 494.5 * T, 989.5 * T, 1979 * T),
    # NVIDIA H100 datasheet (PCIe): FP32 51 TF, FP64 tensor 51 TF, TF32 756 / FP16 1,513 / FP8 3,026 TF
    # sparse, 2.0 TB/s; 114 SMs, 50 MB L2.
    "H100-PCIe": GPU("H100-PCIe-80GB", 114, 50 << 20, 2.0e12, 51 * T, 51 * T, 378 * T, 756.5 * T, 1513 * T,
                     device_name="NVIDIA H100 PCIe", sm_clock_khz=1755000),
    # NVIDIA H200 datasheet (SXM): the H100 SXM's compute with HBM3e at 4.8 TB/s. NVIDIA lists no L2 size;
    # the lent H200 reports 62,914,560 bytes (torch.cuda.get_device_properties().L2_cache_size, 60 MiB).
    # Its device: nvidia-smi on a lent H200 shows 'NVIDIA H200' with 143771 MiB on a 6144-bit HBM3e bus.
    "H200": GPU("H200-SXM-141GB", 132, 62914560, 4.8e12, 67 * T, 67 * T, 494.5 * T, 989.5 * T, 1979 * T,
                device_name="NVIDIA H200", total_memory=143771 << 20, mem_bus_bits=6144),
}
