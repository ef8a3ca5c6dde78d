"""Run Triton's own interpreter language tests plain and traced, and compare them test by test.

    python tests/triton_suite/run_suite.py [--every N] [--workers N] [--out DIR] [--python PY]

Both runs use the vendored suite (release-3.6/, Triton's tests at the 3.6.0 release) the way Triton's CI
runs it on the CPU (``TRITON_INTERPRET=1 pytest -m interpreter --device=cpu``); the traced run loads
``tt_suite_plugin``, which wraps every test's call in ``triton_trace.trace_all()``. The report lists:
tests that pass plain and fail traced (each must be explained in DIFFERENCES.md, else the exit status is 1;
on Triton 3.6, the suite's release, also the tests the tracer fixed in the committed whole-suite run:
they stay fixed),
tests the tracer fixes, how many traced tests really launched kernels through the tracer, and the median
per-test time ratio traced / plain. ``--workers`` runs each pass under pytest-xdist.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
UNIT = HERE / "release-3.6" / "python" / "test" / "unit"
FILES = ["language/test_core.py", "language/test_standard.py", "language/test_random.py",
         "language/test_block_pointer.py", "language/test_tuple.py"]
SUITE_RELEASE = "3.6."  # the release the vendored tests come from
RESULTS = HERE.parents[1] / "benchmarks" / "suites" / "triton_suite"     # the measured runs (on_gpu_machine.sh)
MIN_TIME = 0.005        # tests faster than this (plain) are left out of the time ratio: timer noise


def run_pass(mode: str, args, out: Path) -> dict:
    xml, log = out / f"{mode}.xml", out / f"{mode}.log"
    for old in [xml, *out.glob(f"{mode}.log.*")]:
        old.unlink(missing_ok=True)
    cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tt_suite_plugin",
           f"--tt-mode={mode}", f"--tt-every={args.every}", f"--tt-offset={args.offset}", f"--tt-log={log}",
           "-m", "interpreter", "--device=cpu", f"--junitxml={xml}", "-o", "junit_family=xunit1",
           *(["-n", str(args.workers)] if args.workers > 1 else []), *args.pytest_args, *FILES]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=UNIT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (out / f"{mode}.stdout").write_text(proc.stdout[-200_000:] + proc.stderr[-50_000:])
    tests = parse_junit(xml) if xml.exists() else {}
    launches = {}
    for part in out.glob(f"{mode}.log.*"):
        for line in part.read_text().splitlines():
            rec = json.loads(line)
            launches[rec["nodeid"]] = rec["launches"]
        part.unlink()           # folded into the summary; one file per worker would clutter the output
    return {"mode": mode, "returncode": proc.returncode, "wall_s": wall, "tests": tests, "launches": launches,
            "tail": (proc.stdout + proc.stderr)[-3000:]}


def parse_junit(path: Path) -> dict:
    """nodeid -> (outcome, seconds, message) for every test case in a junit file."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        nodeid = f"{file}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "")[:300]
                break
            if child.tag == "skipped":
                outcome = "skipped"
        out[nodeid] = (outcome, float(case.get("time") or 0.0), message)
    return out


def explained() -> dict:
    """Tests whose traced result legitimately differs from the plain interpreter: DIFFERENCES.md rows."""
    rows = {}
    for line in (HERE / "DIFFERENCES.md").read_text().splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1]
    return rows


def must_stay_fixed() -> set:
    """Tests that fail plain and pass traced on the GPU machine's whole run (RESULTS): they must keep
    passing traced. Other plain failures can depend on the machine (a CPU-only torch build fails
    test_zero_strided_tensors in its own code) and are not the tracer's to fix."""
    path = RESULTS / "gpu_machine_3.6.json"
    return set(json.loads(path.read_text())["fixed"]) if path.exists() else set()


def compare(plain: dict, traced: dict, strict: bool) -> dict:
    p, t = plain["tests"], traced["tests"]
    common = sorted(set(p) & set(t))
    # strict (the suite's own release): the tests the tracer fixes stay fixed. On later releases some of
    # these tests fail plain for reasons of their own (block pointers were removed in 3.9): there a
    # regression is a test that passes plain only.
    fixed_before = must_stay_fixed() if strict else set()
    regress = [n for n in common if (n in fixed_before and t[n][0] == "failed") or
               (p[n][0] == "passed" and t[n][0] != "passed")]
    fixed = [n for n in common if p[n][0] == "failed" and t[n][0] == "passed"]
    ratios = [t[n][1] / p[n][1] for n in common
              if p[n][0] == t[n][0] == "passed" and p[n][1] >= MIN_TIME and t[n][1] > 0]
    allowed = explained()
    traced_ok = [n for n in common if t[n][0] == "passed"]
    return {
        "collected": len(common),
        "plain": {k: sum(1 for n in common if p[n][0] == k) for k in ("passed", "failed", "skipped")},
        "traced": {k: sum(1 for n in common if t[n][0] == k) for k in ("passed", "failed", "skipped")},
        "regressions": {n: t[n][2] for n in regress if n not in allowed},
        "explained": {n: allowed[n] for n in regress if n in allowed},
        "fixed": fixed,
        "median_time_ratio": statistics.median(ratios) if ratios else None,
        "timed_tests": len(ratios),
        "traced_tests_with_launches": sum(1 for n in traced_ok if traced["launches"].get(n, 0) > 0),
        "traced_passed": len(traced_ok),
        "wall_s": {"plain": round(plain["wall_s"], 1), "traced": round(traced["wall_s"], 1)},
        "returncode": {"plain": plain["returncode"], "traced": traced["returncode"]},
    }


def markdown(s: dict, args) -> str:
    import triton
    lines = [f"# Triton's language tests, plain vs traced (Triton {triton.__version__}, every {args.every}th test, "
             f"{args.workers} worker(s))", "",
             "| | collected | passed | failed | skipped | wall s |", "|---|---:|---:|---:|---:|---:|"]
    for mode in ("plain", "traced"):
        c = s[mode]
        lines.append(f"| {mode} | {s['collected']} | {c['passed']} | {c['failed']} | {c['skipped']} | "
                     f"{s['wall_s'][mode]} |")
    ratio = s["median_time_ratio"]
    lines += ["", "- fail traced where they passed plain or were fixed before, unexplained: "
              f"**{len(s['regressions'])}**",
              f"- fail traced, explained in DIFFERENCES.md: {len(s['explained'])}",
              f"- fail plain, pass traced (the tracer fixes them): {len(s['fixed'])}",
              f"- traced tests that passed and launched kernels through the tracer: "
              f"{s['traced_tests_with_launches']} of {s['traced_passed']}",
              f"- median per-test time traced / plain over {s['timed_tests']} tests passing both (plain >= "
              f"{MIN_TIME * 1000:.0f} ms): " + (f"{ratio:.2f}" if ratio is not None else "n/a")]
    for n, msg in sorted(s["regressions"].items()):
        lines.append(f"  - REGRESSION `{n}`: {msg}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default="test-output/triton_suite")
    ap.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                    help="count every traced failure (default: on the suite's own release, 3.6)")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plain = run_pass("plain", args, out)
    traced = run_pass("traced", args, out)
    import triton
    strict = args.strict if args.strict is not None else triton.__version__.startswith(SUITE_RELEASE)
    s = compare(plain, traced, strict)
    (out / "summary.json").write_text(json.dumps(s, indent=1, sort_keys=True))
    text = markdown(s, args)
    (out / "summary.md").write_text(text)
    print(text)
    bad = bool(s["regressions"]) or s["collected"] == 0 or s["traced_tests_with_launches"] == 0
    for mode, res in (("plain", plain), ("traced", traced)):
        if res["returncode"] not in (0, 1):       # a crash, an internal error, or nothing collected
            print(f"{mode} pass: pytest exited with {res['returncode']}\n{res['tail']}")
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
