"""The exact check that a batched chunk computed what running its programs one by one computes.

Programs of one chunk run op by op in lockstep, so a program could see (or overwrite) what another
program of the same chunk wrote, in an order a sequential run never produces. Both orders agree exactly
when no element that a program of the chunk writes is touched by any other program of the chunk. This
keeps, per written storage, a shadow array holding the program that wrote each element (the "last
writer"), filled and checked with one scatter and one gather per access.
"""
from __future__ import annotations

import numpy as np

from ..errors import BatchFallback


class ChunkConflicts:
    def __init__(self, memory, programs: int, owners: dict):
        self.memory = memory
        self.programs = programs
        self._owners = owners            # storage -> shadow array, all -1 between chunks (kept per launch)
        self._by_storage: dict = {}      # storage -> list of (offsets, safe, is_write, elem_bytes)

    def add(self, tensor: int, offsets: np.ndarray, safe: np.ndarray, is_write: bool, elem_bytes: int) -> None:
        self._by_storage.setdefault(self.memory.storage_of(tensor), []).append((offsets, safe, is_write, elem_bytes))

    def _disjoint(self, accesses) -> bool:
        """True when the programs' element ranges on this storage do not overlap (the common case of
        row- or block-partitioned kernels): two reductions per access instead of a scatter and gathers."""
        lo = np.full(self.programs, np.iinfo(np.int64).max)
        hi = np.full(self.programs, np.iinfo(np.int64).min)
        for offsets, safe, _, _ in accesses:
            if offsets.shape[0] != self.programs:
                return False
            o = offsets.reshape(self.programs, -1)
            if o.shape[1] == 0:
                continue
            if not safe.all():
                s = safe.reshape(self.programs, -1)
                lo = np.minimum(lo, np.where(s, o, lo[:, None]).min(axis=1))
                hi = np.maximum(hi, np.where(s, o, hi[:, None]).max(axis=1))
            else:
                lo, hi = np.minimum(lo, o.min(axis=1)), np.maximum(hi, o.max(axis=1))
        used = lo <= hi
        order = np.argsort(lo[used], kind="stable")
        return bool((hi[used][order][:-1] < lo[used][order][1:]).all())

    def check(self) -> None:
        """Raise BatchFallback when two programs of the chunk touch an element one of them writes."""
        for sid, accesses in self._by_storage.items():
            writes = [a for a in accesses if a[2]]
            if not writes:
                continue
            if len({a[3] for a in accesses}) > 1:
                raise BatchFallback("one storage is accessed with different element sizes in a chunk")
            if self._disjoint(accesses):
                continue
            size = self.memory.storages[sid].nbytes // accesses[0][3]
            owner = self._owners.get((sid, size))
            if owner is None:
                owner = self._owners[(sid, size)] = np.full(size, -1, dtype=np.int32)
            lanes = []
            for offsets, safe, is_write, _ in accesses:
                prog = np.broadcast_to(np.arange(self.programs, dtype=np.int32).reshape(
                    (-1,) + (1,) * (offsets.ndim - 1)), offsets.shape)
                lanes.append((offsets[safe], prog[safe], is_write))
            for el, pr, is_write in lanes:
                if is_write:
                    owner[el] = pr
            bad = False
            for el, pr, is_write in lanes:
                o = owner[el]
                # a written element must belong to one program; a read one to nobody or the reader
                if ((o != pr) & ((o >= 0) | is_write)).any():
                    bad = True
                    break
            for el, _, is_write in lanes:
                if is_write:
                    owner[el] = -1
            if bad:
                name = self.memory.tensors[self.memory._tensor_storage.index(sid)].name
                raise BatchFallback(f"programs of one chunk share elements of '{name}' that one of them writes")
