"""``triton-trace report TRACE``: the metrics and findings of a saved trace; exit 1 on findings. ``--shadow
float64`` adds where precision is lost (analysis/advice/shadow.py)."""
from __future__ import annotations

import json

from .common import EXIT_FINDINGS, CliError, analysis_flags, analysis_options, emit, load, trust_flag


def add_parser(sub) -> None:
    rp = sub.add_parser("report", help="print the metrics and findings of a saved trace",
                        description="Print the metrics and findings of a saved trace. Exit status 1 when "
                                    "there are findings, 2 for any error (a bad or damaged file, a crash), "
                                    "0 when clean, so it can gate CI.")
    rp.add_argument("trace", help="a .ttrace file")
    rp.add_argument("--json", action="store_true", help="print the report's JSON instead of a table")
    rp.add_argument("--shadow", choices=("float64",), default=None,
                    help="say where precision is lost: each launch runs again (from the inputs kept by "
                         "trace(inputs=True)) with every floating op also done in float64, and the report gives "
                         "each source line's error in ulps and each stored tensor's culprit lines")
    analysis_flags(rp)
    trust_flag(rp)
    rp.set_defaults(func=run)


def run(args) -> int:
    trace = load(args.trace, args.trust)
    from ..analysis import analyze
    from ..errors import TraceUsageError
    try:
        report = analyze(trace, **analysis_options(args), **({"shadow": args.shadow} if args.shadow else {}))
    except TraceUsageError as e:      # e.g. --gpu names a GPU the table lacks
        raise CliError(str(e)) from None
    text = json.dumps(report.to_dict(), sort_keys=True, indent=1) if args.json else report.summary()
    return emit(text, EXIT_FINDINGS if report.findings else 0)
