"""A slice of Triton's own language tests, plain and traced: where the traced suite's extra seconds go.

    python benchmarks/speed/bench_suite_slice.py [--every 10] [--offset 0] [--workers 1]
                                                 [--baseline DIR] [--json out.json] [-- PYTEST ARGS]

Runs the vendored release-3.6 suite (tests/triton_suite) the way Triton's CI runs it on the CPU
(``TRITON_INTERPRET=1 pytest -m interpreter --device=cpu``) keeping every Nth collected test (a
deterministic sample over all op classes), once plain and once with every test's launches traced
(tt_suite_plugin's ``--tt-mode=traced``), and reads each test's seconds from pytest's junit file.
``--baseline DIR`` adds a third pass, traced by the triton_trace package found in DIR (e.g. a
``git archive`` of an earlier commit), so before and after are measured in one run on one machine;
``--candidate DIR`` traces the "traced" pass with DIR's package instead of this checkout's.

Prints, per mode, the sum of test times and the wall time, the ratio of the sums to plain, and the 20
tests with the most excess seconds (traced - plain). Use the Python of the Triton to measure (the
``.venv-triton36`` venv: the suite's release). Nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "triton_suite"
sys.path.insert(0, str(SUITE))
from run_suite import FILES, UNIT, parse_junit  # noqa: E402  (the suite runner's own junit reading)

TOP = 20


def run_mode(label: str, tt_mode: str, src: Path, args, out: Path) -> dict:
    """One pytest pass over the slice; ``src`` is the folder whose triton_trace package is imported."""
    xml = out / f"{label}.xml"
    cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tt_suite_plugin",
           f"--tt-mode={tt_mode}", f"--tt-every={args.every}", f"--tt-offset={args.offset}",
           "-m", "interpreter", "--device=cpu", f"--junitxml={xml}", "-o", "junit_family=xunit1",
           *(["-n", str(args.workers)] if args.workers > 1 else []), *args.pytest_args, *args.files]
    path = [str(SUITE), str(src), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join(p for p in path if p))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=UNIT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / f"{label}.stdout").write_text(proc.stdout[-100_000:] + proc.stderr[-20_000:])
    if proc.returncode not in (0, 1) or not xml.exists():
        sys.exit(f"{label}: pytest exited with {proc.returncode}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return {"label": label, "wall_s": wall, "tests": parse_junit(xml)}


def summarize(passes: list) -> dict:
    """Sums over the tests with the same outcome in every pass (a test failing in one pass would compare
    a traceback's seconds with a test's), and the per-test excess over plain."""
    plain = passes[0]["tests"]
    common = [n for n in plain if all(n in p["tests"] and p["tests"][n][0] == plain[n][0] for p in passes[1:])]
    out = {"tests": len(common), "modes": {}}
    for p in passes:
        t = p["tests"]
        ratios = [t[n][1] / plain[n][1] for n in common if plain[n][0] == "passed" and plain[n][1] >= 0.005]
        out["modes"][p["label"]] = {
            "sum_s": sum(t[n][1] for n in common), "wall_s": p["wall_s"],
            "outcomes": {k: sum(1 for n in common if t[n][0] == k) for k in ("passed", "failed", "skipped")},
            "median_ratio": statistics.median(ratios) if ratios else None,
            "excess": sorted(((t[n][1] - plain[n][1], n, plain[n][1], t[n][1]) for n in common), reverse=True)}
    differ = sorted(set(plain) - set(common))
    out["outcome_differs"] = {n: [p["tests"].get(n, ("absent",))[0] for p in passes] for n in differ}
    return out


def report(s: dict) -> str:
    plain = s["modes"]["plain"]["sum_s"]
    lines = [f"{s['tests']} tests with the same outcome in every pass",
             f"{'mode':<16}{'sum of tests s':>15}{'wall s':>9}{'sum/plain':>10}{'median/plain':>13}  outcomes"]
    for label, m in s["modes"].items():
        med = f"{m['median_ratio']:.2f}" if m["median_ratio"] is not None else "-"
        lines.append(f"{label:<16}{m['sum_s']:>15.1f}{m['wall_s']:>9.1f}{m['sum_s'] / plain:>10.2f}{med:>13}  "
                     + " ".join(f"{k} {v}" for k, v in m["outcomes"].items()))
    for label, m in s["modes"].items():
        if label == "plain":
            continue
        total = m["sum_s"] - plain
        top = m["excess"][:TOP]
        share = sum(e[0] for e in top)
        lines += ["", f"top {TOP} tests by excess seconds, {label} - plain (they carry {share:.1f} of {total:.1f} s):",
                  f"{'excess s':>9}{'plain s':>9}{label + ' s':>18}  test"]
        lines += [f"{e:>9.2f}{p:>9.2f}{t:>18.2f}  {n.split('::', 1)[-1]}" for e, n, p, t in top]
    if s["outcome_differs"]:
        lines += ["", f"left out, outcome differs between passes ({len(s['outcome_differs'])}):"]
        lines += [f"  {n.split('::', 1)[-1]}: {'/'.join(o)}" for n, o in sorted(s["outcome_differs"].items())[:20]]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--files", nargs="+", default=FILES, help="test files under the suite's unit/ folder")
    ap.add_argument("--baseline", type=Path, help="a folder holding an earlier triton_trace package")
    ap.add_argument("--candidate", type=Path, default=ROOT, help="the folder whose triton_trace the traced pass "
                                                                 "imports (default: this checkout)")
    ap.add_argument("--json", type=Path, help="write the per-test times of every pass here")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --), e.g. -k dot")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        passes = [run_mode("plain", "plain", ROOT, args, out)]
        if args.baseline:
            passes.append(run_mode("traced-before", "traced", args.baseline.resolve(), args, out))
        passes.append(run_mode("traced", "traced", args.candidate.resolve(), args, out))
    s = summarize(passes)
    import triton
    print(f"# every {args.every}th test (offset {args.offset}) of {' '.join(args.files)}, {args.workers} worker(s), "
          f"extra pytest args {args.pytest_args}; triton {triton.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; traced: {args.candidate}, traced-before: {args.baseline}")
    print(report(s))
    if args.json:
        args.json.write_text(json.dumps({p["label"]: p for p in passes}, indent=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
