"""Analysis: pure functions over a Trace. Memory-access and work metrics, an L2 model, and a sanitizer.

    report = triton_trace.analyze(trace)   # metrics per launch, program, op and source line; findings
    report.findings                        # every problem found, most severe first
    report.to_dict()                       # JSON-ready and deterministic; schema in analysis/report.py
    triton_trace.check(trace)              # raises FindingsError with a readable summary on any finding

Modules: ``analyzer.py`` (the entry: the explicit list of checks and passes), ``context.py`` (what every
analysis of a launch shares), ``metrics.py`` (bytes and work at every level), ``findings.py`` (``Finding``
and the ``KINDS`` table), ``report.py`` (the result and its JSON schema), ``diff.py`` (two traces side by
side), ``gpus.py`` (the GPU table), ``units.py`` (how numbers read), ``parallel.py`` (work on a second core).
By role underneath: ``memory/`` (the memory model: coalescing, layouts, caches), ``checks/`` (findings:
bounds, races, write order, value checks, extents), ``advice/`` (hints, what-if, roofline, predictions).
"""
from .analyzer import analyze, check
from .report import Report

__all__ = ["analyze", "check", "Report"]
