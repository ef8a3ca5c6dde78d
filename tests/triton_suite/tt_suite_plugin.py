"""A pytest plugin that runs Triton's own language tests with every launch traced.

Loaded with ``-p tt_suite_plugin`` (this folder on PYTHONPATH) from inside the vendored suite. In
``--tt-mode=traced`` each test's call runs inside ``triton_trace.trace_all()``, so every kernel the test
launches goes through the tracer instead of Triton's plain interpreter; ``--tt-mode=plain`` leaves the
tests alone (the baseline). ``--tt-every=N`` keeps every Nth collected test (a deterministic sample for CI).
Outcomes and times come back through pytest's own ``--junitxml``, which also works under pytest-xdist;
``--tt-log=PATH`` writes, per process (``PATH.<xdist worker>``), one JSON line per traced test with the
number of launches the tracer recorded, so a run can show that its tests really went through the tracer.
"""
from __future__ import annotations

import json
import os

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("triton_trace suite")
    group.addoption("--tt-mode", choices=("plain", "traced"), default="traced",
                    help="traced: run every test's kernel launches through triton_trace; plain: Triton alone")
    group.addoption("--tt-every", type=int, default=1, help="keep every Nth collected test (1: all)")
    group.addoption("--tt-offset", type=int, default=0, help="which of the N residues --tt-every keeps")
    group.addoption("--tt-log", default=None, help="write launches per traced test to PATH.<worker> (JSON lines)")


# Helpers the release-3.6 tests import that later Triton releases dropped from triton._internal_testing;
# on the CPU, 3.6's answer them False (no AMD GPU) and "" (no target). Added only where missing, so the
# same vendored tests also run on newer releases.
_MISSING_HELPERS = {"is_hip_gfx11": False, "is_hip_gfx12": False, "is_hip_mi200": False, "is_hip_mi300": False,
                    "is_hip_mi350": False, "is_hip_cdna4": False, "get_arch": ""}


def pytest_configure(config):
    import triton._internal_testing as testing
    for name, answer in _MISSING_HELPERS.items():
        if not hasattr(testing, name):
            setattr(testing, name, lambda _answer=answer: _answer)


def pytest_collection_modifyitems(config, items):
    every = config.getoption("--tt-every")
    if every > 1:
        offset = config.getoption("--tt-offset") % every
        keep = [it for i, it in enumerate(items) if i % every == offset]
        config.hook.pytest_deselected(items=[it for i, it in enumerate(items) if i % every != offset])
        items[:] = keep


def pytest_report_header(config):
    import triton
    return f"triton_trace suite plugin: mode={config.getoption('--tt-mode')}, triton {triton.__version__}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if item.config.getoption("--tt-mode") != "traced":
        yield
        return
    import triton_trace
    triton_trace.reset()
    try:
        with triton_trace.trace_all():
            yield
        _log(item, len(triton_trace.current_trace().launches))
    finally:
        triton_trace.reset()      # a test's launches are not kept past it: bounded memory over 8000 tests


def _log(item, launches: int) -> None:
    path = item.config.getoption("--tt-log")
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}", "a") as f:
            f.write(json.dumps({"nodeid": item.nodeid, "launches": launches}) + "\n")
