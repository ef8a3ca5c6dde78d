"""Every kernel of the test suite and of examples/, compiled for the GPU and traced on the CPU, compared.

``enumerate_kernels`` finds them without a hand-kept list: each ``make_<name>`` factory exported by
tests/kernels (new modules there are picked up through its ``__init__``) and each Triton kernel defined
at module level in examples/*.py (imported without running their ``main``). A kernel with no spec is
reported as uncovered, which fails the run. ``run_entry`` draws fresh random inputs, runs the GPU half
(fresh compiled kernels; an example's kernel with its trace decorator taken off), then the traced half on
CPU copies of the same inputs, and compares output by output; differing elements are attributed through
the trace to the program, op and line that stored them.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import time
import zlib
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import kernels as K
from output_check import compare, poisoned_allocations, recording_args, to_device, untraced, who_wrote
from output_specs import EXAMPLES, EXCLUDED, SPECS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLE_MODULES: dict = {}


@dataclass(frozen=True)
class Entry:
    label: str                  # "tests/kernels:make_add" or "examples/vector_add.py:add_kernel"
    spec: Optional[str]         # None: uncovered
    slot: Optional[str] = None  # the slot the kernel under test fills
    example: object = None      # an example's kernel object (None for the test suite's factories)


def example_module(path: str):
    """Import examples/<name>.py once per process, without running its main()."""
    if path not in _EXAMPLE_MODULES:
        stem = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(f"triton_trace_example_{stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _EXAMPLE_MODULES[path] = mod
    return _EXAMPLE_MODULES[path]


def enumerate_kernels() -> list:
    from triton_trace.record.interp import hooks
    entries = []
    for name in sorted(n for n in dir(K) if n.startswith("make_") and callable(getattr(K, n))):
        hit = next(((s.name, slot) for s in SPECS.values() for slot, f in s.slots.items() if f == name), None)
        hit = hit or next(((s.name, None) for s in SPECS.values() if name in s.covers), (None, None))
        entries.append(Entry(f"tests/kernels:{name}", hit[0], hit[1]))
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))):
        mod = example_module(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        for attr, obj in sorted(vars(mod).items()):
            if hooks.is_kernel(obj) and getattr(hooks.python_fn(obj), "__module__", None) == mod.__name__:
                spec, slot = EXAMPLES.get(f"{stem}:{attr}", (None, None))
                entries.append(Entry(f"examples/{stem}.py:{attr}", spec, slot, obj))
    return entries


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _kernels(spec, entry: Entry, traced: bool) -> dict:
    from triton_trace import trace
    ks = {}
    for slot, factory in spec.slots.items():
        if entry.example is not None and slot == entry.slot:
            ks[slot] = entry.example
        elif factory is not None:
            k = getattr(K, factory)()
            ks[slot] = trace(k) if traced else k
    return ks


def run_entry(entry: Entry, seed: int, device: str = "cuda") -> dict:
    """Compare one kernel's GPU and traced outputs. Returns a JSON-ready result with a "status".

    ``device="cpu"`` under ``TRITON_INTERPRET=1`` runs the "GPU" half in Triton's own interpreter: a
    dry run of this machinery on a machine without a GPU."""
    import triton_trace
    res = {"kernel": entry.label, "spec": entry.spec}
    if entry.spec is None:
        return {**res, "status": "uncovered", "reason": "no spec in benchmarks/fidelity/output_specs.py"}
    spec = SPECS[entry.spec]
    why = spec.requires() if spec.requires else None
    if why:
        return {**res, "status": "skipped", "reason": why}
    seed = zlib.crc32(entry.label.encode(), seed) & 0x7FFFFFFF
    res["seed"] = seed
    t0 = time.perf_counter()
    try:
        inputs = spec.inputs(torch.Generator().manual_seed(seed))
        dev_inputs = [to_device(x, device) for x in inputs]
        with (untraced(entry.example) if entry.example is not None else nullcontext()), poisoned_allocations():
            gpu_out = _as_tuple(spec.call(_kernels(spec, entry, traced=False), *dev_inputs))
        if device == "cuda":
            torch.cuda.synchronize()
        triton_trace.reset()
        tr_kernels = _kernels(spec, entry, traced=True)
        logs: list = []
        with ExitStack() as stack:
            for k in tr_kernels.values():
                stack.enter_context(recording_args(k, logs))
            with poisoned_allocations():
                tr_out = _as_tuple(spec.call(tr_kernels, *inputs))
        launches = triton_trace.current_trace().launches
        refs = spec.reference(*inputs) if spec.reference else (None,) * len(tr_out)
    except Exception as e:           # reported per kernel; the run goes on and fails at the end
        return {**res, "status": "error", "error": f"{type(e).__name__}: {e}"[:2000]}
    res["launches"] = [lc.kernel_name for lc in launches]
    res["outputs"] = []
    failed = len(gpu_out) != len(tr_out) or len(tr_out) != len(spec.tols)
    for i, (g, t, tol) in enumerate(zip(gpu_out, tr_out, spec.tols)):
        c = compare(g, t, tol, refs[i])
        bad = c.pop("bad")
        if c["bad_elements"]:
            failed = True
            flat = np.flatnonzero(bad.reshape(-1).numpy())[:5] if bad.numel() == t.numel() else np.zeros(0, int)
            gv, tv = g.detach().cpu().reshape(-1), t.reshape(-1)
            c["examples"] = [{**w, "gpu": float(gv[w["index"]]), "trace": float(tv[w["index"]])}
                             for w in who_wrote(list(launches), logs, t, flat)]
        res["outputs"].append(c)
    res["status"] = "mismatch" if failed else "pass"
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def run_all(seed: int, device: str = "cuda", log=print, only: Optional[str] = None) -> dict:
    """Every enumerated kernel (or those whose label contains ``only``), compared."""
    import triton
    if device == "cuda":      # device-side tensor descriptors need a scratch allocator on the GPU
        triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    results = []
    for entry in enumerate_kernels():
        if only and only not in entry.label:
            continue
        r = run_entry(entry, seed, device)
        results.append(r)
        detail = r.get("reason") or r.get("error") or ", ".join(
            f"{o['tol']}:{o['bad_elements']} bad" if o["bad_elements"] else o["tol"] for o in r.get("outputs", []))
        log(f"  {r['status']:9s} {entry.label:50s} {detail}")
    counts = {s: sum(r["status"] == s for r in results) for s in ("pass", "mismatch", "error", "skipped", "uncovered")}
    return {"seed": seed, "results": results, "counts": counts, "excluded": EXCLUDED}
