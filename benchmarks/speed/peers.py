"""triton_trace beside its peers: the same kernels on the same inputs on the same machine, one tool after the
other, each in its own process and (where its Triton differs) its own virtual environment.

    python benchmarks/speed/peers.py [--size small|full] [--cases add,softmax] [--tools plain,traced]
                                     [--timeout 300] [--repeat 3] [--json out.json]
    python benchmarks/speed/peers.py --from-json out.json      # print the tables of a saved run again

Tools (columns): ``plain`` (Triton's interpreter, ``TRITON_INTERPRET=1``, Triton 3.9 as triton_trace),
``plain_tl`` (the same in TileLens' environment, Triton 3.6: the interpreter TileLens runs on), ``traced``
(``triton_trace.trace(kernel)``, every program, lane and value recorded), ``analysed`` (the same, then
``triton_trace.analyze`` of the trace; its time is the sum), ``tl_tracer`` and ``tl_sanitizer`` (TileLens
3.1.1's ``@tilelens.trace("tracer")`` and ``@tilelens.trace("sanitizer")``, as its README runs a kernel),
``ttsem`` (ttsem 0.1.0's ``ttsem.sanitize.session()``, what ``python -m ttsem.sanitize`` opens around a
program), ``torch`` (the same math in torch eager on the CPU, all threads; for the fp16 kernels on fp32 copies
of the inputs, as torch's CPU fp16 matmul is no reference anyone would pick) and ``floor`` (the issue-45
floor: the same math in numpy, as Triton's interpreter computes it, plus one copy of the values
triton_trace recorded for the case, whose byte count the ``traced`` child reports).

Each cell is one child process: it builds the case's inputs from ``--seed``, wraps the kernel before the
clock starts, then times whole launches (outputs allocated inside) up to ``--repeat`` times, stopping
after the first run that takes longer than ``--long``; the cell's time is the median. The child checks the
first run's outputs against a float64 torch reference; a tool whose outputs are off is marked ``WRONG``. A
child killed at ``--timeout`` seconds shows ``> T s`` (or, if it finished some runs, their median). A
child that fails shows ``error`` and the failure's last line below the table. A second table gives each cell's
first run alone (a fresh process's first launch: what one use of the tool costs).

The ``traced`` cell also runs the case three more times, untimed: once counting the interpreter builder's ops
(every ``create_*`` call, through triton_trace/record/opcount.py: a batched chunk's op counts once however
many programs it runs), once under ``perf record`` sampling the main thread (where ``perf`` works: the share
of its CPU samples in the Python interpreter, ``libpython`` and the ``python`` binary, against numpy, BLAS,
libm, libc, the package's C and the kernel) and once under cProfile (the tottime of numpy's and ctypes'
builtins against the rest; cProfile cannot see ufunc calls and operators, ``np.exp(x)``, ``a + b``, which it
books to their Python caller, and its own per-call cost lands on Python: an upper bound on Python's share).
The first table's last columns show ops per launch and Python's share; the notes break them down.

Ratios compare cells of one run of this script (each row's cells one after the other), never with other
runs: on a shared machine absolute times move by tens of percent between sittings. Not part of the test
run: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__" and "--child" in sys.argv and sys.argv[sys.argv.index("--child") + 1] in ("plain", "plain_tl"):
    os.environ["TRITON_INTERPRET"] = "1"        # before triton is imported, as a user sets it

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

TOOLS = ("plain", "plain_tl", "traced", "analysed", "tl_tracer", "tl_sanitizer", "ttsem", "torch", "floor")
VENVS = {   # tool -> environment variable naming its python, and the default
    "main": ("PEERS_MAIN_PYTHON", os.path.join(ROOT, ".venv", "bin", "python")),
    "tilelens": ("PEERS_TILELENS_PYTHON", "/tmp/peers/tl/bin/python"),
    "ttsem": ("PEERS_TTSEM_PYTHON", "/tmp/peers/ts/bin/python"),
}
TOOL_VENV = {"plain": "main", "plain_tl": "tilelens", "traced": "main", "analysed": "main", "tl_tracer": "tilelens",
             "tl_sanitizer": "tilelens", "ttsem": "ttsem", "torch": "main", "floor": "main"}
TOOL_NOTES = {
    "tl_sanitizer": "TileLens' sanitizer replaces every load and store with a symbolic expression (checked with "
                    "Z3) and performs no store, so the kernel's outputs are never computed: its WRONG marks that, "
                    "and its time is a checker's, not a run of the kernel.",
    "tl_tracer": "TileLens' tracer runs the kernel in Triton 3.6's interpreter and keeps each load's and store's "
                 "offsets and mask, with its call path; not the loaded or stored values.",
    "ttsem": "ttsem compiles each launch to TTIR with Triton 3.8's frontend and executes the IR, checking bounds "
             "and (below its access budget) races; it records no trace to view.",
    "traced": "triton_trace records every program's offsets, masks and values (up to its per-launch value cap).",
}
FAST_RUNS = 21          # torch and numpy runs per cell (the median): their single times move 3x on this machine


def _python(tool: str) -> str:
    var, default = VENVS[TOOL_VENV[tool]]
    return os.environ.get(var, default)


# ------------------------------------------------------------------------------------------------------
# child: one case under one tool
# ------------------------------------------------------------------------------------------------------
def _emit(out: dict) -> None:
    print("@@" + json.dumps(out), flush=True)         # the parent keeps the last such line


def _median_s(fn, runs: int, budget_s: float = 10.0) -> float:
    """The median of ``runs`` runs, or of those done once ``budget_s`` seconds are spent (at least 3)."""
    times = []
    spent = time.perf_counter()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - spent > budget_s:
            break
    return statistics.median(times)


def _op_count(run, reset) -> dict:
    """The interpreter builder's ops (create_* calls) of one traced run, and its launches."""
    import triton_trace
    from triton_trace.record.opcount import counting
    reset()
    with counting() as counts:
        run()
    launches = len(triton_trace.current_trace().launches)
    reset()
    return {"ops": sum(counts.values()), "launches": launches, "top": counts.most_common(5)}


def _perf_share(run, reset) -> dict:
    """Where the main thread's CPU time goes during one run, by shared object, from ``perf record`` samples."""
    perf = shutil.which("perf")
    if perf is None:
        return {"error": "perf is not on PATH"}
    reset()
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        rec = subprocess.Popen([perf, "record", "-q", "-F", "1999", "-t", str(os.getpid()), "-o", data],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20            # perf writes its file's header once it is attached
        while rec.poll() is None and time.monotonic() < deadline and not (
                os.path.exists(data) and os.path.getsize(data) > 0):
            time.sleep(0.01)
        if rec.poll() is not None:
            return {"error": "perf record: " + rec.stderr.read().decode().strip()[-200:]}
        time.sleep(0.2)
        t0 = time.perf_counter()
        run()
        took = time.perf_counter() - t0
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=120)
        rep = subprocess.run([perf, "report", "-i", data, "--sort", "dso", "--stdio", "-q"], capture_output=True,
                             text=True, timeout=300)
    reset()
    dsos = {}
    for line in rep.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].endswith("%"):
            dsos[parts[1].strip()] = float(parts[0][:-1]) / 100
    if not dsos:
        return {"error": "perf report: " + (rep.stderr.strip()[-200:] or "no samples")}
    share = {"python": 0.0, "native": 0.0, "kernel": 0.0}
    for dso, frac in dsos.items():
        kind = "python" if dso.startswith(("libpython", "python")) else "kernel" if dso.startswith("[kernel") \
            else "native"
        share[kind] += frac
    return {**share, "wall": took, "top": sorted(dsos.items(), key=lambda kv: -kv[1])[:5]}


def _cprofile_share(run, reset) -> dict:
    """cProfile's split of one run: the tottime of numpy's and ctypes' builtins against the rest."""
    import cProfile
    import pstats
    reset()
    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    reset()
    native = total = 0.0
    for (filename, _, name), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
        total += tottime
        if filename == "~" and ("numpy" in name or "ctypes" in name or "torch" in name):
            native += tottime
    return {"python": 1 - native / total if total else 0.0, "native": native / total if total else 0.0,
            "profiled": total}


def child(tool: str, case_name: str, size: str, seed: int, repeat: int, long_s: float, values_bytes: int) -> None:
    import numpy as np
    import torch
    sys.path.insert(0, HERE)
    import peers_kernels as PK
    case = PK.CASES[case_name](size, seed)
    out = {"tool": tool, "case": case_name, "desc": case.desc, "times": []}

    if tool in ("torch", "floor"):
        if tool == "torch":
            torch.set_num_threads(os.cpu_count() or 1)
            out["threads"] = torch.get_num_threads()
            with torch.no_grad() if case_name != "ln_bwd" else torch.enable_grad():
                out["err"], out["ok"] = case.check(case.eager())
                out["times"] = [_median_s(case.eager, FAST_RUNS)]
        else:
            res = case.numpy()
            res = res if isinstance(res, tuple) else (res,)
            out["err"], out["ok"] = case.check(tuple(torch.from_numpy(np.asarray(r)) for r in res))
            numpy_s = _median_s(case.numpy, FAST_RUNS)
            src = np.random.default_rng(0).integers(0, 255, max(values_bytes, 1), dtype=np.uint8)
            dst = np.zeros_like(src)                 # touched once, as a launch's value buffer is
            copy_s = _median_s(lambda: np.copyto(dst, src), FAST_RUNS)
            out.update(numpy_s=numpy_s, copy_s=copy_s, values_bytes=values_bytes, times=[numpy_s + copy_s])
        _emit(out)
        return

    reset, after = (lambda: None), (lambda: None)
    ctx = None
    if tool in ("plain", "plain_tl"):
        wrap = lambda k: k
    elif tool in ("traced", "analysed"):
        import triton_trace
        if tool == "analysed":
            import triton_trace.analysis.analyzer  # noqa: F401  (loaded before the clock, as a user's import is)
            after = lambda: triton_trace.analyze(triton_trace.current_trace())
        wrap = lambda k: triton_trace.trace(k)
        reset = triton_trace.reset
    elif tool in ("tl_tracer", "tl_sanitizer"):
        import tilelens
        client = tool.split("_", 1)[1]
        wrap = lambda k: tilelens.trace(client)(k)
        reset = tilelens.clear
    elif tool == "ttsem":
        import ttsem.sanitize
        wrap = lambda k: k
        ctx = ttsem.sanitize.session()
        state = ctx.__enter__()
    else:
        raise SystemExit(f"unknown tool {tool}")

    run = case.make(wrap)
    for i in range(repeat):
        reset()
        t0 = time.perf_counter()
        result = run()
        after()
        took = time.perf_counter() - t0
        out["times"].append(took)
        if i == 0:
            out["err"], out["ok"] = case.check(result)
            if tool == "traced":
                import triton_trace
                tr = triton_trace.current_trace()
                out["values_bytes"] = int(sum(lc.values.nbytes for lc in tr.launches))
                out["values_truncated"] = any(lc.values_truncated for lc in tr.launches)
                out["lanes"] = int(sum(lc.lanes.size for lc in tr.launches))
                del tr
        del result
        _emit(out)
        if took > long_s:
            break
    if tool == "traced":
        _emit(out)                      # (the timings stand even if a measurement below fails)
        out["opcount"] = _op_count(run, reset)
        out["perf"] = _perf_share(run, reset)
        out["cprofile"] = _cprofile_share(run, reset)
    if ctx is not None:
        out["races_unchecked"] = state.races_unchecked
        out["launches"] = state.launches
        ctx.__exit__(None, None, None)
    _emit(out)


# ------------------------------------------------------------------------------------------------------
# parent
# ------------------------------------------------------------------------------------------------------
def versions() -> dict:
    code = ("import importlib.metadata as m, sys, json; v = {}\n"
            "for p in ('triton', 'torch', 'numpy', 'triton_trace', 'tilelens', 'ttsem'):\n"
            "    try: v[p] = m.version(p)\n"
            "    except m.PackageNotFoundError: pass\n"
            "v['python'] = sys.version.split()[0]; print(json.dumps(v))")
    out = {}
    for venv, (var, default) in VENVS.items():
        py = os.environ.get(var, default)
        if not os.path.exists(py) and not shutil.which(py):
            out[venv] = {"error": "not installed here", "python_path": py}
            continue
        r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
        out[venv] = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()[-200:]}
        out[venv]["python_path"] = py
    return out


def machine() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    except (ValueError, OSError):
        mem = float("nan")
    return f"{os.cpu_count()} logical CPUs ({len(os.sched_getaffinity(0))} usable), {model}, {mem:.0f} GiB, {platform.platform()}"


def run_cell(tool, case, args, values_bytes=0) -> dict:
    cmd = [_python(tool), os.path.abspath(__file__), "--child", tool, "--cases", case, "--size", args.size,
           "--seed", str(args.seed), "--repeat", str(args.repeat), "--long", str(args.long),
           "--values-bytes", str(values_bytes)]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=ROOT)
        stdout, stderr, rc, timed_out = r.stdout, r.stderr, r.returncode, False
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc, timed_out = None, True
    wall = time.perf_counter() - t0
    lines = [line for line in stdout.splitlines() if line.startswith("@@")]
    res = json.loads(lines[-1][2:]) if lines else {"tool": tool, "case": case, "times": []}
    res.update(wall=wall, timed_out=timed_out)
    if rc not in (0, None) or (not timed_out and not res["times"]):
        last = [line for line in stderr.strip().splitlines() if line.strip()]
        res["error"] = last[-1][:300] if last else f"exit {rc}"
    return res


def cell_text(res: dict, timeout: float) -> str:
    if res.get("error") and not res["times"]:
        return "error"
    if not res["times"]:
        return f"> {timeout:.0f} s"
    t = statistics.median(res["times"])
    text = f"{t:.3g}" if t < 100 else f"{t:.0f}"
    if res["timed_out"]:
        text += "*"
    if res.get("ok") is False:
        text += " WRONG"
    return text


def table(results: dict, tools, timeout: float) -> str:
    """Seconds (median), then each tool's time over torch eager's and over the plain interpreter's."""
    def med(r):
        return statistics.median(r["times"]) if r.get("times") else None

    def first(r):
        return f"{r['times'][0]:.3g}" if r["times"] else cell_text(r, timeout)
    head = f"{'case':13s}" + "".join(f"{t:>14s}" for t in tools)
    counted = any("opcount" in row.get("traced", {}) for row in results.values())
    extra = f"{'ops/launch':>12s}{'python':>9s}" if counted else ""
    out = ["seconds (median of the runs; n = runs; for torch and floor one median of up to 21 runs)"
           + ("; then the traced launch's interpreter builder ops per launch and the share of its time in the "
              "Python interpreter (perf samples of the main thread, else cProfile's upper bound)" if counted else ""),
           head + extra, "-" * len(head + extra)]
    for case, row in results.items():
        out.append(f"{case:13s}" + "".join(f"{cell_text(row[t], timeout):>14s}" if t in row else f"{'-':>14s}"
                                          for t in tools) + (_ops_cells(row.get("traced", {})) if counted else ""))
        out.append(f"{'  n':13s}" + "".join(f"{len(row[t]['times']):>14d}" if t in row else f"{'':>14s}"
                                           for t in tools))
    out += ["", "seconds, first run only (the first launch in a fresh process: what a single use costs; the "
                "medians above are of warm runs wherever n > 1)", head, "-" * len(head)]
    for case, row in results.items():
        out.append(f"{case:13s}" + "".join(f"{first(row[t]) if t in row else '-':>14s}" for t in tools))
    titles = {"torch": "ratio to torch eager (all threads)", "plain": "ratio to the plain interpreter (Triton 3.9)",
              "floor": "ratio to the floor (numpy's math + one copy of the values triton_trace recorded)"}
    fmt = lambda x: f"{x:.3g}x" if x < 1000 else f"{x:.0f}x"
    for ref in ("torch", "plain", "floor"):
        if ref not in tools:
            continue
        out += ["", titles[ref], head, "-" * len(head)]
        for case, row in results.items():
            base = med(row.get(ref, {}))
            base_out = bool(row.get(ref, {}).get("timed_out")) and base is None     # the reference timed out
            cells = []
            for t in tools:
                r = row.get(t)
                if r is None:
                    cells.append("-")
                elif not r.get("times"):
                    cells.append("error" if r.get("error") else
                                 (">" + fmt(timeout / base) if base else "?"))
                elif base:
                    cells.append(fmt(med(r) / base) + ("*" if r["timed_out"] else ""))
                elif base_out:          # the reference ran past the timeout: this tool's ratio is below t / timeout
                    cells.append("<" + fmt(med(r) / timeout))
                else:
                    cells.append("?")
            out.append(f"{case:13s}" + "".join(f"{c:>14s}" for c in cells))
    return "\n".join(out)


def _python_share(r: dict):
    """(share of the traced run's time in the Python interpreter, how it was measured), or (None, why not)."""
    perf, cprof = r.get("perf") or {}, r.get("cprofile") or {}
    if "python" in perf:
        return perf["python"], "perf"
    if "python" in cprof:
        return cprof["python"], "cProfile"
    return None, perf.get("error") or "not measured"


def _ops_cells(r: dict) -> str:
    oc = r.get("opcount") or {}
    ops = f"{oc['ops'] / max(oc['launches'], 1):,.0f}" if "ops" in oc else "-"
    share, how = _python_share(r)
    return f"{ops:>12s}" + (f"{share:>8.0%}" + ("" if how == "perf" else "c") if share is not None else f"{'-':>9s}")


def _ops_note(r: dict) -> str:
    oc, perf, cprof = r.get("opcount") or {}, r.get("perf") or {}, r.get("cprofile") or {}
    bits = []
    if "ops" in oc:
        bits.append(f"{oc['ops']:,} builder ops in {oc['launches']} launch(es) (most: "
                    + ", ".join(f"{n[len('create_'):]} {c:,}" for n, c in oc["top"]) + ")")
    if "python" in perf:
        bits.append(f"perf: python {perf['python']:.0%}, native {perf['native']:.0%}, kernel {perf['kernel']:.0%} of "
                    f"the main thread's samples over a {perf['wall']:.3g} s run ("
                    + ", ".join(f"{d} {f:.0%}" for d, f in perf["top"]) + ")")
        if "ops" in oc and oc["ops"]:
            bits.append(f"{perf['python'] * perf['wall'] / oc['ops'] * 1e6:.0f} us of Python per builder op")
    elif perf.get("error"):
        bits.append(f"perf: {perf['error']}")
    if "python" in cprof:
        bits.append(f"cProfile: python {cprof['python']:.0%} (upper bound) of {cprof['profiled']:.3g} s profiled")
    return "; ".join(bits)


def notes(results: dict) -> str:
    out = []
    for case, row in results.items():
        desc = next((r.get("desc") for r in row.values() if r.get("desc")), "")
        out.append(f"{case}: {desc}")
        for t, r in row.items():
            bits = []
            if r.get("error"):
                bits.append(f"failed: {r['error']}")
            if "err" in r:
                bits.append(f"max |err| vs float64 torch {r['err']:.3g}{'' if r.get('ok') else ' (OUT OF TOLERANCE)'}")
            if t == "traced" and "values_bytes" in r:
                bits.append(f"recorded values {r['values_bytes'] / 2 ** 20:.1f} MiB"
                            f"{' (value cap hit)' if r.get('values_truncated') else ''}, lanes {r.get('lanes', 0):,}")
            if t == "traced" and "opcount" in r:
                bits.append(_ops_note(r))
            if t == "floor" and "numpy_s" in r:
                bits.append(f"numpy {r['numpy_s']:.4f} s + copy of {r['values_bytes'] / 2 ** 20:.1f} MiB "
                            f"{r['copy_s']:.4f} s")
            if t == "torch" and "threads" in r:
                bits.append(f"{r['threads']} threads")
            if t == "ttsem" and r.get("races_unchecked"):
                bits.append(f"{r['races_unchecked']} launch(es) too large to be race-checked")
            if len(r.get("times", [])) > 1:
                bits.append("runs " + ", ".join(f"{x:.3g}" for x in r["times"]) + " s")
            if r.get("timed_out"):
                bits.append(f"killed at the timeout after {len(r['times'])} run(s)")
            if bits:
                out.append(f"  {t:12s} " + "; ".join(bits))
    out.append("")
    out += [f"{t}: {text}" for t, text in TOOL_NOTES.items()]
    return "\n".join(out)


def report(header, results, tools, timeout) -> str:
    return "\n".join(["\n".join(header), "", table(results, tools, timeout), "", notes(results)])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--values-bytes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--cases", default=",".join(["add", "softmax", "ln_fwd", "matmul", "attn_causal", "attn",
                                                "ln_bwd", "grouped_gemm"]))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per cell, at most")
    ap.add_argument("--long", type=float, default=20.0, help="a run longer than this many seconds ends the cell")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per cell (child process)")
    ap.add_argument("--json", default=None, help="also write every cell's raw result here")
    ap.add_argument("--from-json", default=None, help="print the tables of a run saved with --json")
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        print(report(saved["header"], saved["results"], saved["tools"], saved["timeout"]))
        return
    if args.child:
        child(args.child, args.cases, args.size, args.seed, args.repeat, args.long, args.values_bytes)
        return
    cases = [c for c in args.cases.split(",") if c]
    tools = [t for t in args.tools.split(",") if t]
    if "floor" in tools and "traced" not in tools:
        raise SystemExit("the floor needs the traced column (the bytes of values it recorded)")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cmd = "python benchmarks/speed/peers.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    header = [f"# {cmd}", f"# started {started}", f"# machine: {machine()}"]
    for venv, v in versions().items():
        header.append(f"# {venv} venv: " + ", ".join(f"{k} {x}" for k, x in v.items() if k != "python_path")
                      + f" ({v['python_path']})")
    header.append(f"# sizes {args.size}, seed {args.seed}, up to {args.repeat} runs per cell (fewer after a "
                  f"run > {args.long:g} s), {FAST_RUNS} for torch and numpy; timeout {args.timeout:g} s per cell")
    print("\n".join(header), flush=True)
    results = {}
    for case in cases:
        row = results.setdefault(case, {})
        for tool in tools:
            vb = row.get("traced", {}).get("values_bytes", 0)
            row[tool] = run_cell(tool, case, args, vb)
            r = row[tool]
            print(f"  {case:13s} {tool:13s} {cell_text(r, args.timeout):>12s}  (wall {r['wall']:.1f} s"
                  f"{'; ' + r['error'] if r.get('error') else ''})", file=sys.stderr, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"header": header, "results": results, "tools": tools, "timeout": args.timeout}, f,
                          indent=1)
    print()
    print(table(results, tools, args.timeout))
    print()
    print(notes(results))
    print(f"\n# finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
