"""Importing the package and asking the command line for help are inert: they load no torch, Triton,
numpy, Flask or plotly, and no stage of the pipeline. Counted as modules imported, not as time (machines are
noisy); each case runs in a fresh interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from helpers.paths import ROOT

HEAVY = ("torch", "triton", "numpy", "flask", "plotly")


def _modules_after(code: str) -> set:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(mods: set) -> list:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


def test_import_triton_trace_loads_only_the_package_root():
    mods = _modules_after("import triton_trace")
    assert _heavy(mods) == []
    assert sorted(m for m in mods if m.startswith("triton_trace")) == ["triton_trace"]


def test_cli_help_loads_no_stage():
    mods = _modules_after("from triton_trace.cli import build_parser\nbuild_parser().format_help()")
    assert _heavy(mods) == []
    ours = {m for m in mods if m.startswith("triton_trace")}
    assert ours <= {"triton_trace", "triton_trace.cli", "triton_trace.commands"} | \
        {f"triton_trace.commands.{n}" for n in ("common", "run", "view", "report", "diff", "repro", "ir")}, ours


def test_the_first_use_loads_what_it_needs_and_no_view():
    """``trace`` loads the recorder (torch, Triton) but not Flask, plotly or the analysis."""
    mods = _modules_after("import triton_trace\ntriton_trace.trace")
    assert "triton_trace.record.session" in mods and "triton" in mods
    assert not [m for m in mods if m.split(".")[0] in ("flask", "plotly")]
    assert not [m for m in mods if m.startswith(("triton_trace.analysis", "triton_trace.view.app"))]


def test_lazy_names_are_the_public_api():
    """Every name in __all__ resolves (the lazy table has no typo), and dir() lists them."""
    mods = _modules_after("import triton_trace\nmissing = [n for n in triton_trace.__all__ if getattr(triton_trace, n, None) is None]\n"
                          "assert not missing, missing\nassert set(triton_trace.__all__) <= set(dir(triton_trace))")
    assert "triton_trace.store.tracefile" in mods
