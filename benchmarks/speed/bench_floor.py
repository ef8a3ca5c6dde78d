"""The floor of tracing a 4M-element vector add on this machine: torch's add, numpy's add (the interpreter's
arithmetic, whose bits the trace gives) and one copy of the values a trace records (x, y and out: 48 MB)
into memory already touched, each the median of 21 runs.

    python benchmarks/speed/bench_floor.py

A trace does at least the last two; their sum over torch's time bounds traced / torch from below. Not part
of the test run: nothing here asserts a time.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch


def _median_ms(fn, runs: int = 21) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    n = 1 << 22
    x, y = torch.randn(n), torch.randn(n)
    xn, yn = x.numpy(), y.numpy()
    recorded = np.random.rand(3 * n).astype(np.float32)
    blob = np.empty_like(recorded)
    blob[:] = 0                                   # touched once, as a launch's value buffer is
    t_torch = _median_ms(lambda: x + y)
    t_numpy = _median_ms(lambda: xn + yn)
    t_copy = _median_ms(lambda: np.copyto(blob, recorded))
    print(f"torch x + y                     {t_torch:6.2f} ms")
    print(f"numpy x + y                     {t_numpy:6.2f} ms  ({t_numpy / t_torch:.1f}x torch)")
    print(f"copy of the recorded values     {t_copy:6.2f} ms  ({t_copy / t_torch:.1f}x torch)")
    print(f"numpy add + recording, at least {t_numpy + t_copy:6.2f} ms  ({(t_numpy + t_copy) / t_torch:.1f}x torch)")


if __name__ == "__main__":
    main()
