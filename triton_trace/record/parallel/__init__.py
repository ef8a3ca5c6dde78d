"""A launch's programs on several cores, recorded as one process records them (``trace(workers=...)``).

Triton's interpreter runs a program's ops in Python under the interpreter lock, so threads do not help;
processes do. After the launch's first chunk (which settles the chunk size and times a program), the rest
of its programs are cut into ranges at the launch's own chunk boundaries (plan.py). The launch's process
forks one worker per range but the first, runs the first itself, then takes the workers' results in
program order (worker.py): each is absorbed into the launch's recording as if its programs had run in
this process, and the bytes it wrote are copied into this process's storages.

A worker's result is taken only where it is exactly what one process would have recorded and computed
(``_judge``): its chunks started where and as the launch's chunks would have (no earlier fallback moved
them), it read nothing an earlier worker wrote and wrote nothing an earlier worker wrote (touches.py: an
atomic counter, a program reading its predecessor's output), it reached no memory outside the arguments,
no program of it raised, and every runtime check can merge what it noted. The first worker that fails one
of these, and every worker after it, is dropped, and their programs run again in this process from where
the last taken worker stopped, with the launch's meta (``meta["execution"]["workers"]``) saying why. So
the recording, the findings and the outputs are those of ``workers=1`` bit for bit, whatever happened.
"""
from __future__ import annotations

import mmap
import sys
import time
from typing import Optional

import numpy as np

from . import plan as _plan
from . import worker as _worker
from .touches import Touches, meet, union

SAMPLE = 16             # programs of the first, timed part of a launch that runs one program at a time


def wanted(workers: Optional[int]) -> bool:
    """Whether a launch asked for ``workers`` (None: the default) may use more than one process."""
    return (_plan.cores() if workers is None else workers) > 1


def run(grid, s, workers: Optional[int]) -> None:
    """Run ``grid``'s programs from schedule ``s`` on, in up to ``workers`` processes (None: as many as this
    process may use cores that no other process keeps busy) where that pays and stays exact; ``s`` ends where
    this process must go on (the launch's end when every worker was taken)."""
    rec, total = grid.rec, grid.total
    first, t0 = s.start, time.perf_counter()
    while True:                 # the first chunk (until one ran batched, where chunks still grow)
        grid.step(s, min(s.chunk, total - s.start) if s.batched else min(SAMPLE, total - s.start))
        if s.start >= total or not (s.batched and s.grow):
            break
    per_program = (time.perf_counter() - t0) / max(s.start - first, 1)
    if s.start >= total:
        return _note(rec, workers or _plan.cores(), 1, "the first chunk ran every program")
    why = _worker.available()
    if why is None and rec.budget.memory_limit is not None:
        why = "memory_limit= bounds one process's recording"
    asked = _plan.cores() if workers is None else workers
    idle = _plan.idle_cores(asked) if workers is None else asked
    if why is None and idle < 2:
        why = f"other processes keep {asked - idle + 1} of this process's {asked} cores busy"
    if why is not None:
        return _note(rec, asked, 1, why)
    busy = f"other processes keep {asked - idle} of this process's {asked} cores busy" if idle < asked else None
    p = _plan.split(s.start, total, s.chunk if s.batched else 1, idle, per_program)
    if len(p.ranges) < 2:
        return _note(rec, asked, 1, p.reason)
    used, why = _run_ranges(grid, s, p.ranges)
    _note(rec, asked, used, why or p.reason or busy)


def _note(rec, asked: int, used: int, reason) -> None:
    rec.execution.workers = {"asked": int(asked), "used": int(used), "reason": reason}


def _run_ranges(grid, s, ranges: tuple) -> tuple:
    """Fork a worker per range but the first, run the first here, take the workers' results in order.
    Returns (workers whose programs were taken, this process included; why the rest were not, or None)."""
    rec = grid.rec
    memory = rec.memory
    written = [st.written for st in memory.storages]        # as every worker starts
    watch = frozenset(sid for sid, w in enumerate(written) if w)
    storages = len(memory.storages)
    shared = np.frombuffer(mmap.mmap(-1, 16 * len(ranges)), dtype=np.int64)   # (anonymous: shared with workers)
    base = rec.budget.value_elems
    started = []
    try:
        for index, (a, b) in enumerate(ranges[1:], 1):
            started.append(_worker.fork(grid, type(s)(a, s.chunk, s.misses, s.batched, s.grow), b, index, watch,
                                        _plan.ValuePeers(shared, index, base)))
    except OSError as e:
        for w in started:
            w.kill()
        return 1, f"no worker process could start ({e})"
    try:
        rec.touches, rec.budget.peers = Touches(), _plan.ValuePeers(shared, 0, base)
        try:
            grid.advance(s, ranges[0][1])
            mine = rec.touches.summary()
        finally:
            rec.touches = rec.budget.peers = None
        writes, atomic, used, why = dict(mine["writes"]), set(mine["atomic"]), 1, None
        for w in started:
            if why is not None:
                w.kill()
                continue
            try:
                part = w.result()
                why = _judge(part, s, writes, written, storages, atomic, rec)
            except Exception as e:         # (an unreadable result is a worker whose programs run here again)
                why = f"its result could not be read ({type(e).__name__}: {e})"
            if why is not None:
                w.close()
                why = f"programs {w.first}..{w.end - 1} ran again in this process: {why}"
                continue
            try:
                _take(part, w.fd, grid, s, writes)
            finally:
                w.close()
            atomic |= part["touches"]["atomic"]
            used += 1
            if s.start < w.end:
                why = (f"programs {s.start}..{w.end - 1} ran again in this process: the chunks before them fell "
                       f"back to one program at a time, so theirs would not be the launch's")
    except BaseException:
        for w in started:
            w.kill()
        raise
    return used, why


def _judge(part, s, writes: dict, written: list, storages: int, atomic: set, rec):
    """Why a worker's result is not what one process would have recorded and computed, or None."""
    if part is None:
        return "its process ended without a result"
    if part["error"] is not None:
        return f"a program raised there ({part['error'].splitlines()[0][:200]})"
    if part["first"] != s.start or part["start_state"] != s.state():
        return "the chunks before them fell back to one program at a time, so theirs would not be the launch's"
    if part["storages"] != storages:
        return "its programs reached memory outside the kernel's arguments"
    t = part["touches"]
    memory = rec.memory
    name = lambda sid: memory.tensors[memory.tensor_of_storage(sid)].name  # noqa: E731
    for kind, verb in (("reads", "read"), ("writes", "write")):
        for sid, ranges in t[kind].items():
            if meet(writes.get(sid), ranges):
                how = " with atomics" if sid in atomic or sid in t["atomic"] else ""
                return f"its programs {verb} elements of '{name(sid)}' that an earlier worker's programs write{how}"
    for sid in sorted(t["storages"]):
        if not written[sid] and sid in writes:
            return f"its programs use '{name(sid)}', which an earlier worker's programs were the first to write"
    return rec.mergeable(part["recording"])


def _take(part: dict, fd: int, grid, s, writes: dict) -> None:
    """Absorb a judged worker's result: its bytes, its recording, where its chunks ended, what it printed."""
    rec = grid.rec
    t = part["touches"]
    _worker.apply_writes(rec.memory, fd, part["data_at"], t["writes"])
    rec.absorb(part["recording"])
    for sid, ranges in t["writes"].items():
        writes[sid] = union(writes.get(sid), ranges)
    s.start = part["end"]
    s.chunk, s.misses, s.batched, s.grow = part["state"]
    for text, stream in ((part["stdout"], sys.stdout), (part["stderr"], sys.stderr)):
        if text:
            stream.write(text)
    if grid.on_done is not None and part["end"] > part["first"]:
        grid.on_done(part["end"] - part["first"])
