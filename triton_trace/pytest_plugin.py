"""``pytest --triton-trace``: run a test suite with every Triton kernel it launches traced and sanitized.

Installed with the package (a ``pytest11`` entry point) and off unless asked for, so loading it costs a
pytest run nothing: triton_trace itself is imported only when ``--triton-trace`` is given. Each test's
call runs inside ``triton_trace.trace_all()`` (CPU tensors through the interpreter, CUDA tensors on CPU
copies with the results written back); the launches are analysed when the test returns, and a test whose
launches have findings fails with the report. Under pytest-xdist every worker traces its own tests and
the controller prints one summary from the reports the workers send back.

- ``--triton-trace-kinds=out_of_bounds,race``: the finding kinds that fail a test (default: all).
- ``@pytest.mark.triton_trace(skip=True)``: not traced nor checked (kernels on CPU tensors still run, through
  the interpreter); ``@pytest.mark.triton_trace(expect="race")``
  (a kind or a list): the test must produce those findings, and others still fail it.
- ``--triton-trace-dir DIR``: the trace of every failing test is saved there, and the failure names the
  ``triton-trace view`` command that opens it.
"""
from __future__ import annotations

import os
import re

import pytest

PROPERTY = "triton_trace"          # the per-test record the summary is built from (report.user_properties)


def pytest_addoption(parser):
    group = parser.getgroup("triton_trace", "sanitize Triton kernels with triton_trace")
    group.addoption("--triton-trace", action="store_true", default=False,
                    help="trace every Triton kernel each test launches and fail tests whose launches have findings")
    group.addoption("--triton-trace-kinds", default=None, metavar="KINDS",
                    help="comma-separated finding kinds that fail a test (default: every kind)")
    group.addoption("--triton-trace-dir", default=None, metavar="DIR",
                    help="save the trace of each failing test in DIR (.ttrace files)")


def pytest_configure(config):
    config.addinivalue_line("markers", "triton_trace(skip=False, expect=None): leave a test untraced, or name the "
                                       "finding kinds it must produce")
    if config.getoption("--triton-trace"):
        config.pluginmanager.register(_Sanitizer(config), "triton_trace_sanitizer")


def _kinds(text):
    if not text:
        return None
    from .analysis.findings import FINDING_KINDS
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    unknown = kinds - set(FINDING_KINDS)
    if unknown:
        raise pytest.UsageError(f"--triton-trace-kinds: unknown kind(s) {sorted(unknown)}; "
                                f"choose from {', '.join(FINDING_KINDS)}")
    return kinds


class _Sanitizer:
    def __init__(self, config):
        self.kinds = _kinds(config.getoption("--triton-trace-kinds"))
        self.dir = config.getoption("--triton-trace-dir")
        self.results: list = []        # (nodeid, launches, kinds found, failed) from every worker's reports

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        marker = item.get_closest_marker("triton_trace")
        opts = dict(marker.kwargs) if marker else {}
        import triton_trace
        if opts.get("skip"):
            # not traced nor checked; kernels on CPU tensors still run (through the interpreter), as untraced
            with triton_trace.trace_all(kernels=()):
                return (yield)
        triton_trace.reset()
        try:
            with triton_trace.trace_all():
                result = yield
            trace = triton_trace.current_trace()
            self._check(item, trace, opts)
            return result
        finally:
            triton_trace.reset()

    def _check(self, item, trace, opts) -> None:
        if not trace.launches:
            item.user_properties.append((PROPERTY, {"launches": 0, "kinds": [], "failed": False}))
            return
        import triton_trace
        report = triton_trace.analyze(trace, layouts="model", what_if=False)     # findings only: no compile
        found = {f.kind for f in report.findings} | {k for k, n in report.finding_counts.items() if n}
        expect = opts.get("expect")
        expected = {expect} if isinstance(expect, str) else set(expect or ())
        failing = (found - expected) if self.kinds is None else (found & self.kinds) - expected
        missing = expected - found
        item.user_properties.append((PROPERTY, {"launches": len(trace.launches), "kinds": sorted(found),
                                                "failed": bool(failing or missing)}))
        if not (failing or missing):
            return
        lines = []
        if failing:
            lines.append(f"triton_trace found {', '.join(sorted(failing))} in the kernels this test launched:")
            lines.append(report.summary())
        if missing:
            lines.append(f"triton_trace: the test expected {', '.join(sorted(missing))} findings and found none")
        if self.dir:
            path = os.path.join(self.dir, re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[:150] + ".ttrace")
            os.makedirs(self.dir, exist_ok=True)
            trace.save(path)
            lines.append(f"trace saved: open it with  triton-trace view {path}")
        pytest.fail("\n".join(lines), pytrace=False)

    # -- one summary, also from xdist workers' reports -----------------------------------------------------
    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                self.results.append((report.nodeid, value["launches"], value["kinds"], value["failed"]))

    def pytest_terminal_summary(self, terminalreporter):
        if hasattr(terminalreporter.config, "workerinput"):       # an xdist worker: the controller reports
            return
        traced = [r for r in self.results if r[1]]
        bad = [r for r in self.results if r[3]]
        launches = sum(r[1] for r in self.results)
        tr = terminalreporter
        tr.section("triton_trace")
        tr.write_line(f"{len(traced)} test(s) launched {launches} traced kernel launch(es); "
                      f"{len(bad)} failed on findings")
        for nodeid, _, kinds, _ in bad[:50]:
            tr.write_line(f"  {nodeid}: {', '.join(kinds) or 'an expected finding was missing'}")
