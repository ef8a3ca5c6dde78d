"""Fewer young garbage collections while a launch is traced, so the launch's own objects are not promoted.

A traced launch makes thousands of container objects that live as long as it runs: the hooks it installs
and their undo log, the recorder's events, the rewritten kernel's values. With CPython's default threshold
(a young collection every 700 net allocations) each launch sees a few young collections, they find these
objects alive and move them to the oldest generation, and every so many moved objects CPython collects the
whole heap: in a test process that is the test suite's heap (400,000 objects in Triton's language tests,
tens of milliseconds a pass). benchmarks/speed/bench_fresh_launch.py: a 1-program launch of a kernel made
anew spent 1.8 ms of its 7.0 ms collecting (the plain interpreter 0.07 of 1.9 ms), a 2000-program spin lock
0.38 s of 4.3 s (RESULTS_suite_slice.txt).

``deferred()`` raises the young threshold to YOUNG for the duration of the outermost traced launch (a
process-wide setting: launches on several threads share one window) and puts back what it found when the
last one ends. The launch's objects are then freed by their reference counts when it ends, before a
collection ever sees them. Collection still runs inside the window, every YOUNG allocations, so a launch
that makes reference cycles op after op stays bounded. Nothing a kernel computes or records depends on when
the collector runs. A process that turned the collector off, or set a higher threshold, keeps its setting.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

YOUNG = 20_000                # net allocations between young collections inside a traced launch

_lock = threading.Lock()
_depth = 0
_saved = None                 # (thresholds found, thresholds set) while a window is open and changed them


@contextmanager
def deferred():
    """Young collections every YOUNG allocations instead of the process's own threshold, while inside."""
    _enter()
    try:
        yield
    finally:
        _exit()


def _enter() -> None:
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        found = gc.get_threshold()
        if gc.isenabled() and 0 < found[0] < YOUNG:
            wanted = (YOUNG,) + tuple(found[1:])
            gc.set_threshold(*wanted)
            _saved = (found, wanted)


def _exit() -> None:
    global _depth, _saved
    with _lock:
        _depth -= 1
        if _depth or _saved is None:
            return
        found, wanted = _saved
        _saved = None
        if gc.get_threshold() == wanted:      # (a threshold someone set meanwhile is theirs to keep)
            gc.set_threshold(*found)
