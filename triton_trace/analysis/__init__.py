"""Analysis: pure functions over a Trace. Memory-access and work metrics, an L2 model, and a sanitizer.

    report = triton_trace.analyze(trace)   # metrics per launch, program, op and source line; findings
    report.findings                        # every problem found, most severe first
    report.to_dict()                       # JSON-ready and deterministic; schema in analysis/report.py
    triton_trace.check(trace)              # raises FindingsError with a readable summary on any finding

Stages, each a module: context (derived arrays), coalescing (sectors per warp request), cache (L2
simulation), roofline (FLOPs and GPU table), metrics (aggregation), sanitizer and races (findings),
report (the result and its schema), analyzer (the explicit list that runs them); diff compares two
traces (triton_trace.diff).
"""
from .analyzer import analyze, check
from .report import Report

__all__ = ["analyze", "check", "Report"]
