"""The ``triton-trace`` command line: run a script with every kernel traced, view a trace, report on one.

Commands are thin (triton_trace/commands/, one module each): they parse arguments, call the library, and
turn user errors into a one-line message and a non-zero exit status (never a traceback). Nothing heavy loads
before a command runs: ``--help`` imports no torch, Triton, Flask or analysis.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .commands import COMMANDS, common
from .commands.common import EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_USAGE  # noqa: F401  (the statuses callers test)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="triton-trace", description="Trace, analyse and view Triton kernels on the CPU.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"triton_trace.commands.{name}").add_parser(sub)
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
    except common.CliError as e:
        print(f"triton-trace: error: {e}", file=sys.stderr)
        return common.EXIT_USAGE
    except BrokenPipeError:       # view, ir, repro: their output is the result; a reader that left wants no more
        common.drop_stdout()
        return 0
    except KeyboardInterrupt:
        print("triton-trace: interrupted", file=sys.stderr)
        return common.EXIT_INTERRUPTED
    except Exception as e:  # a crash must not read as "findings" (exit 1) to a CI gate
        if os.environ.get("TRITON_TRACE_DEBUG"):
            raise
        print(f"triton-trace: error: {type(e).__name__}: {e} (set TRITON_TRACE_DEBUG=1 for the traceback; "
              f"this is a bug in triton-trace, please report it)", file=sys.stderr)
        return common.EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
