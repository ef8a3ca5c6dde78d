"""Issue 43, the command line and the reproducer: `run` keeps every launch (a script's reset() included),
`report` and `diff` keep their exit status when the reader of their output leaves early, a reproducer
refuses to run out-of-bounds accesses untraced and says which findings it reproduces, `diff` does not count
skipped out-of-bounds stores as written, `view --compare` warns about an unrelated trace, and `ir` names the
kernel's own file. Every expected line and element comes from the kernels (tests/kernels/planted.py), not
from the tool."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import triton_trace
from triton_trace import cli
from helpers.paths import ROOT, TESTS
from helpers.source import line_of
from kernels import planted
from kernels.planted import masked, one_past_the_end, reads_one_past, tail_unmasked, traced

ENV = {**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"}


def run_cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "triton_trace", *args], capture_output=True, text=True, env=ENV,
                          timeout=300, **kwargs)


# --------------------------------------------------------------------------------------------------------
# 2. run saves every launch, whatever the script resets
def test_run_saves_the_launches_a_script_reset_forgot(tmp_path, capsys):
    script = tmp_path / "resets.py"
    script.write_text(textwrap.dedent(f"""
        import sys, torch, triton, triton_trace
        sys.path.insert(0, {TESTS!r})
        from kernels.planted import tail_unmasked, masked
        x, out = torch.arange(100, dtype=torch.float32), torch.zeros(100)
        tail_unmasked[(2,)](x, out, 100, BLOCK=64)          # the buggy launch
        triton_trace.reset()                                  # the script's own bookkeeping
        masked[(2,)](x, out, 100, BLOCK=64)
        print("script done")
    """))
    out = tmp_path / "run.ttrace"
    assert cli.main(["run", str(script), "-o", str(out)]) == 0
    assert "script done" in capsys.readouterr().out
    trace = triton_trace.load(str(out))
    assert [lc.kernel_name for lc in trace.launches] == ["tail_unmasked", "masked"]
    assert cli.main(["report", str(out)]) == cli.EXIT_FINDINGS
    text = capsys.readouterr().out
    assert f"out_of_bounds in 'tail_unmasked'" in text and f":{line_of(tail_unmasked, 'OOB')}" in text


# --------------------------------------------------------------------------------------------------------
# 3. the exit status survives a reader that leaves early
@pytest.fixture(scope="module")
def two_traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bugs")
    for name, kernel in (("buggy", tail_unmasked), ("clean", masked), ("shifted", reads_one_past)):
        traced(kernel)[0].save(str(folder / f"{name}.ttrace"))
    return folder / "buggy.ttrace", folder / "clean.ttrace"


def closed_pipe_status(*args) -> tuple:
    """Run the CLI with stdout a pipe whose reader is gone before the first byte (``| grep -q``, ``| head``
    that has read enough): (exit status, stderr)."""
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "triton_trace", *args], stdout=w, stderr=subprocess.PIPE,
                            env=ENV, text=True)
    os.close(w)
    os.close(r)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.parametrize("json_output", [False, True])
def test_report_keeps_its_status_when_the_reader_leaves(two_traces, json_output):
    buggy, clean = two_traces
    flags = ["--json"] if json_output else []
    status, err = closed_pipe_status("report", str(buggy), *flags)
    assert status == cli.EXIT_FINDINGS and "Traceback" not in err and "Exception ignored" not in err, err
    status, err = closed_pipe_status("report", str(clean), *flags)
    assert status == 0, err


def test_diff_keeps_its_status_when_the_reader_leaves(two_traces):
    _, clean = two_traces
    shifted = clean.parent / "shifted.ttrace"          # out[i] = x[i + 1], not 2 x[i]
    status, err = closed_pipe_status("diff", str(shifted), str(clean))
    assert status == cli.EXIT_FINDINGS and "Exception ignored" not in err, err
    status, err = closed_pipe_status("diff", str(clean), str(clean))
    assert status == 0, err


def test_a_shell_pipeline_into_grep_q(two_traces):
    buggy, _ = two_traces
    r = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m triton_trace report {buggy} | grep -q ."],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == cli.EXIT_FINDINGS, r.stderr


# --------------------------------------------------------------------------------------------------------
# 4. a reproducer of out-of-bounds accesses
def reproducer(kernel, tmp_path):
    trace, _, _ = traced(kernel, inputs=True)
    return trace.launches[0].reproducer(tmp_path / "repro")


def run_script(script, *flags):
    return subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True, env=ENV,
                          cwd=os.path.dirname(str(script)), timeout=300)


def test_plain_and_gpu_refuse_out_of_bounds_and_say_where(tmp_path):
    script = reproducer(tail_unmasked, tmp_path)
    line = line_of(tail_unmasked, "OOB")
    for mode in ("--plain", "--gpu"):
        r = run_script(script, mode)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "outputs match" not in r.stdout
        assert f"out_of_bounds of 'x_ptr' at line {line}" in r.stderr and "--force" in r.stderr


def test_the_traced_run_says_which_findings_it_reproduces(tmp_path):
    script = reproducer(tail_unmasked, tmp_path)
    line = line_of(tail_unmasked, "OOB")
    r = run_script(script)
    assert r.returncode == 0, r.stdout + r.stderr
    for tensor in ("x_ptr", "out_ptr"):
        assert f"reproduces the trace's out_of_bounds of '{tensor}' at line {line}" in r.stdout, r.stdout
    assert "new here" not in r.stdout and "bit for bit" in r.stdout


def test_force_runs_it_untraced_anyway(tmp_path):
    script = reproducer(reads_one_past, tmp_path)
    r = run_script(script, "--plain", "--force")
    assert "out of bounds" not in r.stderr and r.returncode in (0, 1), r.stdout + r.stderr


def test_a_clean_launch_runs_plain_and_reproduces_no_finding(tmp_path):
    script = reproducer(masked, tmp_path)
    r = run_script(script, "--plain")
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr
    r = run_script(script)
    assert r.returncode == 0 and "findings: none, as in the trace" in r.stdout, r.stdout + r.stderr


def test_repro_command_says_force_is_needed(two_traces, tmp_path):
    buggy, clean = two_traces
    r = run_cli("repro", str(buggy), "-o", str(tmp_path / "b"))
    assert r.returncode == 0 and "--force" in r.stderr, r.stderr
    r = run_cli("repro", str(clean), "-o", str(tmp_path / "c"))
    assert r.returncode == 0 and "--force" not in r.stderr, r.stderr


# --------------------------------------------------------------------------------------------------------
# 8. diff: a skipped out-of-bounds store wrote nothing
def test_diff_does_not_count_skipped_stores_as_written(tmp_path):
    n = 100
    past, _, out_past = traced(one_past_the_end, n=n)
    fixed, _, out_fixed = traced(masked, n=n)
    assert torch.equal(out_past, out_fixed)              # the truth: the storages hold the same values
    assert any(f.kind == "out_of_bounds" for f in triton_trace.analyze(past, what_if=False).findings)
    d = triton_trace.diff(past, fixed, analyze=False)
    t = next(t for t in d.launches[0].outputs if t.tensor == "out_ptr")
    assert (t.compared, t.differing, t.only_a, t.only_b) == (n, 0, 0, 0)
    assert not d.outputs_differ
    past.save(str(tmp_path / "past.ttrace"))
    fixed.save(str(tmp_path / "fixed.ttrace"))
    assert run_cli("diff", str(tmp_path / "past.ttrace"), str(tmp_path / "fixed.ttrace")).returncode == 0


# --------------------------------------------------------------------------------------------------------
# 10. view --compare of an unrelated trace
def test_view_compare_warns_at_start_naming_the_kernels(tmp_path, capsys):
    a, _, _ = traced(masked, n=100)
    b, _, _ = traced(masked, n=300)
    srv = triton_trace.launch(trace=a, compare=b, block=False, port=0)
    srv.stop()
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "masked" in warning[0] and "[100]" in warning[0] and "[300]" in warning[0]
    srv = triton_trace.launch(trace=a, compare=a, block=False, port=0)
    srv.stop()
    assert "warning" not in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------------
# 9. ir names the kernel's own file and lines, not the compile's cache file
def test_ir_shows_the_kernels_source_not_the_cache(two_traces, tmp_path):
    _, clean = two_traces
    env_cache = {"TRITON_TRACE_CACHE_DIR": str(tmp_path / "cache")}
    kfile = os.path.abspath(planted.__file__)
    here = os.path.basename(kfile)
    store = line_of(masked, "tl.store")
    r = subprocess.run([sys.executable, "-m", "triton_trace", "ir", str(clean), "--trust"], capture_output=True, text=True,
                       env={**ENV, **env_cache}, timeout=600)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert not first.startswith("<") and f"masked ({here}:{line_of(masked, 'def masked')})" in first
    assert f"{here}:{store} tt.store as st" in r.stdout
    for stage in ("ttgir", "ptx"):
        r = subprocess.run([sys.executable, "-m", "triton_trace", "ir", str(clean), "--trust", "--stage", stage],
                           capture_output=True, text=True, env={**ENV, **env_cache}, timeout=600)
        assert r.returncode == 0, r.stderr
        assert str(tmp_path / "cache") not in r.stdout and "/modules/" not in r.stdout
        assert kfile in r.stdout
        if stage == "ttgir":
            assert f'loc("{kfile}":{store}:' in r.stdout
        else:
            assert f"// {here}:{store}" in r.stdout
