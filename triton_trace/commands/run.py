"""``triton-trace run SCRIPT``: run an unmodified script with every Triton kernel it launches traced, save the trace."""
from __future__ import annotations

import argparse
import os
import runpy
import sys

from .common import EXIT_INTERRUPTED, CliError, parse_programs


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="run a Python script with every Triton kernel it launches traced",
                       description="Run an unmodified script with every Triton kernel it launches traced "
                                   "through the interpreter (no decorator needed), then save the trace. "
                                   "triton-trace's options may come before or after the script "
                                   "(run script.py ARGS -o out.ttrace); script arguments after '--' are "
                                   "passed through untouched.")
    r.add_argument("script", help="the Python script to run")
    r.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    r.add_argument("-o", "--output", help="trace file to write (default: SCRIPT.ttrace in the current folder)")
    r.add_argument("-k", "--kernel", action="append", metavar="NAME",
                   help="trace only kernels with this name (repeatable); others run untraced")
    r.add_argument("--programs", metavar="IDS", help="record only these programs, e.g. '0;3' or '0,1,0;2,0,0'")
    r.add_argument("--no-values", action="store_true", help="do not record loaded/stored values")
    r.add_argument("--inputs", action="store_true",
                   help="keep every launch's input storages (up to 1 GiB each) for exact reproducers (repro)")
    r.add_argument("--numerics", choices=("interpreter", "compiled"), default="interpreter",
                   help="compute as Triton's interpreter (default) or as the compiled kernel does where that is "
                        "deterministic (a*b+c as one FMA, fp32 tl.dot inputs read as TF32)")
    r.set_defaults(func=run)


_RUN_FLAGS = {"-o": "output", "--output": "output", "-k": "kernel", "--kernel": "kernel", "--programs": "programs",
              "--numerics": "numerics"}


def _split_run_args(args) -> None:
    """Take triton-trace's own options out of the script's arguments: the issue's form is
    ``run script.py [args...] -o out.ttrace``. Everything after ``--`` goes to the script untouched."""
    rest, theirs = list(args.script_args), []
    while rest:
        tok = rest.pop(0)
        if tok == "--":
            theirs += rest
            break
        name, eq, value = tok.partition("=")
        if name in _RUN_FLAGS:
            if not eq:
                if not rest:
                    raise CliError(f"{name} needs a value")
                value = rest.pop(0)
            dest = _RUN_FLAGS[name]
            if dest == "kernel":
                args.kernel = (args.kernel or []) + [value]
            else:
                setattr(args, dest, value)
        elif tok == "--no-values":
            args.no_values = True
        elif tok == "--inputs":
            args.inputs = True
        else:
            theirs.append(tok)
    args.script_args = theirs
    if args.numerics not in ("interpreter", "compiled"):
        raise CliError(f"--numerics is 'interpreter' or 'compiled', not {args.numerics!r}")


def run(args) -> int:
    from ..model import Trace
    from ..record.session import every_launch, reset, trace_all
    _split_run_args(args)
    script = args.script
    if not os.path.isfile(script):
        raise CliError(f"{script}: no such script")
    out = args.output or os.path.splitext(os.path.basename(script))[0] + ".ttrace"
    out_dir = os.path.dirname(os.path.abspath(out))
    # checked before the script runs: finding out when saving would throw away a long run's trace
    if not os.path.isdir(out_dir):
        raise CliError(f"-o {out}: the folder {out_dir} does not exist")
    if os.path.isdir(out):
        raise CliError(f"-o {out}: is a folder; name the trace file to write, e.g. {os.path.join(out, 'out.ttrace')}")
    if not os.access(out_dir, os.W_OK):
        raise CliError(f"-o {out}: cannot write to the folder {out_dir}")
    programs = parse_programs(args.programs)
    reset()
    status = 0
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script] + list(args.script_args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:        # every launch of the run: a script that resets between its checks keeps its buggy launch
        with every_launch() as launches, trace_all(programs=programs, values=not args.no_values,
                                                   kernels=args.kernel or None, inputs=bool(args.inputs),
                                                   numerics=args.numerics):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        print("triton-trace: interrupted; saving what was recorded", file=sys.stderr)
        status = EXIT_INTERRUPTED
    except Exception as e:  # the user's script failed: keep the trace, report the error in one line
        print(f"triton-trace: {script} raised {type(e).__name__}: {e}", file=sys.stderr)
        status = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    trace = Trace(tuple(launches))
    try:
        trace.save(out)           # written to a temporary file and renamed: never a partial trace file
    except OSError as e:
        raise CliError(f"cannot write the trace to {out} ({e.strerror or e})") from None
    except KeyboardInterrupt:
        print(f"triton-trace: interrupted while saving; {out} was not written", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"triton-trace: saved {len(trace.launches)} launch(es) of "
          f"{', '.join(trace.kernels()) or 'no kernels'} to {out}", file=sys.stderr)
    return status
