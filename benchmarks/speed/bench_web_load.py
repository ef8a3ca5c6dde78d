"""Load benchmark: many concurrent clients against the web app on loopback, serving a 4096-program trace.

    /work/venv39/bin/python benchmarks/speed/bench_web_load.py [--clients 20] [--seconds 10]

Each client loops over what the UI asks for when someone clicks around: the launch list, a launch, its
grid, findings and charts, a random program, that program's tensor view (zoomed), one of its ops, and
the all-programs tiling view. Every request must answer 200 with JSON; the report gives the request
count, errors, and the median / 95th-percentile response time. tests/view/test_web_load.py runs a short
version of this as a test.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))


def ui_requests(rng: random.Random, grid=(64, 64)) -> list:
    """One UI session's requests: what the page fetches on open and on a program click."""
    x, y = rng.randrange(grid[0]), rng.randrange(grid[1])
    t = rng.randrange(2)
    return ["/api/trace", "/api/launch/0", "/api/launch/0/grid?z=0", "/api/launch/0/findings", "/api/launch/0/charts",
            f"/api/launch/0/program/{x},{y},0", f"/api/launch/0/tensor/{t}?mode=program&program={x},{y},0&window=auto",
            f"/api/launch/0/tensor/0?mode=op&program={x},{y},0&op=0&window=auto", f"/api/launch/0/tensor/{t}?mode=all"]


def run_load(base: str, clients: int = 20, seconds: float = 10.0, seed: int = 0) -> dict:
    """Hammer ``base`` (e.g. http://127.0.0.1:5001) from ``clients`` threads for ``seconds``."""
    times: list = []
    errors: list = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds
    start = threading.Barrier(clients)

    def client(k: int):
        rng = random.Random(seed * 1000 + k)
        mine, bad = [], []
        start.wait()
        while time.perf_counter() < stop:
            for path in ui_requests(rng):
                t0 = time.perf_counter()
                try:
                    # X-TT-Client: the header the page sends (the server refuses API requests without it)
                    req = urllib.request.Request(base + path, headers={"X-TT-Client": "1"})
                    with urllib.request.urlopen(req, timeout=30) as r:
                        body = r.read()
                        if r.status != 200:
                            bad.append(f"{path}: {r.status}")
                        json.loads(body)
                except (urllib.error.URLError, OSError, ValueError) as e:
                    bad.append(f"{path}: {type(e).__name__}: {e}")
                mine.append(time.perf_counter() - t0)
                if time.perf_counter() >= stop:
                    break
        with lock:
            times.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    ms = sorted(1000 * t for t in times)
    return {"clients": clients, "seconds": round(wall, 2), "requests": len(ms), "errors": len(errors),
            "error_examples": errors[:5], "median_ms": round(statistics.median(ms), 2) if ms else None,
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2) if ms else None,
            "max_ms": round(ms[-1], 2) if ms else None, "requests_per_s": round(len(ms) / wall, 1)}


SERVER = """
import sys
sys.path.insert(0, {tests!r})
import triton_trace
from helpers.webcases import synthetic_tiled
triton_trace.launch(trace=synthetic_tiled(64, 64, 16, 16), port=0, block=True)
"""


def start_server(timeout: float = 120.0):
    """Serve the 4096-program trace from a separate process, so the clients here do not share its GIL.
    Returns (process, base URL)."""
    import subprocess
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests")
    proc = subprocess.Popen([sys.executable, "-u", "-c", SERVER.format(tests=tests)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    for line in proc.stdout:       # the server prints its URL once it is analysed and listening
        if line.strip().startswith("http://"):
            return proc, line.strip().rstrip("/")
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("the benchmark server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    proc, base = start_server()
    print(f"server ready in {time.perf_counter() - t0:.2f} s (trace built and analysed) at {base}")
    try:
        report = run_load(base, args.clients, args.seconds)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(json.dumps(report, indent=2))
    if report["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
