"""The exact check that a batched chunk computed what running its programs one by one computes.

Programs of one chunk run op by op in lockstep, so a program could see (or overwrite) what another
program of the same chunk wrote, in an order a sequential run never produces. Both orders agree exactly
when no element that a program of the chunk writes is touched by any other program of the chunk. This
finds, per written storage, the elements two programs touch (``overlap``, shared with the race
detector), after a cheaper test that the programs' element ranges are disjoint.
"""
from __future__ import annotations

import numpy as np

from ..errors import BatchFallback
from ..overlap import ranges_disjoint, shared_elements


class ChunkConflicts:
    def __init__(self, memory, programs: int, scratch: dict):
        self.memory = memory
        self.programs = programs
        self._scratch = scratch          # storage -> shadow array, reused by every chunk of a launch
        self._by_storage: dict = {}      # storage -> list of (offsets, safe, is_write, elem_bytes)

    def add(self, tensor: int, offsets: np.ndarray, safe: np.ndarray, is_write: bool, elem_bytes: int) -> None:
        self._by_storage.setdefault(self.memory.storage_of(tensor), []).append((offsets, safe, is_write, elem_bytes))

    def _ranges(self, accesses) -> tuple:
        lo = np.full(self.programs, np.iinfo(np.int64).max)
        hi = np.full(self.programs, np.iinfo(np.int64).min)
        for offsets, safe, _, _ in accesses:
            o = offsets.reshape(self.programs, -1)
            if o.shape[1] == 0:
                continue
            if safe.all():
                lo, hi = np.minimum(lo, o.min(axis=1)), np.maximum(hi, o.max(axis=1))
            else:
                s = safe.reshape(self.programs, -1)
                lo = np.minimum(lo, np.where(s, o, lo[:, None]).min(axis=1))
                hi = np.maximum(hi, np.where(s, o, hi[:, None]).max(axis=1))
        return lo, hi

    def check(self) -> None:
        """Raise BatchFallback when two programs of the chunk touch an element one of them writes."""
        for sid, accesses in self._by_storage.items():
            if not any(a[2] for a in accesses):
                continue
            if len({a[3] for a in accesses}) > 1:
                raise BatchFallback("one storage is accessed with different element sizes in a chunk")
            if ranges_disjoint(*self._ranges(accesses)):
                continue
            size = self.memory.storages[sid].nbytes // accesses[0][3]
            scratch = self._scratch.get((sid, size))
            if scratch is None:
                scratch = self._scratch[(sid, size)] = np.empty(size, dtype=np.int64)
            els, progs, writes = [], [], []
            for offsets, safe, is_write, _ in accesses:
                prog = np.broadcast_to(np.arange(self.programs).reshape((-1,) + (1,) * (offsets.ndim - 1)),
                                       offsets.shape)
                els.append(offsets[safe])
                progs.append(prog[safe])
                if is_write:
                    writes.append(offsets[safe])
            el = np.concatenate(els)
            shared = shared_elements(el, np.concatenate(progs), size, scratch)
            if shared[np.concatenate(writes)].any():
                name = self.memory.tensors[self.memory.tensor_of_storage(sid)].name
                raise BatchFallback(f"programs of one chunk share elements of '{name}' that one of them writes")
