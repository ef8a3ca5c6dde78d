"""Launch by launch: every kernel launch of Triton's language tests, on the GPU and traced, compared bit for bit.

    PYTHONPATH=. python3 benchmarks/fidelity/launches.py --out OUT [--workers 16] [--budget 420] [-k EXPR]
    PYTHONPATH=. python3 benchmarks/fidelity/launches.py --out OUT --reference interpreter -k "test_bin_op and int32"

Runs the vendored release-3.6 suite (tests/triton_suite/release-3.6) with ``launch_plugin``: each launch
runs compiled on the GPU, as the test made it, and is traced with triton_trace on CPU copies of the
inputs it started from; every output is compared bit for bit (launch_table.py says how a launch is
classed). ``--reference interpreter`` compares with Triton's plain interpreter instead of the GPU, on a
machine without one (a dry run of the whole pipeline, and a check that tracing is bit-exact with the
interpreter it wraps). ``--budget`` seconds after the start no new test begins (the tests are shuffled,
so the cut takes every op class alike) and the table counts the tests it left out. Writes OUT/table.md,
OUT/summary.json (counts, rows, every mismatch class with examples), OUT/launches.jsonl.gz (every launch)
and OUT/pytest.log; prints the table.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
UNIT = ROOT / "tests" / "triton_suite" / "release-3.6" / "python" / "test" / "unit"
# the files Triton's CI runs under its interpreter
FILES = ["language/test_core.py", "language/test_standard.py", "language/test_random.py",
         "language/test_block_pointer.py", "language/test_tuple.py"]
sys.path.insert(0, str(HERE))

import launch_table  # noqa: E402


def plugin_command(args, log: str, deadline: float) -> list:
    """pytest with launch_plugin and the options every suite shares (workers, limits, -k)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "launch_plugin",
           f"--lf-log={log}", f"--lf-reference={args.reference}", f"--lf-deadline={deadline}",
           f"--lf-numerics={args.numerics}",
           f"--lf-shuffle={args.seed}", "-o", "addopts=", "-rfE", "--tb=line"]
    if args.workers > 1:
        cmd += ["-n", str(args.workers)]
    if args.timeout and importlib.util.find_spec("pytest_timeout"):
        cmd += [f"--timeout={args.timeout}"]
    if args.k:
        cmd += ["-k", args.k]
    return cmd


def pytest_command(args, log: str, deadline: float) -> list:
    cmd = plugin_command(args, log, deadline)
    if args.reference == "gpu":
        cmd += ["--device=cuda"]
    else:
        cmd += ["--device=cpu", "-m", "interpreter"]
    return cmd + list(args.pytest_args) + list(args.files)


def environment(args, paths=(), interpret: bool = True) -> dict:
    """The test processes' environment: this repository, this folder and ``paths`` importable; with
    ``interpret`` (and the interpreter as the reference) TRITON_INTERPRET=1."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), *map(str, paths),
                                           os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # one BLAS thread per pytest worker: the workers already fill the cores
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TRITON_TRACE_THREADS"):
        env.setdefault(var, "1" if args.workers > 1 else env.get(var, "1"))
    if args.reference == "interpreter" and interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def machine() -> dict:
    import numpy
    import torch
    import triton
    info = {"python": platform.python_version(), "triton": triton.__version__, "torch": torch.__version__,
            "numpy": numpy.__version__, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["capability"] = list(torch.cuda.get_device_capability(0))
    return info


def _pytest(cmd: list, cwd, env: dict, limit: float) -> subprocess.CompletedProcess:
    """pytest in its own process group; past ``limit`` seconds (0: none) the group is killed, workers too, and
    what it printed so far is kept (the launches it logged stay in the log files)."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=limit or None)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        stderr += f"\n[launches.py: pytest stopped at the {limit:.0f} s limit; the launches compared until then are kept]\n"
    return subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)


def run_suite(cmd: list, cwd, env: dict, out: Path, title: str, command: str, limit: float = 0.0) -> tuple:
    """Run one pytest command with the plugin and write OUT's files (table.md, summary.json,
    launches.jsonl.gz, pytest.log); (summary, table text, pytest's output)."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "launches")
        cmd = [a.replace("{LOG}", log) for a in cmd]
        proc = _pytest(cmd, cwd, env, limit)
        wall = time.time() - start
        launches, cut = launch_table.read_logs(sorted(Path(tmp).glob("launches.*")))
    (out / "pytest.log").write_text(proc.stdout[-400_000:] + "\n" + proc.stderr[-100_000:])
    with gzip.open(out / "launches.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in launches)
    summary = launch_table.summarize(launches, cut)
    summary.update(machine=machine(), command=command, wall_s=round(wall, 1), pytest_returncode=proc.returncode,
                   pytest_tail=(proc.stdout + proc.stderr)[-1500:])
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    m = summary["machine"]
    header = (f"# {title}\n\n`{command}` on {m.get('gpu', 'CPU')} "
              f"({m['cpus']} cores), Triton {m['triton']}, torch {m['torch']}, numpy {m['numpy']}, {m['date']}; "
              f"{summary['wall_s']} s, pytest exit {proc.returncode}.")
    text = launch_table.markdown(summary, header)
    (out / "table.md").write_text(text)
    return summary, text, proc.stdout + proc.stderr


def command_line(script: str, argv) -> str:
    return "PYTHONPATH=. python3 " + " ".join([str(Path(script).resolve().relative_to(ROOT))] +
                                              (argv if argv is not None else sys.argv[1:]))


def gpu_missing(args) -> bool:
    if args.reference == "gpu":
        import torch
        if not torch.cuda.is_available():
            print("no CUDA GPU here; --reference interpreter runs the same pipeline on the CPU")
            return True
    return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    add_common_options(ap)
    ap.add_argument("--files", nargs="+", default=FILES, help="test files, relative to the suite's unit folder")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args(argv)
    if gpu_missing(args):
        return 2
    start = time.time()
    cmd = pytest_command(args, "{LOG}", start + args.budget if args.budget else 0.0)
    summary, text, output = run_suite(cmd, UNIT, environment(args), Path(args.out),
                                      f"Launch by launch: {args.reference} vs trace", command_line(__file__, argv),
                                      args.limit)
    print(text)
    print(output[-1500:] if not summary["launches"] else output.strip().splitlines()[-1])
    # pytest's own exit status (failing tests of the suite) is not the comparison's: 0 means launches were
    # compared; a run that compared none (a collection error, a broken plugin) is a failure
    return 0 if summary["launches"] else 1


def add_common_options(ap) -> None:
    ap.add_argument("--reference", choices=("gpu", "interpreter"), default="gpu")
    ap.add_argument("--numerics", choices=("interpreter", "compiled"), default="interpreter",
                    help="the trace's numerics: as Triton's interpreter, or as the compiled kernel (trace(numerics=...))")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--budget", type=float, default=0.0, help="seconds after which no new test starts (0: none)")
    ap.add_argument("--seed", type=int, default=0, help="the shuffle of the test order")
    ap.add_argument("--timeout", type=int, default=0, help="per-test limit in seconds (where pytest-timeout is installed)")
    ap.add_argument("--limit", type=float, default=0.0,
                    help="seconds after which pytest is stopped, the launches compared so far kept (0: none)")
    ap.add_argument("-k", default=None, help="pytest -k expression")


if __name__ == "__main__":
    sys.exit(main())
