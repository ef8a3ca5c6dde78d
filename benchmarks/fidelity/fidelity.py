"""GPU fidelity: the same kernels compiled for a real GPU agree with their traces, outputs and memory metrics.

Run on the GPU machine, from the repository root, in one call:

    PYTHONPATH=. python benchmarks/fidelity/fidelity.py --out benchmarks/fidelity/results

1. Outputs: every kernel of the test suite and of examples/ runs compiled on the GPU and traced on the
   CPU, on the same fresh random inputs with poisoned outputs; the comparison (bit-exact, ulp bounds, or
   relative norm error against float64 for tl.dot) is per output, and disagreeing elements are traced
   back to the program and store that wrote them (output_compare.py, output_specs.py, output_check.py).
2. Memory metrics: the cases of metric_cases.py are traced and analysed in worker processes while one
   Nsight Compute run (``ncu --clock-control none``) measures them all (metric_measure.py); predicted sectors,
   requests, requested bytes, DRAM bytes and L2 hit rate are set against the counters.
3. Tracing leaves Triton alone: an add kernel compiled before anything is traced gives the same binary,
   the same cached compiled kernel and bit-identical output afterwards, and a fresh copy compiles to the
   same binary.

Writes results.json and table.md under --out, prints the table, and exits 1 on any output mismatch,
error, uncovered kernel or failed compile check (a metric outside its target is reported, not fatal).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _p in (ROOT, os.path.join(ROOT, "tests"), os.path.dirname(os.path.abspath(__file__))):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import metric_measure  # noqa: E402
import metric_predict  # noqa: E402
import fidelity_table  # noqa: E402


def _sh(cmd: list) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def environment() -> dict:
    import numpy
    import torch
    import triton
    props = torch.cuda.get_device_properties(0)
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "gpu": torch.cuda.get_device_name(0), "sms": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "driver": _sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).splitlines()[:1],
            "cuda": torch.version.cuda, "torch": torch.__version__, "triton": triton.__version__,
            "numpy": numpy.__version__, "python": platform.python_version(),
            "ncu": (_sh(["ncu", "--version"]).splitlines() or [""])[-1],
            "command": "PYTHONPATH=. python3 " + " ".join([os.path.relpath(__file__, ROOT)] + sys.argv[1:])}


# --------------------------------------------------------------------------------------------------------
# tracing leaves compilation alone
# --------------------------------------------------------------------------------------------------------
class CompileProbe:
    """An add kernel compiled and run before anything is traced, checked again at the end."""

    def __init__(self):
        import hashlib
        import torch
        import kernels as K
        self.K, self.hashlib = K, hashlib
        g = torch.Generator().manual_seed(7)
        self.x, self.y = (torch.randn(1 << 20, generator=g).cuda() for _ in range(2))
        self.kernel = K.make_add()
        self.out = K.add(self.x, self.y, kernel=self.kernel, block=1024).clone()
        self.compiled = self._compiled(self.kernel)
        self.cubin = hashlib.sha256(self.compiled.asm["cubin"]).hexdigest()

    def _compiled(self, kernel):
        n = self.x.numel()
        return kernel.warmup(self.x, self.y, self.out, n, BLOCK=1024, grid=(n // 1024,))

    def check(self) -> dict:
        import torch
        import triton_trace
        from triton.runtime.jit import JITFunction
        K = self.K
        traced_cuda = K.add(self.x, self.y, kernel=triton_trace.trace(K.make_add()), block=1024)
        again = K.add(self.x, self.y, kernel=self.kernel, block=1024)
        fresh = K.make_add()
        fresh_out = K.add(self.x, self.y, kernel=fresh, block=1024)
        torch.cuda.synchronize()
        checks = {
            "traced launch on CUDA tensors matches the compiled kernel": torch.equal(traced_cuda, self.out),
            "the kernel compiled before tracing is reused (no recompile)": self._compiled(self.kernel) is self.compiled,
            "its output is bit-identical after tracing": torch.equal(again, self.out),
            "a fresh copy compiles to the same cubin": self.hashlib.sha256(
                self._compiled(fresh).asm["cubin"]).hexdigest() == self.cubin,
            "the fresh copy's output is bit-identical": torch.equal(fresh_out, self.out),
            "JITFunction.run is Triton's own": "run" not in vars(self.kernel) and JITFunction.run.__module__
            == "triton.runtime.jit",
            "TRITON_INTERPRET is not left set": "TRITON_INTERPRET" not in os.environ,
        }
        return {"checks": checks, "ok": all(checks.values()), "cubin_sha256": self.cubin}


# --------------------------------------------------------------------------------------------------------
# the memory metrics: predictions in worker processes, measurements from one ncu run
# --------------------------------------------------------------------------------------------------------
def occupancy(compiled: dict):
    """Programs per SM from the compiled kernel's resources, with Hopper's limits: 64 warps and 32 blocks
    per SM, 65536 registers allocated per warp in units of 256, 228 KiB of shared memory of which the
    runtime reserves 1 KiB per block."""
    try:
        warps, regs, smem = int(compiled["num_warps"]), int(compiled["n_regs"]), int(compiled["shared"])
    except (KeyError, TypeError, ValueError):
        return None
    per_warp = -(-regs * 32 // 256) * 256
    by_regs = (65536 // per_warp) // warps if per_warp else 32
    return max(1, min(32, 64 // warps, by_regs, (228 << 10) // (smem + 1024)))


def programs_in_flight(measured: dict, compiled: dict, sms: int):
    """Programs resident at once: the compiled kernel's occupancy (ncu's limits, else computed from its
    registers and shared memory) times the SMs. None leaves the analyzer's default."""
    keys = ("launch__occupancy_limit_blocks", "launch__occupancy_limit_registers",
            "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps")
    limits = [measured.get(k) for k in keys]
    limits = [v for v in limits if isinstance(v, float) and v > 0]
    per_sm = int(min(limits)) if limits else occupancy(compiled or {})
    return per_sm * sms if per_sm else None


class Predictions:
    """Every case traced at once in a pool of worker processes; each worker then waits for its programs in
    flight (known once ncu has measured the compiled kernel's occupancy) and analyses."""

    def __init__(self, cases: list, workers: int, l2_bytes, wait_s: float):
        ctx = mp.get_context("spawn")
        self.manager = ctx.Manager()
        self.box = self.manager.dict()
        self.ready = {c.name: self.manager.Event() for c in cases}
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
        self.futures = {c.name: self.pool.submit(metric_predict.predict_case, c.name, l2_bytes, self.box,
                                                 self.ready[c.name], wait_s)
                        for c in sorted(cases, key=lambda c: -c.cost)}     # the longest traces first

    def analyse(self, name: str, programs_in_flight) -> None:
        self.box[name] = programs_in_flight
        self.ready[name].set()

    def results(self, timeout: float) -> dict:
        end = time.monotonic() + timeout
        out = {}
        for name, f in self.futures.items():
            try:
                out[name] = f.result(timeout=max(1.0, end - time.monotonic()))
            except Exception as e:                 # reported in the table; the run goes on
                out[name] = {"error": f"{type(e).__name__}: {e}"[:1000] or type(e).__name__}
        self.close()
        return out

    def close(self) -> None:
        for f in self.futures.values():
            f.cancel()
        for proc in list(getattr(self.pool, "_processes", {}).values()):     # a worker still tracing
            if proc.is_alive():
                proc.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.manager.shutdown()


def _save(folder: str, results: dict) -> None:
    """results.json, rewritten after every stage: a run cut short still leaves what it measured."""
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True, default=str)


def main(argv=None) -> int:
    from metric_cases import CASES, MAIN, SWEEP
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fidelity_results", help="folder for results.json and table.md")
    ap.add_argument("--cases", default=None, help="comma-separated metric cases (default: all); see metric_cases.py")
    ap.add_argument("--no-sweep", action="store_true", help="leave out the L2 write-back sweep cases")
    ap.add_argument("--no-metrics", action="store_true", help="skip the Nsight Compute comparison")
    ap.add_argument("--no-outputs", action="store_true", help="skip the output comparison")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--seed", type=int, default=None, help="seed of the output comparison (default: fresh)")
    ap.add_argument("--budget", type=float, default=480, help="seconds after which unfinished predictions are "
                                                              "reported as such and the run ends")
    a = ap.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to compare (run this on the GPU machine)")
        return 2
    os.makedirs(a.out, exist_ok=True)
    log = lambda msg: print(msg, flush=True)      # noqa: E731
    env = environment()
    log(json.dumps(env))
    probe = CompileProbe()                         # before anything is traced
    cases = [] if a.no_metrics else (
        [CASES[n] for n in a.cases.split(",")] if a.cases else MAIN + ([] if a.no_sweep else SWEEP))
    results = {"environment": env}
    t0 = time.perf_counter()
    if cases:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "2")        # the workers share the cores: no BLAS thread pools each
        preds = Predictions(cases, a.workers, env["l2_bytes"], wait_s=a.budget)
        workdir = tempfile.mkdtemp(prefix="fidelity_")
        measured = metric_measure.measure(cases, workdir, log=log)
        log(f"ncu done after {time.perf_counter() - t0:.0f} s")
        for c in cases:
            preds.analyse(c.name, programs_in_flight(measured["cases"].get(c.name, {}),
                                                     measured["compiled"].get(c.name), env["sms"]))
        results["ncu"] = {k: v for k, v in measured.items() if k != "cases"}
        results["measured_so_far"] = measured["cases"]
        _save(a.out, results)
    if not a.no_outputs:
        import output_compare
        seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        log(f"outputs (seed {seed}):")
        results["outputs"] = output_compare.run_all(seed, "cuda", log=log)
        log(f"outputs done after {time.perf_counter() - t0:.0f} s")
        _save(a.out, results)
    results["compile_check"] = probe.check()
    if cases:
        predicted = preds.results(timeout=a.budget - (time.perf_counter() - t0))
        results["metrics"] = {c.name: {"what": c.what, "predicted": predicted[c.name],
                                       "measured": measured["cases"].get(c.name, {}),
                                       "compiled": measured.get("compiled", {}).get(c.name)} for c in cases}
    results.pop("measured_so_far", None)
    results["seconds"] = round(time.perf_counter() - t0, 1)
    _save(a.out, results)
    table = fidelity_table.markdown(results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    failed = fidelity_table.failures(results)
    for line in failed:
        print("FAIL:", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
