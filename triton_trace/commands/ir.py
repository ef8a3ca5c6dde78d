"""``triton-trace ir TRACE``: compile a traced launch for a GPU target here and print its IR."""
from __future__ import annotations

import json

from .common import CliError, launch_of, load, trust_flag


def add_parser(sub) -> None:
    ir = sub.add_parser("ir", help="compile a traced launch for a GPU target here (no GPU needed) and print its IR",
                        description="Compile the kernel as the launch would be on a GPU, and print the IR with the "
                                    "source line of each IR line, or a summary of its memory ops and resources.")
    ir.add_argument("trace", help="a .ttrace file")
    ir.add_argument("--launch", type=int, default=0, help="which launch (default 0)")
    ir.add_argument("--target", default="sm_90", help="sm_80, sm_90, sm_100, ... or a GPU name (A100, H200, B200)")
    ir.add_argument("--stage", choices=("summary", "ttir", "ttgir", "llir", "ptx"), default="summary")
    ir.add_argument("--json", action="store_true", help="with --stage summary: print JSON")
    trust_flag(ir)
    ir.set_defaults(func=run)


def run(args) -> int:
    from ..errors import TritonTraceError
    from ..view.compiledview import ir_listing
    trace = load(args.trace, args.trust)
    launch = launch_of(trace, args.launch, args.trace)
    try:
        compiled = launch.compiled(target=args.target)
        text = json.dumps(compiled.to_dict(), indent=1) if args.json and args.stage == "summary" else \
            "\n".join(ir_listing(launch, compiled, args.stage))
    except TritonTraceError as e:
        raise CliError(str(e)) from None
    print(text)
    return 0
