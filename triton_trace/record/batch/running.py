"""The chunk a builder is running: its programs, the sub-chunk a masked loop or an early exit narrows it to,
and the value every program of it agrees on. Apart from the builder subclass (chunk.py), so the masked
control flow, the tensor patches and the checks that only ask "which programs run now" do not load the
batched memory ops, pointers and dots underneath it."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import ChunkDiverged
from ..interp.access import TensorHandle


class Chunk:
    """The programs of a running chunk. It lives on the builder instance while the chunk runs (``start``
    puts it there, ``running`` reads it), so the builder's methods and the patches find it without a
    module global. A masked loop may run some trips on a sub-chunk (``sub``): only the programs still
    running, their values' rows compacted; ``rows`` maps its rows to the programs of the chunk it came from."""
    __slots__ = ("size", "pid_data", "base", "active", "on_active", "rows", "root", "scratch", "exit_keep")

    def __init__(self, pids: np.ndarray, base: type):
        cols = []
        for axis in range(3):
            col = pids[:, axis].astype(np.int32)
            cols.append(col[:1].reshape(1, 1) if (col == col[0]).all() else col.reshape(-1, 1))
        self.pid_data = tuple(cols)       # per axis: (P, 1) int32, or (1, 1) where every program shares the value
        self.size = len(pids)
        self.base = base                  # the builder's own class, whose methods do the per-program work
        self.active = None                # (P,) bool: the programs running the current ops (masked loops)
        self.on_active = None             # told of every change of ``active`` (the recorder)
        self.rows = None                  # a sub-chunk's programs, as indexes into the root chunk's
        self.root = self
        self.scratch = {}                 # reusable buffers of the chunk's products (batch/dot.py)
        self.exit_keep = None             # the programs an early exit left running, to be cut to (divergence/exits.py)

    def sub(self, keep: np.ndarray) -> "Chunk":
        """The programs ``keep`` ((size,) bool) of this chunk, as a chunk of their own."""
        idx = np.flatnonzero(keep)
        c = Chunk.__new__(Chunk)
        c.size, c.base, c.active, c.on_active, c.root = len(idx), self.base, None, None, self.root
        c.exit_keep = None
        c.scratch = self.root.scratch
        c.pid_data = tuple(col if col.shape[0] == 1 else col[idx] for col in self.pid_data)
        c.rows = idx if self.rows is None else self.rows[idx]
        return c

    def set_active(self, active) -> None:
        self.active = active
        if self.root.on_active is not None:
            self.root.on_active(active, self.rows)

    def masked(self, mask):
        """A memory op's mask (widened to every program) with the programs sitting out switched off."""
        if self.active is None:
            return mask
        m = mask.data & self.active.reshape((-1,) + (1,) * (mask.data.ndim - 1))
        return TensorHandle(m, mask.dtype)


_ATTR = "_tt_chunk"       # the running chunk, on the builder instance


def stop(builder, chunk: Chunk) -> None:
    """Back to one program at a time: the builder's own class (chunk.start gave it the batched one)."""
    builder.__class__ = chunk.base
    builder.__dict__.pop(_ATTR, None)


def running(builder) -> Optional[Chunk]:
    """The chunk ``builder`` is running, or None (one program at a time)."""
    return builder.__dict__.get(_ATTR)


def switch(builder, chunk: Chunk) -> None:
    """Run the following ops on ``chunk`` (a sub-chunk of the running one, or the one it came from)."""
    setattr(builder, _ATTR, chunk)


def widen(builder, diverged: ChunkDiverged) -> ChunkDiverged:
    """``diverged`` raised on a sub-chunk, its labels over the root chunk's programs: those outside the
    sub-chunk (done with a masked loop earlier) form a group of their own."""
    chunk = running(builder)
    labels = np.asarray(diverged.labels)
    if chunk is None or chunk.rows is None or len(labels) != chunk.size:
        return diverged
    root = np.full(chunk.root.size, int(labels.max(initial=0)) + 1, dtype=np.int64)
    root[chunk.rows] = labels
    return ChunkDiverged(str(diverged), root)


def program_shape(data, chunk: Optional[Chunk]) -> tuple:
    """The per-program shape of a handle's data (without the program axis while a chunk runs)."""
    shape = np.shape(data)
    return tuple(shape[1:]) if chunk is not None else tuple(shape)


def program_size(data, chunk: Optional[Chunk]) -> int:
    return int(np.prod(program_shape(data, chunk), dtype=np.int64))


def agree(data, active=None) -> np.ndarray:
    """The value every program of the chunk holds, or ChunkDiverged (labelling the programs that agree,
    compared bit for bit) when they differ. Programs outside ``active`` (sitting out a masked loop's trip)
    hold values nothing uses and are not compared."""
    d = np.asarray(data)
    if d.ndim and d.shape[0] > 1:
        if active is not None and len(active) == d.shape[0] and not active.all():
            d = d[active] if active.any() else d[:1]
        first = d[:1]
        same = (d == first) | ((d != d) & (first != first))     # NaN agrees with NaN
        if not same.all():
            d = np.asarray(data)
            rows = np.ascontiguousarray(d.reshape(d.shape[0], -1))
            keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
            _, inverse = np.unique(keys, return_inverse=True)
            raise ChunkDiverged("programs of the chunk take different branches or loop counts", inverse.reshape(-1))
    return d[0] if d.ndim else d
