"""Work the analysis can do on a second core.

The analysis is numpy on large arrays (sorts, scans, gathers), and numpy lets go of the interpreter lock
inside each of them, so two independent parts of it run side by side on two cores. ``beside(fn, ...)``
runs ``fn`` in a worker thread while the caller's block runs, or in the caller's thread when the process
may use one core only (or ``TRITON_TRACE_THREADS=1``). What runs beside must only read what the block
reads: results never depend on which finished first.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Callable


def cores() -> int:
    """Cores this process may use (``TRITON_TRACE_THREADS`` caps it)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    cap = os.environ.get("TRITON_TRACE_THREADS", "").strip()
    return max(1, min(n, int(cap))) if cap.isdigit() and int(cap) > 0 else n


class Beside:
    """The outcome of ``fn(*args)``, run in a thread of its own or, on one core, on first ``result()``."""

    def __init__(self, fn: Callable, args: tuple, threaded: bool):
        self._fn, self._args = fn, args
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="triton_trace-analysis", daemon=True) \
            if threaded else None
        if self._thread is not None:
            self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn(*self._args)
        except BaseException as e:        # handed to the caller by result()
            self._error = e
        self._done = True

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        elif not self._done:
            self._run()

    def result(self) -> Any:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


@contextmanager
def beside(fn: Callable, *args):
    """Run ``fn(*args)`` beside the block; ``.result()`` after the block gives its value (or raises its
    error). If the block raises, the side work is waited for (never left running) and the block's error
    propagates."""
    side = Beside(fn, args, threaded=cores() > 1)
    try:
        yield side
    finally:
        if side._thread is not None:
            side._thread.join()
