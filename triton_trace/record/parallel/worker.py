"""A worker: a forked copy of the launch's process that runs one range of its programs and hands back what
it recorded, touched and wrote.

The fork copies everything the launch holds (the interpreter's hooks, the kernel's arguments and memory,
the recording so far) without copying a byte until either side writes it. The worker's recording restarts
empty (``Collector.begin_worker``: only what it records itself goes back), it notes the memory its ops touch
(touches.py), and at its end it writes into a memory file the launch's process made before forking: one
pickle (its recording, its touches, where its chunks ended, what it printed; large arrays out of band, which
the reader maps instead of copying), then the bytes of its write ranges, from its own copy of each storage,
which the launch's process reads straight into its storages (``apply_writes``).

A worker never returns into the launch's code: it leaves through ``os._exit`` whatever happens. It ignores
Ctrl-C (the launch's process stops it), and whatever its programs raise is only noted: the launch's
process runs those programs again and raises it as one process would.
"""
from __future__ import annotations

import ctypes
import io
import mmap
import os
import pickle
import signal
import struct
import sys
import warnings
from typing import Optional

import numpy as np

from .touches import Touches

INBAND = 1 << 20          # arrays of fewer bytes travel inside the pickle
DONE = b"tt-done\n"        # the memory file's last bytes, once the worker wrote all of it


def available() -> Optional[str]:
    """Why this process cannot fork workers, or None."""
    if not hasattr(os, "fork") or not hasattr(os, "memfd_create"):
        return "this platform has no fork() and memfd_create()"
    return None


class Worker:
    """A running worker process and the memory file it answers in."""

    def __init__(self, index: int, pid: int, fd: int, first: int, end: int):
        self.index, self.pid, self.fd, self.first, self.end = index, pid, fd, first, end
        self._reaped = False

    def result(self) -> Optional[dict]:
        """Wait for the worker; what it handed back, or None when it ended without an answer. Its memory
        file stays open for ``apply_writes`` until ``close``."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:        # reaped by someone else (SIGCHLD ignored): the file says if it is whole
            status = 0
        self._reaped = True
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        return _read(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def kill(self) -> None:
        """Stop the worker (its answer is no longer wanted) and reap it."""
        if self._reaped:
            self.close()
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:        # (SIGCHLD ignored: the system reaped it)
            pass
        self._reaped = True
        self.close()


def fork(grid, schedule, end: int, index: int, watch: frozenset, peers) -> Worker:
    """Start a worker running ``grid``'s programs from ``schedule`` up to launch position ``end``, noting its
    reads of the storages ``watch``, keeping values as ``peers`` (plan.ValuePeers) allows."""
    fd = os.memfd_create(f"triton_trace-worker-{index}", os.MFD_CLOEXEC)
    first = schedule.start
    for stream in (sys.stdout, sys.stderr):      # what is buffered is the launch's, printed once
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    parent = os.getpid()
    with warnings.catch_warnings():
        # (Python 3.12+ warns of forking a process with threads: torch's and BLAS's pools are; the worker
        # runs this package's code alone, on the one thread it has, and leaves through os._exit)
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _child(grid, schedule, end, fd, watch, peers, parent)    # never returns
    return Worker(index, pid, fd, first, end)


def _child(grid, s, end: int, fd: int, watch: frozenset, peers, parent: int) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _die_with(parent)
        torch = sys.modules.get("torch")
        if torch is not None:                    # one intra-op thread: a forked OpenMP pool may not come back
            torch.set_num_threads(1)
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        rec, memory = grid.rec, grid.rec.memory
        grid.on_done = None                      # progress is the launch process's to report
        first, start_state = s.start, s.state()
        began = rec.begin_worker()
        rec.touches, rec.budget.peers = Touches(watch), peers
        error = None
        try:
            grid.advance(s, end)
        except BaseException as e:               # raised again where the launch's process runs these programs
            error = f"{type(e).__name__}: {e}"[:500]
        touches = rec.touches.summary()
        rec.touches = rec.budget.peers = None
        part = {"first": first, "end": s.start, "start_state": start_state, "state": s.state(), "error": error,
                "storages": len(memory.storages), "stdout": sys.stdout.getvalue(), "stderr": sys.stderr.getvalue()}
        slices = []
        if error is None:
            part.update(recording=rec.handoff(began), touches=touches)
            slices = [_slices(_bytes(memory, sid), lo, hi) for sid, (lo, hi) in sorted(touches["writes"].items())]
        _write(fd, part, [v for views in slices for v in views])
        code = 0
    finally:
        os._exit(code)


def _die_with(parent: int) -> None:
    """Have the kernel kill this worker when the launch's process ends (Linux's PR_SET_PDEATHSIG), so a
    launch killed from outside leaves no worker running on."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)          # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:                          # (it ended before the request)
        os._exit(1)


def _bytes(memory, sid: int) -> np.ndarray:
    """The bytes of storage ``sid`` where the launch keeps them now (its copy, or the caller's storage)."""
    return memory.typed_view(memory.tensor_of_storage(sid), np.uint8)


def apply_writes(memory, fd: int, at: int, ranges: dict) -> None:
    """Read a worker's written bytes (the bytes of its write ``ranges``, storage by storage in order, from
    offset ``at`` of its memory file) into this process's storages, marked written as the worker's stores
    marked its own."""
    memory.end_views()
    for sid, (lo, hi) in sorted(ranges.items()):
        memory.mark_written(memory.tensor_of_storage(sid))
        view = _bytes(memory, sid)
        if len(lo) <= MANY:
            for a, b in zip(lo.tolist(), hi.tolist()):
                _pread(fd, view[a:b], at)
                at += b - a
        else:
            data = np.empty(int((hi - lo).sum()), np.uint8)
            _pread(fd, data, at)
            at += len(data)
            view[_index(lo, hi)] = data


MANY = 256                # ranges of one storage past which its bytes travel gathered into one array


def _slices(view: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list:
    """The bytes of the ranges, as views where they are few (written to the file from where they lie)."""
    if len(lo) <= MANY:
        return [view[a:b] for a, b in zip(lo.tolist(), hi.tolist())]
    return [view[_index(lo, hi)]]


def _index(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Every byte of the ranges, in order."""
    lens = hi - lo
    return np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(lo - (np.cumsum(lens) - lens), lens)


def _pread(fd: int, out: np.ndarray, at: int) -> None:
    view = memoryview(out).cast("B")
    while view.nbytes:
        n = os.preadv(fd, [view], at)
        if n <= 0:
            raise OSError(f"a worker's memory file ended {view.nbytes} bytes early")
        view, at = view[n:], at + n


# -- the memory file: a header of sizes, the pickle, each out-of-band buffer, then the written bytes --------
def _write(fd: int, part: dict, data: list) -> None:
    buffers = []

    def out_of_band(buf) -> bool:
        if buf.raw().nbytes < INBAND:
            return True
        buffers.append(buf)
        return False
    head = pickle.dumps(part, protocol=5, buffer_callback=out_of_band)
    raws = [memoryview(head)] + [b.raw() for b in buffers]
    tail = [memoryview(np.ascontiguousarray(d)).cast("B") for d in data]
    header = struct.pack(f"<q{len(raws)}q", len(raws), *(r.nbytes for r in raws))
    for chunk in [memoryview(header)] + raws + tail + [memoryview(DONE)]:
        while chunk.nbytes:
            chunk = chunk[os.write(fd, chunk):]


def _read(fd: int) -> Optional[dict]:
    """The worker's part, with ``"data_at"``: where its written bytes start in the file."""
    size = os.fstat(fd).st_size
    if size < 8 + len(DONE) or os.pread(fd, len(DONE), size - len(DONE)) != DONE:
        return None                      # (a worker that stopped while writing)
    (count,) = struct.unpack("<q", os.pread(fd, 8, 0))
    sizes = struct.unpack(f"<{count}q", os.pread(fd, 8 * count, 8))
    end = 8 + 8 * count + sum(sizes)
    m = mmap.mmap(fd, end, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), prot=mmap.PROT_READ)
    view = memoryview(m)
    at = 8 + 8 * count
    parts = []
    for n in sizes:
        parts.append(view[at:at + n])
        at += n
    part = pickle.loads(parts[0], buffers=parts[1:])
    part["data_at"] = end
    return part
