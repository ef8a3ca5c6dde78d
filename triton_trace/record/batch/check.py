"""The exact check that a batched chunk computed what running its programs one by one computes.

Programs of one chunk run op by op in lockstep, so a program could see (or overwrite) what another
program of the same chunk wrote, in an order a sequential run never produces. Both orders agree exactly
when no element that a program of the chunk writes is touched by any other program of the chunk. This
finds, per written storage, the elements two programs touch (``overlap``, shared with the race
detector), after a cheaper test that the programs' element ranges are disjoint.
"""
from __future__ import annotations

import numpy as np

from ...errors import BatchFallback, ChunkRetry
from ...model.lanes.encoding import core
from ...model.overlap import programs_meet, ranges_disjoint, shared_elements
from .affine import affine_runs


class ChunkConflicts:
    def __init__(self, memory, programs: int, scratch: dict):
        self.memory = memory
        self.programs = programs
        self._scratch = scratch          # storage -> shadow array, reused by every chunk of a launch
        # storage -> list of (offsets or None, safe, is_write, elem_bytes, lo, hi, affine, programs)
        self._by_storage: dict = {}
        # (storage, entry index) -> (tensor, the values a plain store wrote): where programs of the chunk store
        # to shared elements and nothing else touches the storage, the sequential result is put back (fix_up)
        self._stored: dict = {}
        self._last = None

    def add(self, tensor: int, offsets: np.ndarray, safe: np.ndarray, is_write: bool, elem_bytes: int,
            affine=None, programs=None) -> None:
        """``affine``: (first offset per program, element strides) when every program's offsets are its
        first one plus one pattern (record/batch/affine.py): its ranges follow without a scan when every lane
        is safe. ``programs``: the chunk's programs the rows of ``offsets`` belong to (a masked loop's
        sub-chunk), None: all of them; ``lo``/``hi`` below are per row."""
        sid = self.memory.storage_of(tensor)
        if programs is None:
            programs = np.arange(self.programs)
        lo = hi = None
        if affine is not None:
            # per program: all its lanes safe (the ranges follow from the strides) or none (a program sitting
            # out a masked loop's trip: an empty range); anything else is scanned
            if core(np.asarray(safe)).all():       # (a broadcast mask: its distinct values only)
                full, empty = np.ones(len(programs), dtype=bool), np.zeros(len(programs), dtype=bool)
            else:
                rows = np.broadcast_to(safe, offsets.shape).reshape(len(programs), -1)
                full, empty = rows.all(axis=1), ~rows.any(axis=1)
            if (full | empty).all():
                first, strides = affine
                shape = offsets.shape[1:]
                lo = first + sum(min(0, s * (n - 1)) for s, n in zip(strides, shape))
                hi = first + sum(max(0, s * (n - 1)) for s, n in zip(strides, shape))
                if empty.any():
                    lo = np.where(empty, np.iinfo(np.int64).max, lo)
                    hi = np.where(empty, np.iinfo(np.int64).min, hi)
        if is_write or self.memory.storages[sid].written:
            entry = (offsets, safe, is_write, elem_bytes, lo, hi, affine, programs)
        else:
            # Nothing has written this storage yet (a read-only input, usually): keep each program's range
            # of elements, not its lanes. Should the chunk write the storage after all and the ranges
            # overlap, check() asks for the chunk to run again; the storage is marked written by then.
            if lo is None:
                lo, hi = self._span(offsets, safe)
            entry = (None, None, False, elem_bytes, lo, hi, None, programs)
        self._by_storage.setdefault(sid, []).append(entry)
        self._last = (sid, len(self._by_storage[sid]) - 1)

    def stored(self, tensor: int, values: np.ndarray) -> None:
        """The values the plain store just added (``add``) writes, for ``check``'s fix-up."""
        if self._last is not None:
            self._stored[self._last] = (tensor, values)
            self._last = None

    def _span(self, offsets: np.ndarray, safe: np.ndarray) -> tuple:
        """Per program: the smallest and largest offset of its safe lanes (lo > hi when it has none)."""
        o = offsets.reshape(offsets.shape[0], -1)
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        if o.shape[1] == 0:
            return np.full(len(o), big), np.full(len(o), small)
        if safe.all():
            return o.min(axis=1), o.max(axis=1)
        s = np.broadcast_to(safe, offsets.shape).reshape(len(o), -1)
        return np.where(s, o, big).min(axis=1), np.where(s, o, small).max(axis=1)

    def _ranges(self, accesses) -> tuple:
        lo = np.full(self.programs, np.iinfo(np.int64).max)
        hi = np.full(self.programs, np.iinfo(np.int64).min)
        for offsets, safe, _, _, a_lo, a_hi, _, programs in accesses:
            if a_lo is None:
                a_lo, a_hi = self._span(offsets, safe)
            lo[programs], hi[programs] = np.minimum(lo[programs], a_lo), np.maximum(hi[programs], a_hi)
        return lo, hi

    def _runs_disjoint(self, accesses) -> bool:
        """No element is touched by two programs, decided from the runs of consecutive elements that
        affine accesses (tiles, rows) are made of, without their lanes: False when some access is not
        affine or has no unit stride, or when runs of two programs meet (then the lanes decide)."""
        starts, ends, progs = [], [], []
        for offsets, _, _, _, _, _, affine, programs in accesses:
            runs = None if affine is None else affine_runs(affine[0], affine[1], offsets.shape[1:])
            if runs is None:
                return False
            starts.append(runs[0].reshape(-1))
            ends.append(runs[1].reshape(-1))
            progs.append(np.repeat(programs, runs[0].shape[1]))
        return not programs_meet(np.concatenate(starts), np.concatenate(ends), np.concatenate(progs))

    def _any_shared(self, accesses, owner: np.ndarray) -> bool:
        """Whether any element is touched by two programs of the chunk (one scatter, one gather per access;
        no lane arrays are built when every lane is safe, the usual case)."""
        blocks = []
        for offsets, safe, _, _, _, _, _, programs in accesses:
            col = programs.astype(owner.dtype).reshape(-1, 1)
            o = offsets.reshape(len(programs), -1)
            s = np.broadcast_to(safe, offsets.shape).reshape(len(programs), -1)
            full = bool(s.all())
            if full:
                owner[o] = col
                blocks.append((o, col))
            else:
                el, prog = o[s], np.broadcast_to(col, o.shape)[s]
                owner[el] = prog
                blocks.append((el, prog))
        return any(bool((owner[el] != prog).any()) for el, prog in blocks)

    def check(self) -> None:
        """Raise BatchFallback when two programs of the chunk touch an element one of them writes."""
        for sid, accesses in self._by_storage.items():
            if not any(a[2] and a[1].any() for a in accesses):
                continue                      # nothing written to this storage (no write had a safe lane)
            if len(accesses) == 1:
                # One op is all the chunk does to this storage, applied lane by lane over the programs in
                # order, as one program after another would. An atomic (a counter or a histogram shared by
                # the programs): the values and what each lane got back are the same. A plain store (the
                # programs race for the elements they share, which the analysis reports): the last
                # program's value stays, as in a sequential run (scatters write programs in order).
                continue
            if len({a[3] for a in accesses}) > 1:
                raise BatchFallback("one storage is accessed with different element sizes in a chunk")
            if ranges_disjoint(*self._ranges(accesses)):
                continue
            if any(a[0] is None for a in accesses):
                name = self.memory.tensors[self.memory.tensor_of_storage(sid)].name
                raise ChunkRetry(f"'{name}' is written after its loads were kept as ranges")
            if self._runs_disjoint(accesses):
                continue
            size = self.memory.storages[sid].nbytes // accesses[0][3]
            scratch = self._scratch.get((sid, size))
            if scratch is None:
                scratch = self._scratch[(sid, size)] = np.empty(size, dtype=np.int32)
            if not self._any_shared(accesses, scratch):
                continue
            els, progs, writes = [], [], []
            for offsets, safe, is_write, _, _, _, _, programs in accesses:
                prog = np.broadcast_to(programs.reshape((-1,) + (1,) * (offsets.ndim - 1)), offsets.shape)
                els.append(offsets[safe])
                progs.append(prog[safe])
                if is_write:
                    writes.append(offsets[safe])
            el = np.concatenate(els)
            shared = shared_elements(el, np.concatenate(progs), size, scratch)
            if shared[np.concatenate(writes)].any() and not self._fix_up(sid, accesses, shared):
                name = self.memory.tensors[self.memory.tensor_of_storage(sid)].name
                raise BatchFallback(f"programs of one chunk share elements of '{name}' that one of them writes")

    def _fix_up(self, sid: int, accesses, shared: np.ndarray) -> bool:
        """Where the chunk only stores to this storage (plain stores, no load or atomic), with values of one
        type: each element that programs share ends as one program after another leaves it, the value of its
        last writer in that order (program, then op), where the chunk, op after op, left the last op's. The
        values do not depend on the storage (nothing reads it), so this is the sequential result exactly.
        False (nothing changed) otherwise: the chunk then runs one program at a time."""
        stored = [self._stored.get((sid, k)) for k in range(len(accesses))]
        if any(v is None for v in stored) or len({np.asarray(v).dtype.str for _, v in stored}) != 1:
            return False
        self.memory.settle(sid)               # the chunk's held stores to it are written first
        view = self.memory.typed_view(stored[0][0], np.asarray(stored[0][1]).dtype)
        if not view.flags.writeable or not view.size:
            return False
        els, progs, ops, vals = [], [], [], []
        for k, ((offsets, safe, _, _, _, _, _, programs), (_, values)) in enumerate(zip(accesses, stored)):
            offsets = np.asarray(offsets)
            lanes = np.broadcast_to(safe, offsets.shape) & shared[np.where(safe, offsets, 0)]
            if not lanes.any():
                continue
            prog = np.broadcast_to(programs.reshape((-1,) + (1,) * (offsets.ndim - 1)), offsets.shape)
            els.append(offsets[lanes])
            progs.append(prog[lanes])
            ops.append(np.full(int(lanes.sum()), k))
            vals.append(np.broadcast_to(values, offsets.shape)[lanes])
        el, prog, op, val = (np.concatenate(a) for a in (els, progs, ops, vals))
        key = prog.astype(np.int64) * len(accesses) + op     # sequential order: program, then op
        latest = np.full(len(shared), -1, dtype=np.int64)
        np.maximum.at(latest, el, key)
        last = key == latest[el]        # (a program's lanes that meet within one op: the last in C order wins)
        view[el[last]] = val[last]
        return True
