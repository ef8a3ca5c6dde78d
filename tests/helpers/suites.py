"""Real pytest runs of a suite in a child process, and their outcomes: the plugin's tests (tests/suite/)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from helpers.paths import TESTS

PLUGIN_SUITE = os.path.join(TESTS, "plugin_suite")      # planted bugs, each beside its correct twin


def run_suite(*args, cwd=PLUGIN_SUITE, root=None, env=None, timeout=600):
    """``pytest *args`` in ``cwd`` (rooted there, or at ``root``), in a child process."""
    root = root or cwd
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--rootdir={root}", f"--confcutdir={root}",
           "-rA", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def outcomes(stdout: str) -> dict:
    """test name -> passed / failed / error, from the ``-rA`` summary of a run."""
    return {m.group(2).split("::")[-1]: m.group(1).lower()
            for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", stdout, re.M)}
