"""The first all-programs tensor payload of a 4M-element tensor (issue 43, bug 6): what a user waits for
when a big launch opens, before any answer is cached.

A synthetic 2048 x 2048 float32 tile copy (128 x 128 programs of 16 x 16, as tests/helpers/webcases.py builds it)
is served by a fresh app per repeat; the time is the first GET of /api/launch/0/tensor/<t>?mode=all, and
then of the launch's grid and findings, through Flask's test client (no network). Run:

    timeout 900 .venv/bin/python benchmarks/ui/bench_tensor_payload.py [--repeat 3]

Results go to benchmarks/ui/RESULTS.txt by hand (one current results file).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from helpers.webcases import synthetic_tiled  # noqa: E402

from triton_trace.view.app import create_app  # noqa: E402

HEADERS = {"X-TT-Client": "1"}


def timed(client, path: str) -> tuple:
    t0 = time.perf_counter()
    r = client.get(path, headers=HEADERS)
    dt = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{path}: {r.status_code} {r.get_data(as_text=True)[:200]}")
    return dt, len(r.get_data())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--programs", type=int, default=128, help="programs along each grid axis (16x16 tiles)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    trace = synthetic_tiled(args.programs, args.programs, 16, 16, ragged=0)
    info = trace.launches[0].tensors[0]
    print(f"trace: {info.shape[0]}x{info.shape[1]} = {info.shape[0] * info.shape[1]:,} elements per tensor, "
          f"built in {time.perf_counter() - t0:.1f} s")
    rows = {"tensor (first, mode=all)": [], "tensor (again, cached)": [], "tensor y (first)": []}
    size = 0
    for _ in range(args.repeat):
        client = create_app(trace).test_client()
        timed(client, "/api/trace")                          # the page's first request: the analysis runs here
        timed(client, "/api/launch/0")
        dt, size = timed(client, "/api/launch/0/tensor/0?mode=all")
        rows["tensor (first, mode=all)"].append(dt)
        rows["tensor (again, cached)"].append(timed(client, "/api/launch/0/tensor/0?mode=all")[0])
        rows["tensor y (first)"].append(timed(client, "/api/launch/0/tensor/1?mode=all")[0])
    for name, v in rows.items():
        print(f"{name:28s} median {statistics.median(v) * 1000:8.1f} ms   (min {min(v) * 1000:.1f}, n={len(v)})")
    print(f"payload size {size / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
