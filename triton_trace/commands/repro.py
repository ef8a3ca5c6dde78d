"""``triton-trace repro TRACE``: a standalone reproducer script of one launch."""
from __future__ import annotations

import os
import sys

from .common import CliError, launch_of, load, trust_flag


def add_parser(sub) -> None:
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
    trust_flag(rr)
    rr.set_defaults(func=run)


def run(args) -> int:
    from ..errors import TritonTraceError
    trace = load(args.trace, args.trust)
    launch = launch_of(trace, args.launch, args.trace)
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
