"""Ctrl-C never loses what was recorded: a real SIGINT during a launch's finalisation (after its last
program) keeps the launch and writes the kernel's outputs; one while ``triton-trace run`` saves leaves no
partial file and says so in one line. Child processes get SIGINT back even when the test run ignores it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import triton_trace
from triton_trace import cli, trace
from triton_trace.store import tracefile as store
from triton_trace.record import collector
from triton_trace.record.memory import space as memory
from helpers.paths import ROOT, SCRIPTS, TESTS
import kernels as K


def _sigint_during(monkeypatch, owner, name):
    """Make ``owner.name`` receive a real SIGINT while it runs, then finish its work."""
    original = getattr(owner, name)
    sent = []

    def wrapped(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        sent.append(True)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(owner, name, wrapped)
    return sent


@pytest.fixture
def python_sigint():
    """SIGINT as Python installs it in a foreground process: a suite started as a background job inherits
    it ignored, and then no Ctrl-C would arrive."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("owner,name", [(collector.Collector, "finish"), (memory.HostMemory, "copy_back")])
def test_ctrl_c_while_a_launch_is_finalised_keeps_it(monkeypatch, owner, name, python_sigint):
    sent = _sigint_during(monkeypatch, owner, name)
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.zeros(1000)
    kernel = trace(K.make_add())
    with pytest.raises(KeyboardInterrupt):
        kernel[(8,)](x, y, out, 1000, BLOCK=128)
    assert sent
    launches = triton_trace.current_trace().launches
    assert len(launches) == 1 and launches[0].completed and launches[0].recorded_programs == 8
    assert torch.equal(out, x + y)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_while_run_saves_writes_nothing_partial(tmp_path, monkeypatch, capsys):
    script = os.path.join(SCRIPTS, "plain_script.py")
    out = tmp_path / "out.ttrace"
    real_save = store.save

    def interrupted_save(tr, path):
        # the interrupt arrives while the blocks are written
        def bad_describe(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(store, "_describe", bad_describe)
        return real_save(tr, path)
    monkeypatch.setattr(store, "save", interrupted_save)
    status = cli.main(["run", script, "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 130
    assert "interrupted while saving" in err and "was not written" in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_children_get_sigint_back_even_when_the_test_run_ignores_it():
    code = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            f"sys.path.insert(0, {TESTS!r})\n"
            "from helpers.procs import popen_with_sigint\n"
            "p = popen_with_sigint([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "time.sleep(1.5); p.send_signal(signal.SIGINT)\n"
            "print(p.wait(timeout=20))\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) != 0 and time.monotonic() - t0 < 30
