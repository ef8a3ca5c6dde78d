"""Loading the cache simulation's compiled loops (analysis/jitsteps.py): when they load, what a launch running
meanwhile does to numba, and what happens where numba cannot load them.

numba captures Python's print, min and max by identity when it is imported, and a traced launch patches those
builtins while it runs: an import under the patches breaks numba for the whole process. Loads therefore wait
for the launch to end (record/patching.py's BUILTINS_FENCE). Each case that imports numba runs in a fresh
interpreter: in this one an earlier test has imported it already."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import triton_trace
from triton_trace.analysis import jitsteps, l1jit, lockstep

from test_cache_windows import _matmul

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_numba = pytest.mark.skipif(not jitsteps.ENABLED, reason="numba is not installed (or TRITON_TRACE_NO_JIT is set)")

TESTS = os.path.dirname(os.path.abspath(__file__))
ADD = f'''
import sys
sys.path.insert(0, {TESTS!r})
import torch
import kernels as K
import triton_trace

def run_add(n=1000):
    x, y = torch.randn(n), torch.randn(n)
    assert torch.equal(K.add(x, y, kernel=triton_trace.trace(K.make_add())), x + y)
'''

# numba compiles what uses the builtins it registered: with ours registered instead, each of these fails
NUMBA_BUILTINS = '''
import numba
@numba.njit
def uses_builtins(a, b):
    print(a)
    return max(a, b) - min(a, b)
assert uses_builtins(3, 7) == 4
'''


def _python(code: str, tmp_path) -> str:
    script = tmp_path / "script.py"          # (Triton reads a kernel's source from its file)
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_numba
def test_a_load_started_during_a_launch_waits_for_it_and_numba_keeps_the_real_builtins(tmp_path):
    # the progress callback runs inside the launch, its patches in place: the load starts there, and the
    # launch goes on long enough for an unfenced import to run under them
    out = _python(ADD + textwrap.dedent('''
        import builtins, time
        from triton_trace.analysis import jitsteps
        real = builtins.print
        seen = []
        def progress(done, total, kernel):
            if not seen:
                seen.append(builtins.print is not real)       # (the launch's patches are in place)
                jitsteps.prefetch()
                time.sleep(1.0)
                seen.append(jitsteps._loaded or "numba" in __import__("sys").modules)
        triton_trace.set_progress(progress)
        run_add()
        triton_trace.set_progress(None)
        jitsteps._loader.join()
        assert seen == [True, False], seen
        assert jitsteps._loaded and jitsteps._failed is None, jitsteps._failed
        assert builtins.print is real
    ''') + NUMBA_BUILTINS + 'print("ok")', tmp_path)
    assert out.strip().endswith("ok")


@needs_numba
def test_a_launch_started_during_a_load_waits_for_it(tmp_path):
    out = _python(ADD + textwrap.dedent('''
        from triton_trace.analysis import jitsteps
        jitsteps.prefetch()
        run_add()                                   # under the fence: after the load, or before it began
        jitsteps._loader.join()
        assert jitsteps._loaded and jitsteps._failed is None, jitsteps._failed
    ''') + NUMBA_BUILTINS + 'print("ok")', tmp_path)
    assert out.strip().endswith("ok")


@needs_numba
def test_streams_take_the_compiled_loops_by_length_and_whether_they_are_loaded(monkeypatch):
    monkeypatch.setattr(jitsteps, "_loaded", False)        # (as in a fresh process, before they are loaded)
    assert not jitsteps.use(jitsteps.MIN_LOADED)
    assert jitsteps.use(jitsteps.MIN_ENTRIES)              # long enough: loaded now
    assert jitsteps._loaded
    assert jitsteps.use(jitsteps.MIN_LOADED) and not jitsteps.use(jitsteps.MIN_LOADED - 1)


def test_a_numba_that_cannot_load_leaves_the_numpy_passes_with_the_same_report(monkeypatch):
    triton_trace.reset()
    _matmul()
    trace = triton_trace.current_trace()
    want = triton_trace.analyze(trace, layouts="model").to_dict()

    def broken():
        raise ImportError("numba: no LLVM here")
    made = []
    real_init = lockstep.L2.__init__

    def recording(self, *a, **kw):
        real_init(self, *a, **kw)
        made.append(self.jit)
    for name, value in (("_compiled", False), ("_loaded", False), ("_failed", None), ("_compile", broken),
                        ("MIN_ENTRIES", 1), ("ENABLED", True)):
        monkeypatch.setattr(jitsteps, name, value)
    monkeypatch.setattr(l1jit, "_compiled", False)
    monkeypatch.setattr(lockstep.L2, "__init__", recording)
    got = triton_trace.analyze(trace, layouts="model").to_dict()
    assert isinstance(jitsteps._failed, ImportError) and not jitsteps._loaded
    assert made and not any(made)
    assert got == want
    with pytest.raises(ImportError, match="no LLVM"):            # asked for outright, it says why
        l1jit.l1_sent(np.arange(3), np.arange(3), np.ones(3, np.uint8), np.zeros(3, bool), np.ones(3, bool), 128, 1 << 18)


@needs_numba
def test_a_notebook_loads_them_after_the_first_cell_that_traced_a_launch():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "import sys, time\nimport triton_trace\nfrom triton_trace.analysis import jitsteps",
        "assert 'numba' not in sys.modules and jitsteps._loader is None   # nothing traced yet: nothing loaded",
        ADD + "run_add()",
        textwrap.dedent('''
            t0 = time.time()
            while jitsteps._loader is None or jitsteps._loader.is_alive():
                assert time.time() - t0 < 300
                time.sleep(0.05)
            assert jitsteps._loaded and jitsteps._failed is None, jitsteps._failed
            report = triton_trace.analyze(triton_trace.current_trace())
            assert report.to_dict()["launches"][0]["metrics"]["dram_read_bytes"] >= 8000     # (two inputs of 4000 bytes)
        '''),
    ]
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": ROOT}}).execute()
