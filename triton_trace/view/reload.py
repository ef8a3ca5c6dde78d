"""Auto-reload: a page served from a trace file follows the file. When a script run writes the file again
(``triton-trace run ... -o trace.ttrace``), the app loads the new trace on the page's next poll of
``GET /api/version`` and the page reloads itself. A file caught half-written, or damaged, keeps the trace
shown and says why; the next poll tries again."""
from __future__ import annotations

import os
import threading
from typing import Callable, Optional


class Reloader:
    """Watches one trace file; ``check()`` swaps in a new TraceIndex (built by ``make_index(path)``) when
    the file's size or modification time changed, and counts the swaps."""

    def __init__(self, path: str, make_index: Callable, install: Callable):
        self.path = os.fspath(path)
        self.make_index = make_index
        self.install = install            # install(index): make it the one the app answers from
        self.version = 0
        self.error: Optional[str] = None
        self._stamp = self._stat()
        self._lock = threading.Lock()

    def _stat(self) -> Optional[tuple]:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def check(self) -> dict:
        with self._lock:
            stamp = self._stat()
            if stamp is not None and stamp != self._stamp:
                try:
                    index = self.make_index(self.path)
                except Exception as e:     # half-written or damaged: keep the trace shown, retry next poll
                    self.error = f"{os.path.basename(self.path)} changed but could not be loaded: {type(e).__name__}: {e}"
                else:
                    self.install(index)
                    self._stamp, self.version, self.error = stamp, self.version + 1, None
            elif stamp is None:
                self.error = f"{os.path.basename(self.path)} is gone; showing the trace loaded before"
            return {"watching": True, "version": self.version, "error": self.error}
