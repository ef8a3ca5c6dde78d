"""``triton-trace diff A B`` (two traces) or ``diff --gpu SCRIPT`` (GPU launches against their traces)."""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys

from .common import EXIT_FINDINGS, CliError, emit, load, trust_flag


def add_parser(sub) -> None:
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
    trust_flag(d)
    d.set_defaults(func=run)


def run(args) -> int:
    if args.gpu:
        return _diff_gpu(args.gpu)
    if not (args.a and args.b):
        raise CliError("diff takes two trace files (diff a.ttrace b.ttrace), or --gpu SCRIPT [ARGS...]")
    a, b = load(args.a, args.trust), load(args.b, args.trust)
    from ..analysis.diff import diff
    result = diff(a, b, rtol=args.rtol, atol=args.atol, analyze=not args.outputs_only)
    text = json.dumps(result.to_dict(), sort_keys=True, indent=1) if args.json else result.summary()
    return emit(text, EXIT_FINDINGS if result.outputs_differ else 0)


def _diff_gpu(argv: list) -> int:
    """Run a script with every Triton launch on CUDA tensors compared against its trace first."""
    import torch
    if not torch.cuda.is_available():
        raise CliError("diff --gpu runs the script's kernels on a GPU, and torch.cuda.is_available() is False here")
    if not argv or not os.path.isfile(argv[0]):
        raise CliError(f"diff --gpu {argv[0] if argv else ''}: no such script")
    from ..gpucheck import compare_all
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
    return emit("\n".join(r.summary() for r in results), EXIT_FINDINGS if bad else status)
