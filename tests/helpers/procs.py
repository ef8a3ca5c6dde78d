"""Starting child processes in tests."""
from __future__ import annotations

import signal
import subprocess


def popen_with_sigint(cmd, **kwargs) -> subprocess.Popen:
    """Start ``cmd`` with SIGINT at its default, whatever this process does with it: a child started from
    a background job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt, so a test
    that sends it Ctrl-C would wait for it forever."""
    return subprocess.Popen(cmd, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)
