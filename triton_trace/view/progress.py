"""Progress of a long traced launch: programs done of total, in the terminal or in a notebook.

The recorder calls ``callback(done, total, kernel_name)`` after every program (``set_progress``). A bar
appears only for a launch that is big (``min_programs``) or slow (``min_seconds``), and redraws at most
every ``interval`` seconds, so short launches print nothing and long ones cost almost nothing. Ctrl-C
stops the launch; the recorder keeps every program that completed.
"""
from __future__ import annotations

import html
import sys
import time
from typing import Callable, Optional, TextIO

HINT = "Ctrl-C stops and keeps what was recorded"


class _Throttled:
    """Decides when to draw. A new launch starts when ``done`` restarts or the kernel or total changes."""

    def __init__(self, min_programs: int, min_seconds: float, interval: float, clock: Callable[[], float]):
        self.min_programs = min_programs
        self.min_seconds = min_seconds
        self.interval = interval
        self.clock = clock
        self._key = None
        self._done = self._total = 0
        self._start = 0.0
        self._last = None
        self.shown = False

    def __call__(self, done: int, total: int, kernel: str) -> None:
        now = self.clock()
        if (kernel, total) != self._key or done <= self._done:
            if self.shown and self._done < self._total:
                self.abandon()
            self._key, self._total, self._start, self._last, self.shown = (kernel, total), total, now, None, False
            self.start()
        self._done = done
        elapsed = now - self._start
        if not self.shown and total < self.min_programs and elapsed < self.min_seconds:
            return
        if done < total and self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        self.shown = True
        self.draw(done, total, kernel, elapsed)

    def start(self) -> None:
        """A new launch begins."""

    def draw(self, done: int, total: int, kernel: str, elapsed: float) -> None:
        raise NotImplementedError

    def abandon(self) -> None:
        """The previous launch stopped before its end (an error or Ctrl-C): close its bar."""


class TerminalProgress(_Throttled):
    """A one-line bar on stderr, redrawn in place with ``\\r``; a newline when the launch ends."""

    def __init__(self, stream: Optional[TextIO] = None, min_programs: int = 256, min_seconds: float = 1.0,
                 interval: float = 0.1, width: int = 30, clock: Callable[[], float] = time.monotonic):
        super().__init__(min_programs, min_seconds, interval, clock)
        self.stream = stream
        self.width = width

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def start(self) -> None:
        self._written = 0

    def draw(self, done: int, total: int, kernel: str, elapsed: float) -> None:
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        line = f"{kernel}: [{bar}] {done}/{total} programs {elapsed:.1f}s" + ("" if done >= total else f" ({HINT})")
        pad = " " * max(0, self._written - len(line))      # blank what a longer previous frame left
        self._written = len(line)
        out = self._out()
        out.write(f"\r{line}{pad}" + ("\n" if done >= total else ""))
        out.flush()

    def abandon(self) -> None:
        out = self._out()
        out.write("\n")
        out.flush()


class NotebookProgress(_Throttled):
    """An HTML ``<progress>`` element in the cell's output, updated in place through a display handle."""

    def __init__(self, min_programs: int = 256, min_seconds: float = 1.0, interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(min_programs, min_seconds, interval, clock)
        self._handle = None

    @staticmethod
    def html(done: int, total: int, kernel: str, elapsed: float, stopped: bool = False) -> str:
        state = "stopped" if stopped else "done" if done >= total else HINT
        return (f'<div class="tt-progress" style="font-family:sans-serif;font-size:12px">'
                f'<progress value="{int(done)}" max="{max(int(total), 1)}" style="width:240px"></progress> '
                f"{html.escape(kernel)}: {int(done)}/{int(total)} programs, {elapsed:.1f}s ({state})</div>")

    def start(self) -> None:
        self._handle = None

    def draw(self, done: int, total: int, kernel: str, elapsed: float) -> None:
        from IPython.display import HTML, display
        body = HTML(self.html(done, total, kernel, elapsed))
        if self._handle is None:
            self._handle = display(body, display_id=True)
        else:
            self._handle.update(body)
        self._drawn = (done, total, kernel, elapsed)

    def abandon(self) -> None:
        from IPython.display import HTML
        if self._handle is not None:
            self._handle.update(HTML(self.html(*self._drawn, stopped=True)))


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where HTML output is shown), False in a terminal IPython or a script."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    ip = get() if get is not None else None
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def enable_progress(mode: Optional[str] = "auto", **options) -> Optional[Callable]:
    """Show a progress bar for long traced launches, and return the callback installed.

    ``mode``: ``"auto"`` (a notebook bar in Jupyter, a terminal bar when stderr is a terminal, else
    nothing), ``"notebook"``, ``"terminal"``, or None / ``"off"`` to turn it off. ``options`` go to the
    bar (``min_programs``, ``min_seconds``, ``interval``; ``stream`` for the terminal).
    """
    from ..errors import TraceUsageError
    from ..record.session import set_progress
    if mode == "auto":
        if in_notebook():
            mode = "notebook"
        elif getattr(sys.stderr, "isatty", lambda: False)():
            mode = "terminal"
        else:
            mode = None
    if mode in (None, "off", False):
        callback = None
    elif mode == "terminal":
        callback = TerminalProgress(**options)
    elif mode == "notebook":
        callback = NotebookProgress(**options)
    else:
        raise TraceUsageError(f"enable_progress(mode=...) is 'auto', 'terminal', 'notebook' or None; got {mode!r}")
    set_progress(callback)
    return callback


__all__ = ["TerminalProgress", "NotebookProgress", "enable_progress", "in_notebook"]
