"""Reproducers of every kernel of the test suite and of examples/, each run in a fresh process.

For every kernel output_compare.py enumerates (tests/kernels factories, library-style kernels, the tutorial
kernels, examples/), its spec's launcher runs on fresh random CPU inputs traced with ``inputs=True``; each
launch becomes a reproducer folder (``Launch.reproducer``), and ``python launch.py`` runs it in a new
process: on the CPU it must reproduce the traced outputs bit for bit; with ``--gpu`` (on a machine with
CUDA) it runs compiled and is compared with the trace within the ops' tolerances (triton_trace.compare).

    PYTHONPATH=. python benchmarks/fidelity/repro_all.py --out OUT [--gpu] [--only NAME] [--workers N]

Writes OUT/repro_results.json and prints one line per reproducer; exit status 1 when any fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, os.path.join(ROOT, "tests"), ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

import torch  # noqa: E402

from output_compare import _kernels, enumerate_kernels  # noqa: E402
from output_specs import SPECS  # noqa: E402


def write_all(out: str, seed: int = 0, only=None) -> list:
    """Trace every covered kernel and write one reproducer per launch. Returns [(label, folder)] and the
    entries that could not be traced, as [(label, None, reason)]."""
    import triton_trace
    written = []
    for entry in enumerate_kernels():
        if entry.spec is None or (only and only not in entry.label):
            continue
        spec = SPECS[entry.spec]
        why = spec.requires() if spec.requires else None
        if why:
            written.append((entry.label, None, f"skipped: {why}"))
            continue
        triton_trace.reset()
        inputs = spec.inputs(torch.Generator().manual_seed(zlib.crc32(entry.label.encode(), seed) & 0x7FFFFFFF))
        with triton_trace.trace_all(inputs=True):
            spec.call(_kernels(spec, entry, traced=True), *inputs)
        for i, launch in enumerate(triton_trace.current_trace().launches):
            folder = os.path.join(out, entry.label.replace("/", "_").replace(":", "__"), str(i))
            launch.reproducer(folder, index=i)
            written.append((entry.label, folder, launch.kernel_name))
    return written


def run_one(folder: str, gpu: bool, timeout: int = 600) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, os.path.join(folder, "launch.py")] + (["--gpu"] if gpu else []),
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=folder)
    lines = (r.stdout.strip().splitlines() or [""])
    return {"rc": r.returncode, "last": lines[-1][:300], "stdout": r.stdout[-3000:], "stderr": r.stderr[-3000:],
            "seconds": round(time.perf_counter() - t0, 2)}


def passed(result: dict, gpu: bool) -> bool:
    if gpu:
        return result["rc"] == 0
    return result["rc"] == 0 and "bit for bit" in result["last"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", action="store_true", help="run each reproducer with --gpu (needs CUDA)")
    ap.add_argument("--only", help="only kernels whose label contains this")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    written = write_all(os.path.join(args.out, "repros"), args.seed, args.only)
    todo = [(label, folder, what) for label, folder, what in written if folder]
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(lambda t: run_one(t[1], args.gpu), todo))
    rows, failed = [], 0
    for (label, folder, kernel), r in zip(todo, results):
        ok = passed(r, args.gpu)
        failed += not ok
        rows.append({"kernel": label, "launch": kernel, "folder": os.path.relpath(folder, args.out), "ok": ok, **r})
        print(f"{'ok  ' if ok else 'FAIL'} {label} [{kernel}] rc={r['rc']} {r['seconds']}s: {r['last']}")
        if not ok:
            print(r["stderr"][-1500:])
    for label, _, why in (w for w in written if not w[1]):
        print(f"skip {label}: {why}")
    summary = {"mode": "gpu" if args.gpu else "cpu", "reproducers": len(rows), "failed": failed,
               "skipped": [[label, why] for label, f, why in written if not f]}
    with open(os.path.join(args.out, "repro_results.json"), "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    print(json.dumps(summary))
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
