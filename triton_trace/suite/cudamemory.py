"""``torch.cuda``'s memory functions while the CUDA redirect is on (installed by cudaapi.py over
``torch.cuda`` and ``torch.cuda.memory``), answering from the bytes of live CUDA tensors
(``tensors.ALLOCATIONS``). There is no caching allocator, so what is reserved is what is allocated, every
allocation is its own segment, and nothing is inactive or split; what only the caching allocator can
answer (its snapshots and history) raises ``RequiresGPU``.
"""
from __future__ import annotations

import os

from ..errors import RequiresGPU
from .tensors import ALLOCATIONS, check_index


def requires_gpu(what: str):
    """A stand-in for a CUDA function only a GPU can run: it raises RequiresGPU naming ``what``."""
    def refuse(*args, **kwargs):
        raise RequiresGPU(what)
    refuse.__name__ = what.rsplit(".", 1)[-1]
    return refuse


def _one(device=None) -> None:
    if device is not None:
        check_index(device)


_SMALL = 1 << 20         # the caching allocator's small pool holds blocks of up to 1 MiB
_COUNTED = ("allocated_bytes", "active_bytes", "reserved_bytes", "requested_bytes")
_COUNTS = ("allocation", "active", "segment")
_NONE = ("inactive_split", "inactive_split_bytes", "oversize_allocations", "oversize_segments")


def memory_stats() -> dict:
    """``torch.cuda.memory_stats()``, with every key the caching allocator's has. The pools split what is
    live now (a storage of up to 1 MiB is small); their peaks and totals are not tracked, and count only
    what is live."""
    a = ALLOCATIONS
    sizes = [n for n, _ in list(a.live.values())]
    small = [n for n in sizes if n <= _SMALL]
    pools = {"small_pool": (sum(small), len(small)), "large_pool": (a.current - sum(small), len(sizes) - len(small))}
    stats = {"num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0, "num_device_alloc": a.count,
             "num_device_free": a.count - len(sizes), "max_split_size": -1}
    for kind in _COUNTED + _COUNTS + _NONE:
        counted = kind in _COUNTED
        if kind in _NONE:
            every = (0, 0, 0, 0)
        elif counted:
            every = (a.current, a.peak, a.allocated, a.freed)
        else:                    # (the peak number of live allocations is not tracked: the live ones)
            every = (len(sizes), len(sizes), a.count, a.count - len(sizes))
        stats.update(zip((f"{kind}.all.{s}" for s in ("current", "peak", "allocated", "freed")), every))
        if kind.startswith("oversize"):
            continue
        for pool, (nbytes, count) in pools.items():
            now = 0 if kind in _NONE else nbytes if counted else count
            stats.update({f"{kind}.{pool}.current": now, f"{kind}.{pool}.peak": now,
                          f"{kind}.{pool}.allocated": now, f"{kind}.{pool}.freed": 0})
    return dict(sorted(stats.items()))


def _nested(stats: dict) -> dict:
    out: dict = {}
    for key, value in stats.items():
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _summary(props) -> str:
    a, mib = ALLOCATIONS, 1 << 20
    rows = [("Allocated memory", a.current, a.peak, a.allocated, a.freed),
            ("Requested memory", a.current, a.peak, a.allocated, a.freed),
            ("Reserved memory", a.current, a.peak, a.allocated, a.freed)]
    lines = [f"triton_trace: CUDA on the CPU, {props.name} (device 0); live CUDA tensors, no caching allocator",
             f"{'Metric':<20}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>14}{'Tot Freed':>14}"]
    lines += [f"{name:<20}" + "".join(f"{v / mib:>11.2f} MiB" for v in values) for name, *values in rows]
    lines.append(f"{'Allocations':<20}{len(a.live):>14}{'':>14}{a.count:>14}{a.count - len(a.live):>14}")
    return "\n".join(lines)


def memory_functions(props) -> dict:
    """``torch.cuda``'s memory functions (``torch.cuda.memory`` holds the same)."""
    a = ALLOCATIONS
    fraction = [1.0]

    def stats(device=None) -> dict:
        _one(device)
        return memory_stats()

    def reset_accumulated(device=None):
        a.allocated = a.freed = a.count = 0

    def set_fraction(value, device=None):
        fraction[0] = float(value)

    def reset_peak(device=None):
        _one(device)
        a.reset_peak()

    return {
        "memory_stats": stats, "memory_stats_as_nested_dict": lambda device=None: _nested(stats(device)),
        "memory_allocated": lambda device=None: a.current, "max_memory_allocated": lambda device=None: a.peak,
        "memory_reserved": lambda device=None: a.current, "max_memory_reserved": lambda device=None: a.peak,
        "memory_cached": lambda device=None: a.current, "max_memory_cached": lambda device=None: a.peak,
        "reset_peak_memory_stats": reset_peak, "reset_max_memory_allocated": reset_peak,
        "reset_max_memory_cached": reset_peak, "reset_accumulated_memory_stats": reset_accumulated,
        "memory_summary": lambda device=None, abbreviated=False: _summary(props),
        "mem_get_info": lambda device=None: (props.total_memory - a.current, props.total_memory),
        "set_per_process_memory_fraction": set_fraction,
        "get_per_process_memory_fraction": lambda device=None: fraction[0],
        "list_gpu_processes": lambda device=None: f"GPU:0\nprocess {os.getpid():>10d} uses "
                                                  f"{a.current / (1 << 20):>12.3f} MB GPU memory",
        "memory_snapshot": requires_gpu("torch.cuda.memory_snapshot"),
        "caching_allocator_alloc": requires_gpu("torch.cuda.caching_allocator_alloc"),
        "caching_allocator_delete": requires_gpu("torch.cuda.caching_allocator_delete"),
        "_record_memory_history": requires_gpu("torch.cuda.memory._record_memory_history"),
        "_snapshot": requires_gpu("torch.cuda.memory._snapshot"),
        "_dump_snapshot": requires_gpu("torch.cuda.memory._dump_snapshot"),
    }
