"""``pytest --triton-trace`` (triton_trace/pytest_plugin.py, installed as a pytest11 entry point) on a
suite with planted bugs (tests/plugin_suite: each bug beside its correct twin) and on a sample of Triton's
own language tests, with and without pytest-xdist. Real pytest runs in child processes."""
from __future__ import annotations

import json
import os
import re

import pytest

import triton_trace
from helpers.paths import TESTS
from helpers.suites import outcomes, run_suite

EXPECTED = {
    "test_copy_unmasked_bug": "failed",        # out_of_bounds
    "test_copy_masked_clean": "passed",
    "test_sum_racy_bug": "failed",             # race
    "test_sum_atomic_clean": "passed",
    "test_sum_racy_expected": "passed",        # marker: the race is expected
    "test_copy_unmasked_exempt": "passed",     # marker: not traced
    "test_expected_race_missing": "failed",    # marker: an expected race that is not there
    "test_no_kernel_at_all": "passed",
}


@pytest.mark.parametrize("xdist", [(), ("-n", "2"), ("-n", "2", "--dist", "loadfile")])
def test_planted_bugs_fail_and_their_twins_pass(xdist):
    r = run_suite("--triton-trace", *xdist)
    assert outcomes(r.stdout) == EXPECTED, r.stdout[-3000:]
    assert r.stdout.count("= triton_trace =") == 1                  # one summary, from the controller
    assert "6 test(s) launched 6 traced kernel launch(es); 3 failed on findings" in r.stdout
    assert "triton_trace found out_of_bounds" in r.stdout and "copy_unmasked" in r.stdout
    assert "triton_trace found race" in r.stdout


def test_kinds_pick_what_fails():
    r = run_suite("--triton-trace", "--triton-trace-kinds=race")
    got = outcomes(r.stdout)
    assert got["test_copy_unmasked_bug"] == "passed" and got["test_sum_racy_bug"] == "failed"
    bad = run_suite("--triton-trace", "--triton-trace-kinds=nonsense", "-k", "clean")
    assert bad.returncode == 4 and "unknown kind" in bad.stderr


def _saved_findings_match(trace_path) -> dict:
    """The findings JSON saved beside ``trace_path``, checked against the analysis of the loaded trace."""
    saved = json.loads(trace_path.with_name(trace_path.name[:-len(".ttrace")] + ".findings.json").read_text())
    assert saved["schema"] and "launches" in saved and "finding_counts" in saved      # the report's to_dict()
    again = triton_trace.analyze(triton_trace.load(trace_path)).to_dict()
    assert saved["findings"] == json.loads(json.dumps(again["findings"]))
    assert saved["finding_counts"] == again["finding_counts"]
    return saved


def test_failing_traces_are_saved_with_the_command_to_open_them(tmp_path):
    r = run_suite("--triton-trace", f"--triton-trace-dir={tmp_path}", "-k", "unmasked_bug")
    saved = sorted(tmp_path.glob("*.ttrace"))
    assert len(saved) == 1 and f"triton-trace view {saved[0]}" in r.stdout
    report = triton_trace.analyze(triton_trace.load(saved[0]))
    assert {f.kind for f in report.findings} == {"out_of_bounds"}
    assert {f["kind"] for f in _saved_findings_match(saved[0])["findings"]} == {"out_of_bounds"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([saved[0].name, saved[0].stem + ".findings.json"])


# the tests of tests/plugin_suite that launch a traced kernel (skip=True and no kernel at all: nothing saved)
TRACED = {"test_copy_unmasked_bug": {"out_of_bounds"}, "test_copy_masked_clean": set(),
          "test_sum_racy_bug": {"race"}, "test_sum_atomic_clean": set(), "test_sum_racy_expected": {"race"},
          "test_expected_race_missing": set()}


@pytest.mark.parametrize("xdist", [(), ("-n", "2")])
def test_save_all_keeps_every_tests_trace_and_findings(tmp_path, xdist):
    r = run_suite("--triton-trace", f"--triton-trace-dir={tmp_path}", "--tt-save=all", *xdist)
    assert outcomes(r.stdout) == EXPECTED, r.stdout[-3000:]
    traces = {p.name: p for p in tmp_path.glob("*.ttrace")}
    assert sorted(traces) == sorted(f"test_planted.py_{name}.ttrace" for name in TRACED)
    assert len(list(tmp_path.glob("*.findings.json"))) == len(TRACED)
    for name, kinds in TRACED.items():
        path = traces[f"test_planted.py_{name}.ttrace"]
        assert len(triton_trace.load(path).launches) == 1
        assert {f["kind"] for f in _saved_findings_match(path)["findings"]} == kinds, name
    assert f"6 test(s) saved a trace and its findings in {tmp_path} (--tt-save=all)" in r.stdout
    # a failing test names the file that opens it, whatever --tt-save says
    assert f"triton-trace view {traces['test_planted.py_test_sum_racy_bug.ttrace']}" in r.stdout


def test_numerics_compiled_reaches_every_tests_launches(tmp_path):
    r = run_suite("--triton-trace", f"--triton-trace-dir={tmp_path}", "--tt-save=all", "--tt-numerics=compiled",
                  "-k", "clean")
    assert r.returncode == 0, r.stdout[-3000:]
    traces = sorted(tmp_path.glob("*.ttrace"))
    assert traces and all(lc.meta.get("numerics") == "compiled"
                          for p in traces for lc in triton_trace.load(p).launches)


def test_save_needs_a_folder_and_a_known_choice(tmp_path):
    r = run_suite("--triton-trace", "--tt-save=all", "-k", "clean")
    assert r.returncode == 4 and "--tt-save=all needs --triton-trace-dir" in r.stderr
    r = run_suite("--triton-trace", f"--triton-trace-dir={tmp_path}", "--tt-save=some", "-k", "clean")
    assert r.returncode == 4 and "--tt-save" in r.stderr
    r = run_suite("--triton-trace", f"--triton-trace-dir={tmp_path}", "-k", "clean")       # default: failing
    assert r.returncode == 0 and not list(tmp_path.iterdir())


def test_off_by_default():
    """Without --triton-trace the plugin adds its options and nothing else (kernels run as Triton runs
    them: here through Triton's own interpreter)."""
    r = run_suite("-k", "clean", env={"TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stdout[-2000:]
    assert "= triton_trace =" not in r.stdout
    assert "--triton-trace" in run_suite("--help").stdout


@pytest.mark.slow
@pytest.mark.parametrize("workers", [None, "2"])
def test_tritons_own_tests_under_the_plugin(workers):
    """A sample of Triton's language tests (tests/triton_suite): traced by the plugin, none fails on a
    finding and the sample passes as it does plain."""
    release = os.path.join(TESTS, "triton_suite", "release-3.6")
    unit = os.path.join(release, "python", "test", "unit")
    env = {"TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([os.path.join(TESTS, "triton_suite"), os.environ.get("PYTHONPATH", "")])}
    r = run_suite("-p", "tt_suite_plugin", "--tt-mode=plain", "--tt-every=60", "--triton-trace", "-m", "interpreter",
                  "--device=cpu", "-q", "language/test_core.py", "language/test_standard.py",
                  "language/test_tuple.py", *(["-n", workers] if workers else []), cwd=unit, root=release, env=env)
    summary = re.search(r"(\d+) test\(s\) launched (\d+) traced kernel launch\(es\); (\d+) failed on findings",
                        r.stdout)
    assert summary, r.stdout[-3000:]
    tests, launches, failed = map(int, summary.groups())
    assert tests > 50 and launches >= tests and failed == 0
    assert r.returncode == 0, r.stdout[-3000:]
