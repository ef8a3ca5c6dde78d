"""How many programs of a compiled kernel fit on one SM at once, from its warps, registers and shared memory.

Per-SM limits by compute capability, from the CUDA C++ Programming Guide's table "Technical Specifications
per Compute Capability": resident warps and blocks, the 64K-register file allocated per warp in units of 256
registers, shared memory per SM and per block, and the 1 KB of shared memory the system reserves per block
(compute capability 8.0 and later).
"""
from __future__ import annotations

# arch -> (max warps per SM, max blocks per SM, shared bytes per SM, max shared bytes per block)
LIMITS = {
    80: (64, 32, 164 << 10, 163 << 10),
    86: (48, 16, 100 << 10, 99 << 10),
    87: (48, 16, 164 << 10, 163 << 10),
    89: (48, 24, 100 << 10, 99 << 10),
    90: (64, 32, 228 << 10, 227 << 10),
    100: (64, 32, 228 << 10, 227 << 10),
    120: (48, 32, 100 << 10, 99 << 10),
}
REGISTERS = 65536
REG_UNIT = 256          # registers are allocated per warp in multiples of this
RESERVED_SHARED = 1024  # per block, by the system


def occupancy(arch: int, num_warps: int, registers, shared_bytes: int) -> dict:
    """{"programs_per_sm", "warps_per_sm", "occupancy" (of the SM's warp slots), "limited_by"}; registers
    may be None (unknown: not a limit)."""
    if arch not in LIMITS:
        return {}
    max_warps, max_blocks, smem_sm, smem_block = LIMITS[arch]
    if shared_bytes > smem_block:
        return {"programs_per_sm": 0, "warps_per_sm": 0, "occupancy": 0.0,
                "limited_by": f"shared memory: {shared_bytes} bytes per program, more than the {smem_block} "
                              f"an sm_{arch} block may use"}
    bounds = {"warps": max_warps // max(num_warps, 1), "blocks": max_blocks,
              "shared memory": smem_sm // (shared_bytes + RESERVED_SHARED)}
    if registers:
        per_warp = -(-registers * 32 // REG_UNIT) * REG_UNIT
        bounds["registers"] = (REGISTERS // per_warp) // max(num_warps, 1)
    limit = min(bounds, key=lambda k: bounds[k])
    n = bounds[limit]
    return {"programs_per_sm": n, "warps_per_sm": n * num_warps, "occupancy": round(n * num_warps / max_warps, 4),
            "limited_by": limit}
