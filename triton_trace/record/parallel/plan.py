"""How many workers a launch gets, and which programs each runs.

The first chunk runs in the launch's own process (it also settles the chunk size, which grows after it for
small blocks); its time per program says how long the rest would take in one process, ``t``. With ``n``
workers the rest takes about ``WORKER_COST * t / n + FIXED_SECONDS + FORK_SECONDS * (n - 1)``: a worker's
programs cost more than in one process (its first touch of every page of its temporaries, which the fork
leaves to it, and writing what it recorded and wrote into its memory file: measured 1.55x on a worker's half
of the 16M vector add, 1.18x on the launch process's half, each alone on a core), taking the workers'
results back costs about 0.03 s (the add's 32 MB of output read back, 0.02 s; the recording merged) and each
fork 0.01 s (benchmarks/speed/bench_workers.py --apart: the launch's and its workers' CPU together came to
1.6x one process's). The launch takes the ``n`` (at most ``workers``, at most one per chunk left) for which
that is shortest, and stays in one process unless it is shorter than ``t``: with two idle cores, about
0.16 s of programs after the first chunk. Ranges start and end
where the launch's own chunks do, so each worker runs the chunks one process would.
"""
from __future__ import annotations

import os
from typing import NamedTuple, Optional

WORKER_COST = 1.5               # a worker's programs against the same in one process (module docstring)
FIXED_SECONDS = 0.03            # taking the workers' results back
FORK_SECONDS = 0.01             # forking one worker
ENV = "TRITON_TRACE_WORKERS"    # caps the default worker count (trace(workers=None))


def cores() -> int:
    """The default ``workers``: the cores this process may use, capped by ``TRITON_TRACE_WORKERS``."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    cap = os.environ.get(ENV, "").strip()
    return max(1, min(n, int(cap))) if cap.isdigit() and int(cap) > 0 else n


def idle_cores(cores: int) -> int:
    """Of ``cores``, those no other process keeps busy now: /proc/loadavg's count of runnable threads, this
    one's excluded (at least 1; ``cores`` where it cannot be read). Workers on busy cores only share them: the
    launch then takes longer than in one process (benchmarks/speed/RESULTS_workers.txt)."""
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cores
    return max(1, min(cores, cores - (running - 1)))


class Plan(NamedTuple):
    ranges: tuple             # (first, end) launch positions per worker, the launch's own process first
    reason: Optional[str]     # why fewer workers than asked, or None


def split(start: int, total: int, unit: int, workers: int, per_program: float) -> Plan:
    """Ranges for up to ``workers`` workers over programs ``start .. total``, cut at multiples of ``unit``
    programs from ``start`` (the chunk size), for programs of ``per_program`` seconds each."""
    left = total - start
    units = -(-left // unit)
    alone = per_program * left
    cost = lambda k: WORKER_COST * alone / k + FIXED_SECONDS + FORK_SECONDS * (k - 1)  # noqa: E731
    n = min(range(2, max(min(workers, units), 1) + 1), key=cost, default=1)
    if n < 2 or cost(n) >= alone:
        if units < 2:
            why = f"the launch's programs after its first chunk fit in one chunk of {unit}"
        else:
            why = (f"the {left} programs after the first chunk would take about {alone:.3f} s here, too little to "
                   f"gain from workers (plan.py: their programs take {WORKER_COST}x as long, {FORK_SECONDS} s to "
                   f"fork each, {FIXED_SECONDS} s to take them back)")
        return Plan(((start, total),), why)
    cuts = [start + (units * k // n) * unit for k in range(n)] + [total]
    ranges = tuple((a, min(b, total)) for a, b in zip(cuts, cuts[1:]))
    why = None if n == workers else (f"{n} of {workers} workers: more would not be faster (plan.py)" if n < units
                                     else f"{n} of {workers} workers: one per chunk left")
    return Plan(ranges, why)


class ValuePeers:
    """What the workers before one kept of the launch's value cap, in memory every worker shares (the
    collector's ``Budget.peers``). Counts are of what each kept after the fork, published at the end of each
    chunk that stays, so they only grow: a worker whose own count plus theirs passes the cap, or behind one
    that stopped keeping values, keeps none from then on, as one process would not (the merge would drop
    them); reading a count late only keeps values the merge drops."""

    def __init__(self, shared, index: int, base: int):
        self.shared, self.index, self.base = shared, index, base     # shared: int64 [taken, stopped] per worker

    def publish(self, kept: int, stopped: bool) -> None:
        self.shared[2 * self.index] = kept - self.base
        self.shared[2 * self.index + 1] = int(stopped)

    def past(self, kept: int, cap: int) -> bool:
        earlier = self.shared[:2 * self.index]
        return bool(earlier[1::2].any()) or kept + int(earlier[0::2].sum()) > cap
