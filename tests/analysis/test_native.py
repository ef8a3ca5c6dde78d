"""Building and loading the cache simulation's compiled loops (native/cacheloops.py, loops.c): built once per
machine into the cache directory, loaded by later processes without a compiler, and where nothing can be
built the numpy passes give the same report. (tests/analysis/test_cache_jit.py checks the loops' counts.)"""

import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import triton_trace
from triton_trace.analysis.memory import jitsteps, l1jit, lockstep
from triton_trace.native import cacheloops as native
from helpers.cache_streams import launch_matmul, random_stream, step_windows
from helpers.paths import ROOT


needs_cc = pytest.mark.skipif(native._compiler() is None or native.DISABLED,
                              reason="no C compiler here (or TRITON_TRACE_NO_JIT is set)")

USE = textwrap.dedent('''
    import os, sys
    from triton_trace.analysis.memory import lockstep
    from triton_trace.native import cacheloops as native
    lib = native.library()
    print(lib is not None, native.failure())
    print(sorted(os.listdir(os.path.join(os.environ["TRITON_TRACE_CACHE_DIR"], "native"))))
    print(lockstep.L2(4, 2, "int32").jit)
''')


def _python(code: str, cache: str, path: str = None, err: list = None) -> list:
    """The lines ``code`` prints in a fresh interpreter (its stderr appended to ``err``)."""
    env = {**os.environ, "PYTHONPATH": ROOT, "TRITON_TRACE_CACHE_DIR": cache}
    env.pop("TRITON_TRACE_NO_JIT", None)
    env.pop("CC", None)
    if path is not None:
        env["PATH"] = path
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    if err is not None:
        err.append(done.stderr)
    return done.stdout.strip().splitlines()


@needs_cc
def test_built_once_then_loaded_by_a_process_without_a_compiler(tmp_path):
    cache = str(tmp_path / "cache")
    built = _python(USE, cache)
    assert built[0] == "True None" and built[2] == "True"
    (name,) = eval(built[1])
    assert name.startswith("loops-") and name.endswith(".so")
    # no compiler on PATH now: the build of the first process is loaded as it is
    again = _python(USE, cache, path=str(tmp_path / "empty"))
    assert again == built


def test_without_a_compiler_or_a_build_the_numpy_passes_run(tmp_path):
    err = []
    out = _python(USE.replace('print(sorted(os.listdir(os.path.join(os.environ["TRITON_TRACE_CACHE_DIR"], '
                              '"native"))))', 'print(os.path.exists(os.environ["TRITON_TRACE_CACHE_DIR"]))'),
                  str(tmp_path / "cache"), path=str(tmp_path / "empty"), err=err)
    assert out[0].startswith("False OSError: no C compiler") and out[1:] == ["False", "False"]
    assert "numpy passes: the same report" in err[0]         # said once, on stderr


def _fresh(monkeypatch, tmp_path):
    """This process as if it had never loaded the loops, with an empty cache directory."""
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_failed", None)
    monkeypatch.setattr(native, "DISABLED", False)
    monkeypatch.setattr(jitsteps, "ENABLED", True)


def test_a_compiler_that_fails_leaves_the_numpy_passes_with_the_same_report(monkeypatch, tmp_path):
    triton_trace.reset()
    launch_matmul()
    trace = triton_trace.current_trace()
    monkeypatch.setattr(jitsteps, "ENABLED", False)
    want = triton_trace.analyze(trace, layouts="model").to_dict()
    _fresh(monkeypatch, tmp_path)
    monkeypatch.setattr(native, "_compiler", lambda: shutil.which("false") or "/bin/false")
    made = []
    real_init = lockstep.L2.__init__

    def recording(self, *a, **kw):
        real_init(self, *a, **kw)
        made.append(self.jit)
    monkeypatch.setattr(lockstep.L2, "__init__", recording)
    with pytest.warns(RuntimeWarning, match="compiled loops are not available .*could not compile.*the same report"):
        got = triton_trace.analyze(trace, layouts="model").to_dict()
    assert "could not compile" in native.failure()
    assert made and not any(made)
    assert got == want
    assert os.listdir(tmp_path / "cache" / "native") == []          # nothing half-built left behind
    with pytest.raises(RuntimeError, match="could not compile"):     # asked for outright, it says why
        l1jit.l1_sent(np.arange(3), np.arange(3), np.ones(3, np.uint8), np.zeros(3, bool), np.ones(3, bool), 128, 1 << 18)


@needs_cc
def test_two_threads_that_first_take_the_loops_at_once_build_them_once_and_count_right(monkeypatch, tmp_path):
    """analyze() runs what-if replays beside the launch's own simulation: both may be first."""
    _fresh(monkeypatch, tmp_path)
    calls = []
    real_build = native._build
    monkeypatch.setattr(native, "_build", lambda *a: calls.append(1) or real_build(*a))
    rng = np.random.default_rng(3)
    n_sets, sets, lines, kind = random_stream(rng, 3000)

    def run(jit):
        return step_windows(lockstep.L2(n_sets, 3, np.int64, fetch_sectors=2, dirty_ways=1, jit=jit), sets, lines, kind,
                    [0, 3000])
    want = run(False)
    got, errors = [], []

    def one():
        try:
            got.append(run(True))
        except Exception as e:      # (reported below, in the test's thread)
            errors.append(e)
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 4 and calls == [1]
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_no_jit_keeps_the_numpy_passes(tmp_path):
    env_code = USE.replace('print(sorted(os.listdir(os.path.join(os.environ["TRITON_TRACE_CACHE_DIR"], "native"))))',
                           'print(os.path.exists(os.environ["TRITON_TRACE_CACHE_DIR"]))')
    env = {**os.environ, "PYTHONPATH": ROOT, "TRITON_TRACE_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_TRACE_NO_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", env_code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["False TRITON_TRACE_NO_JIT is set", "False", "False"]


def test_a_build_others_could_have_written_is_not_loaded(monkeypatch, tmp_path):
    if not hasattr(os, "getuid") or native._compiler() is None:
        pytest.skip("needs POSIX permissions and a C compiler")
    _fresh(monkeypatch, tmp_path)
    assert native.library() is not None                      # built, private: loaded
    (built,) = (tmp_path / "cache" / "native").iterdir()
    built.chmod(0o666)                                         # now anyone could have replaced it
    monkeypatch.setattr(native, "_lib", None)
    with pytest.warns(RuntimeWarning, match="not this user's alone"):
        assert native.library() is None
    assert "not this user's alone" in native.failure() and "TRITON_TRACE_CACHE_DIR" in native.failure()
