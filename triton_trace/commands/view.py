"""``triton-trace view TRACE``: serve a saved trace in the web UI; ``--shadow float64`` fills the Source
panel's precision column (view/precisionview.py)."""
from __future__ import annotations

from .common import CliError, analysis_flags, analysis_options, load, port, trust_flag


def add_parser(sub) -> None:
    v = sub.add_parser("view", help="serve a saved trace in the web UI",
                       usage="triton-trace view TRACE [--port N] [--share [--allow-host NAME]] [--compare TRACE] "
                             "[--shadow float64]",
                       description="Serve a saved trace in the web UI until Ctrl-C.")
    v.add_argument("trace", help="a .ttrace file")
    v.add_argument("--port", type=port, default=None, help="port (default 5001, or the next free one)")
    v.add_argument("--share", action="store_true",
                   help="listen on all interfaces, protected by an access token in the printed URL")
    v.add_argument("--allow-host", action="append", metavar="NAME",
                   help="with --share, also answer to this host name (a DNS name or proxy in front of this "
                        "machine; repeatable). Its own names and IP addresses are always allowed")
    v.add_argument("--compare", metavar="TRACE", help="a second trace of the same kernels: the tensor view "
                                                       "can show where their outputs differ")
    v.add_argument("--shadow", choices=("float64",), default=None,
                   help="follow every launch with a float64 shadow, for the Source panel's precision column "
                        "(where precision is lost): a launch traced without trace(shadow='float64') runs again "
                        "from the inputs trace(inputs=True) kept")
    analysis_flags(v)
    trust_flag(v)
    v.set_defaults(func=run)


def run(args) -> int:
    trace = load(args.trace, args.trust)
    from ..errors import TraceUsageError
    from ..view.server import launch
    analysis = {**analysis_options(args), **({"shadow": args.shadow} if args.shadow else {})}
    try:
        launch(trace=trace, port=args.port, share=args.share, block=True, allowed_hosts=args.allow_host or (),
               compare=load(args.compare, args.trust) if args.compare else None,
               analysis=analysis, watch=args.trace, loader=lambda path: load(path, args.trust))
    except TraceUsageError as e:      # e.g. the port is taken; say it in the command line's terms
        raise CliError(str(e).replace("pass another port= or port=None to take a free one",
                                      "pass another --port, or leave it out to take a free one")) from None
    return 0
