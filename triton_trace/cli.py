"""The ``triton-trace`` command line: run a script with every kernel traced, view a trace, report on one.

Commands are thin: they parse arguments, call the library, and turn user errors into a one-line message
and a non-zero exit status (never a traceback). Flask and the analysis load only in the commands that
need them.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from typing import Optional

EXIT_FINDINGS = 1         # report: the trace has findings
EXIT_USAGE = 2            # every error: bad arguments, a bad or damaged file, a crash
EXIT_INTERRUPTED = 130    # Ctrl-C, as shells report SIGINT


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def _parse_programs(spec: Optional[str]):
    """``"0;1;5"`` or ``"0,0,0;1,2,0"``: program ids separated by ';', coordinates by ','."""
    if not spec:
        return None
    ids = []
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        try:
            coords = tuple(int(v) for v in part.split(","))
        except ValueError:
            raise CliError(f"--programs: '{part}' is not a program id; use e.g. '0;3' or '0,1,0;2,0,0'") from None
        if not 1 <= len(coords) <= 3:
            raise CliError(f"--programs: '{part}' has {len(coords)} coordinates; a program id has 1 to 3")
        if min(coords) < 0:     # a negative id matches no program: the run would silently record nothing
            raise CliError(f"--programs: '{part}' has a negative coordinate; program ids start at 0")
        ids.append(coords + (0,) * (3 - len(coords)))
    return ids


def _load(path: str, trust: bool = False):
    from .errors import TraceFileError
    from .store import load
    if not os.path.exists(path):
        raise CliError(f"{path}: no such trace file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a trace file")
    try:
        return load(path, trust=trust)
    except TraceFileError as e:
        raise CliError(str(e)) from None


# --------------------------------------------------------------------------------------------------------
_RUN_FLAGS = {"-o": "output", "--output": "output", "-k": "kernel", "--kernel": "kernel", "--programs": "programs"}


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


def cmd_run(args) -> int:
    from .model import Trace
    from .record.session import every_launch, reset, trace_all
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
    programs = _parse_programs(args.programs)
    reset()
    status = 0
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script] + list(args.script_args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:        # every launch of the run: a script that resets between its checks keeps its buggy launch
        with every_launch() as launches, trace_all(programs=programs, values=not args.no_values,
                                                   kernels=args.kernel or None, inputs=bool(args.inputs)):
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


def _launch_of(trace, index: int, path: str):
    if not -len(trace.launches) <= index < len(trace.launches):
        raise CliError(f"--launch {index}: {path} holds {len(trace.launches)} launch(es), numbered from 0")
    return trace.launches[index]


def cmd_repro(args) -> int:
    from .errors import TritonTraceError
    trace = _load(args.trace, args.trust)
    launch = _launch_of(trace, args.launch, args.trace)
    index = args.launch + len(trace.launches) if args.launch < 0 else args.launch
    out = args.output or f"repro_{launch.kernel_name}_{index}"
    if os.path.exists(out) and not os.path.isdir(out):
        raise CliError(f"-o {out}: is a file; name a folder to write the reproducer into")
    try:
        script = launch.reproducer(out, data=args.data, index=index)
    except TritonTraceError as e:
        raise CliError(str(e)) from None
    text = open(script, encoding="utf-8").read()
    exact = "exact inputs" if "EXACT = True" in text else "statistical inputs"
    if launch.provenance in ("untrusted", "trusted"):
        print(f"triton-trace: wrote {script} ({exact}) from {args.trace}, a trace file you did not record: its "
              f"kernel code comes from that file. Read the script, then run: python {script} --trust "
              f"[--plain | --gpu]", file=sys.stderr)
    else:
        print(f"triton-trace: wrote {script} ({exact}); run: python {script} [--plain | --gpu]", file=sys.stderr)
    if "'kind': 'out_of_bounds'" in text:      # untraced, those accesses land outside the tensors
        print("triton-trace: the launch accesses memory out of bounds: --plain and --gpu run it only with --force",
              file=sys.stderr)
    return 0


def cmd_ir(args) -> int:
    from .errors import TritonTraceError
    from .view.compiledview import ir_listing
    trace = _load(args.trace, args.trust)
    launch = _launch_of(trace, args.launch, args.trace)
    try:
        compiled = launch.compiled(target=args.target)
        text = json.dumps(compiled.to_dict(), indent=1) if args.json and args.stage == "summary" else \
            "\n".join(ir_listing(launch, compiled, args.stage))
    except TritonTraceError as e:
        raise CliError(str(e)) from None
    print(text)
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def cmd_view(args) -> int:
    trace = _load(args.trace, args.trust)
    from .errors import TraceUsageError
    from .view.server import launch
    try:
        launch(trace=trace, port=args.port, share=args.share, block=True, allowed_hosts=args.allow_host or (),
               compare=_load(args.compare, args.trust) if args.compare else None)
    except TraceUsageError as e:      # e.g. the port is taken; say it in the command line's terms
        raise CliError(str(e).replace("pass another port= or port=None to take a free one",
                                      "pass another --port, or leave it out to take a free one")) from None
    return 0


def cmd_report(args) -> int:
    trace = _load(args.trace, args.trust)
    from .analysis import analyze
    report = analyze(trace)
    text = json.dumps(report.to_dict(), sort_keys=True, indent=1) if args.json else report.summary()
    return _emit(text, EXIT_FINDINGS if report.findings else 0)


def cmd_diff(args) -> int:
    if args.gpu:
        return _diff_gpu(args.gpu)
    if not (args.a and args.b):
        raise CliError("diff takes two trace files (diff a.ttrace b.ttrace), or --gpu SCRIPT [ARGS...]")
    a, b = _load(args.a, args.trust), _load(args.b, args.trust)
    from .analysis.diff import diff
    result = diff(a, b, rtol=args.rtol, atol=args.atol, analyze=not args.outputs_only)
    text = json.dumps(result.to_dict(), sort_keys=True, indent=1) if args.json else result.summary()
    return _emit(text, EXIT_FINDINGS if result.outputs_differ else 0)


def _diff_gpu(argv: list) -> int:
    """Run a script with every Triton launch on CUDA tensors compared against its trace first."""
    import torch
    if not torch.cuda.is_available():
        raise CliError("diff --gpu runs the script's kernels on a GPU, and torch.cuda.is_available() is False here")
    if not argv or not os.path.isfile(argv[0]):
        raise CliError(f"diff --gpu {argv[0] if argv else ''}: no such script")
    from .gpucheck import compare_all
    script = argv[0]
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = 0
    try:
        with compare_all() as results:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    bad = [r for r in results if not r.ok]
    print(f"triton-trace: {len(results)} launch(es) compared, {len(bad)} differ", file=sys.stderr)
    return _emit("\n".join(r.summary() for r in results), EXIT_FINDINGS if bad else status)


def _emit(text: str, status: int) -> int:
    """Print ``text`` and return ``status``, also when the reader left early (``| head``, ``| grep -q``): a CI
    gate reads the findings from the status."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    return status


def _drop_stdout() -> None:
    """Point stdout at devnull: the interpreter's last flush would fail again and exit 120."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# --------------------------------------------------------------------------------------------------------
def _trust_flag(parser) -> None:
    parser.add_argument("--trust", action="store_true",
                        help="the trace file is one you trust: compile (and let a reproducer run) its kernel code, "
                             "which must still pass the Triton-language allowlist. Files you saved yourself are "
                             "trusted already (signed with your local key); others are data: their compiled "
                             "layouts are skipped")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="triton-trace", description="Trace, analyse and view Triton kernels on the CPU.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

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
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("view", help="serve a saved trace in the web UI",
                       usage="triton-trace view TRACE [--port N] [--share [--allow-host NAME]] [--compare TRACE]",
                       description="Serve a saved trace in the web UI until Ctrl-C.")
    v.add_argument("trace", help="a .ttrace file")
    v.add_argument("--port", type=_port, default=None, help="port (default 5001, or the next free one)")
    v.add_argument("--share", action="store_true",
                   help="listen on all interfaces, protected by an access token in the printed URL")
    v.add_argument("--allow-host", action="append", metavar="NAME",
                   help="with --share, also answer to this host name (a DNS name or proxy in front of this "
                        "machine; repeatable). Its own names and IP addresses are always allowed")
    v.add_argument("--compare", metavar="TRACE", help="a second trace of the same kernels: the tensor view "
                                                       "can show where their outputs differ")
    _trust_flag(v)
    v.set_defaults(func=cmd_view)

    rp = sub.add_parser("report", help="print the metrics and findings of a saved trace",
                        description="Print the metrics and findings of a saved trace. Exit status 1 when "
                                    "there are findings, 2 for any error (a bad or damaged file, a crash), "
                                    "0 when clean, so it can gate CI.")
    rp.add_argument("trace", help="a .ttrace file")
    rp.add_argument("--json", action="store_true", help="print the report's JSON instead of a table")
    _trust_flag(rp)
    rp.set_defaults(func=cmd_report)

    d = sub.add_parser("diff", help="compare two traces of the same kernels (outputs, metrics, findings)",
                       description="Compare two saved traces of the same kernels (before and after a fix, two "
                                   "configs, two Triton releases): the output elements whose final values "
                                   "differ, with the program, op and line that wrote each on both sides; the "
                                   "metrics that changed; the findings that appeared or disappeared. Exit "
                                   "status 1 when outputs differ, 2 for any error, 0 when they agree. With "
                                   "--gpu SCRIPT: the script's launches, GPU against trace.")
    d.add_argument("a", nargs="?", help="the first .ttrace file")
    d.add_argument("b", nargs="?", help="the second .ttrace file")
    d.add_argument("--gpu", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                   help="instead: run SCRIPT with every Triton launch on CUDA tensors compiled on the GPU and "
                        "traced on CPU copies of the same inputs, and report the outputs that differ "
                        "(triton_trace.compare); needs CUDA")
    d.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    d.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: bit-equal values)")
    d.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0)")
    d.add_argument("--outputs-only", action="store_true", help="skip the analysis (metrics and findings)")
    _trust_flag(d)
    d.set_defaults(func=cmd_diff)

    rr = sub.add_parser("repro", help="write a standalone reproducer script of one launch of a saved trace",
                        description="Write a folder with launch.py (the kernel, its helpers, every argument, the grid "
                                    "and a check of the outputs) and launch_data.npz. Run it as: python launch.py "
                                    "[--plain | --gpu].")
    rr.add_argument("trace", help="a .ttrace file")
    rr.add_argument("--launch", type=int, default=0, help="which launch (0 is the first, -1 the last; default 0)")
    rr.add_argument("-o", "--output", help="folder to write (default: repro_KERNEL_N)")
    rr.add_argument("--data", choices=("auto", "exact", "stats"), default="auto",
                    help="exact: the inputs kept by 'run --inputs' / trace(inputs=True); stats: random inputs with "
                         "the recorded statistics; auto (default): exact when kept")
    _trust_flag(rr)
    rr.set_defaults(func=cmd_repro)

    ir = sub.add_parser("ir", help="compile a traced launch for a GPU target here (no GPU needed) and print its IR",
                        description="Compile the kernel as the launch would be on a GPU, and print the IR with the "
                                    "source line of each IR line, or a summary of its memory ops and resources.")
    ir.add_argument("trace", help="a .ttrace file")
    ir.add_argument("--launch", type=int, default=0, help="which launch (default 0)")
    ir.add_argument("--target", default="sm_90", help="sm_80, sm_90, sm_100, ... or a GPU name (A100, H200, B200)")
    ir.add_argument("--stage", choices=("summary", "ttir", "ttgir", "llir", "ptx"), default="summary")
    ir.add_argument("--json", action="store_true", help="with --stage summary: print JSON")
    _trust_flag(ir)
    ir.set_defaults(func=cmd_ir)

    # listed for --help only: main() hands 'pytest' and everything after it to pytest untouched, since
    # pytest's arguments (-k, -x, -n, a suite's own options) are not ours to parse
    sub.add_parser("pytest", help="run a test suite written for the GPU, unchanged, on this CPU, every kernel "
                                  "traced and checked (triton-trace pytest -h)", add_help=False)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["pytest"]:
        from .suite.command import main as pytest_main
        return pytest_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CliError as e:
        print(f"triton-trace: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:       # view, ir, repro: their output is the result; a reader that left wants no more
        _drop_stdout()
        return 0
    except KeyboardInterrupt:
        print("triton-trace: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a crash must not read as "findings" (exit 1) to a CI gate
        if os.environ.get("TRITON_TRACE_DEBUG"):
            raise
        print(f"triton-trace: error: {type(e).__name__}: {e} (set TRITON_TRACE_DEBUG=1 for the traceback; "
              f"this is a bug in triton-trace, please report it)", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
