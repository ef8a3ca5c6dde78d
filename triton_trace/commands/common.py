"""What every command shares: exit statuses, the one-line user error, loading a trace file, printing."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

EXIT_FINDINGS = 1         # report: the trace has findings
EXIT_USAGE = 2            # every error: bad arguments, a bad or damaged file, a crash
EXIT_INTERRUPTED = 130    # Ctrl-C, as shells report SIGINT


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def parse_programs(spec: Optional[str]):
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


def load(path: str, trust: bool = False):
    from ..errors import TraceFileError
    from ..store.tracefile import load
    if not os.path.exists(path):
        raise CliError(f"{path}: no such trace file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a trace file")
    try:
        return load(path, trust=trust)
    except TraceFileError as e:
        raise CliError(str(e)) from None


def launch_of(trace, index: int, path: str):
    if not -len(trace.launches) <= index < len(trace.launches):
        raise CliError(f"--launch {index}: {path} holds {len(trace.launches)} launch(es), numbered from 0")
    return trace.launches[index]


def port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def emit(text: str, status: int) -> int:
    """Print ``text`` and return ``status``, also when the reader left early (``| head``, ``| grep -q``): a CI
    gate reads the findings from the status."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
    return status


def drop_stdout() -> None:
    """Point stdout at devnull: the interpreter's last flush would fail again and exit 120."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def trust_flag(parser) -> None:
    parser.add_argument("--trust", action="store_true",
                        help="the trace file is one you trust: compile (and let a reproducer run) its kernel code, "
                             "which must still pass the Triton-language allowlist. Files you saved yourself are "
                             "trusted already (signed with your local key); others are data: their compiled "
                             "layouts are skipped")


def analysis_flags(parser) -> None:
    """The analysis options a command that analyses passes on (the same as ``analyze(...)``'s)."""
    parser.add_argument("--gpu", default=None, help="GPU modelled (L2, SMs, roofline): A100, H100, H200, B200")
    parser.add_argument("--l2-kib", type=int, default=None, help="simulated L2 size in KiB (default: the GPU's)")
    parser.add_argument("--in-flight", type=int, default=None,
                        help="programs the GPU runs at once (default: from its SMs and occupancy)")
    parser.add_argument("--what-if", action="store_true",
                        help="replay other GROUP_M, GPUs and num_warps for the hints")


def analysis_options(args) -> dict:
    options = {}
    if args.gpu:
        options["gpu"] = args.gpu
    if args.l2_kib:
        options["l2_bytes"] = args.l2_kib * 1024
    if args.in_flight:
        options["programs_in_flight"] = args.in_flight
    if args.what_if:
        options["what_if"] = True
    return options
