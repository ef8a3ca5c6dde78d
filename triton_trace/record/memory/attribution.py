"""Attributing a memory op's lanes to a tensor argument of the launch (the address-space side of
HostMemory): which argument each op touches, the lanes' element offsets in its storage, and which lanes
are safe to execute. Pointers whose provenance is known (memory/provenance.py) are attributed to their
argument; otherwise the addresses decide. Affine blocks (record/batch/affine.py) skip the per-lane scans.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...errors import BatchFallback
from ..batch.affine import LazyOffsets, affine_rows, described


class Attribution:
    """Mixed into HostMemory, whose storages, tensors and sorted storage starts it reads."""
    affine = None                # (first offset per program, element strides) of the last chunk op
    known_affine = None          # (first address per program, byte strides) of the next op's pointers
    found_affine = None          # the same, found by the last chunk op (batch/pointers.py keeps it)
    aligned = False

    # -- attribution --------------------------------------------------------------------------------------
    def attribute(self, addrs, active: np.ndarray, elem_bytes: int, chunk: bool = False,
                  origin: Optional[int] = None):
        """Attribute one op's lanes to a tensor argument.

        Returns (tensor index or -1, element offsets relative to that tensor's storage (int64, same
        shape as addrs), lanes that are safe to execute). A lane is safe when it is active and inside the
        attributed tensor's storage; every other active lane is out of bounds and must be skipped.
        ``origin``, the argument the pointers were derived from (memory/provenance.py), decides when
        known; else the addresses do. With ``chunk``, ``addrs`` has a leading axis over the programs of
        a batched chunk, and BatchFallback is raised unless every program's lanes go to one tensor (as
        they would alone). ``addrs`` may be a lazy block's ``Addresses`` (batch/described.py): its lanes are
        computed only where the description does not decide.
        """
        shape = addrs.shape
        k = self.known_affine
        materialise = getattr(addrs, "materialise", None)      # a lazy block's addresses (batch/described.py)
        if materialise is not None:
            a, k = None, (addrs.first, addrs.strides)
        else:
            a = addrs.view(np.int64) if addrs.dtype == np.uint64 else addrs.astype(np.int64, copy=False)

        def lanes() -> np.ndarray:
            nonlocal a
            if a is None:
                a = materialise().view(np.int64)
            return a
        self.affine = None
        if not self.storages:
            return -1, np.zeros(shape, np.int64), np.zeros(shape, bool)
        size = math.prod(shape)
        lo = hi = None
        sid = -1
        aff = None
        if chunk and elem_bytes & (elem_bytes - 1) == 0:
            aff = described(np.broadcast_to(k[0], shape[:1]), k[1], shape[1:]) if k is not None else None
            if aff is None:
                aff = affine_rows(lanes())
                self.found_affine = None if aff is None else (aff.first, aff.strides)
        if aff is not None:
            lo, hi = aff.lo, aff.hi
        if origin is not None and 0 <= origin < len(self.tensors):
            sid = self._tensor_storage[origin]
            if size and lo is None:
                lo, hi = int(lanes().min()), int(lanes().max())
        elif size:
            # nearly always every lane sits in one storage's padded region: two reductions tell
            if lo is None:
                lo, hi = int(lanes().min()), int(lanes().max())
            k = max(int(np.searchsorted(self._starts, lo, side="right")) - 1, 0)
            if k + 1 == len(self._starts) or hi < self._starts[k + 1]:
                sid = int(self._order[k])
        if sid < 0:
            sid = self._vote(lanes(), active, chunk)
        if origin is not None and 0 <= origin < len(self.tensors):
            tid = origin
        elif chunk:
            if sum(1 for s in self._tensor_storage if s == sid) > 1:
                raise BatchFallback("arguments that alias one storage")
            tid = self._tensor_storage.index(sid) if sid in self._tensor_storage else -1
        else:
            tid = self._choose_tensor(sid, lanes(), active, self.storages[sid])
        st = self.storages[sid]
        itemsize = elem_bytes       # offsets count in the access's element size (a cast pointer's too)
        pow2 = itemsize & (itemsize - 1) == 0
        inside = lo is not None and lo - st.base >= 0 and hi - st.base + elem_bytes <= st.nbytes
        if aff is not None and aff.addrs is None and inside and pow2 and not aff.bits & (itemsize - 1):
            # described pointers, every lane inside and aligned: the offsets follow from the description,
            # built only if something reads them lane by lane
            shift = itemsize.bit_length() - 1
            self.aligned = True
            self.affine = (aff.first - st.base) >> shift, tuple(v >> shift for v in aff.strides)
            return tid, LazyOffsets(*self.affine, shape[1:]), active
        if aff is not None and aff.addrs is not None:
            rel = aff.addrs                                   # a fresh array equal to ``a``: reused in place
            np.subtract(rel, st.base, out=rel)
        else:
            rel = lanes() - st.base
        # the usual case: no lane outside the storage
        safe = active if inside else active & (rel >= 0) & (rel + elem_bytes <= st.nbytes)
        # element-aligned lanes can be served from typed_view (all of them, for plain pointer arithmetic);
        # storages start 256-byte aligned, so an address's alignment is its offset's
        if aff is not None:
            self.aligned = itemsize == 1 or not aff.bits & (itemsize - 1)
        else:
            self.aligned = itemsize == 1 or not size or not int(np.bitwise_or.reduce(lanes(), axis=None)) & (itemsize - 1)
        if pow2:
            shift = itemsize.bit_length() - 1                 # a floor division, for negative lanes too
            offsets = np.right_shift(rel, shift, out=rel)    # ``rel`` is always a fresh array
        else:
            offsets = np.floor_divide(rel, itemsize)
        if aff is not None and self.aligned:
            # every program's offsets are its first one plus one pattern: the recorder and the chunk
            # check take them as that instead of scanning the lanes again
            self.affine = offsets.reshape(len(offsets), -1)[:, 0].copy(), tuple(v // itemsize for v in aff.strides)
        return tid, offsets, safe

    def _vote(self, a: np.ndarray, active: np.ndarray, chunk: bool) -> int:
        """The storage of an op whose lanes span several padded regions: the one most active lanes hit
        (lanes below every region go to the first). A chunk must agree program by program."""
        pos = np.clip(np.searchsorted(self._starts, a, side="right") - 1, 0, len(self._starts) - 1)
        lane_storage = self._order[pos]
        if not chunk:
            pick = lane_storage[active] if active.any() else lane_storage.reshape(-1)[:1]
            return int(np.bincount(pick, minlength=len(self.storages)).argmax())
        p = a.shape[0]
        ls, act = lane_storage.reshape(p, -1), active.reshape(p, -1)
        has = act.any(axis=1)
        # a program without active lanes is attributed by its first lane, as a program alone is
        picks = np.concatenate([ls[act], ls[~has, :1].reshape(-1)])
        if picks.size == 0 or (picks != picks[0]).any():
            raise BatchFallback("the programs of a chunk access different tensors at one op")
        return int(picks[0])

    def tensor_at(self, addrs: np.ndarray) -> Optional[int]:
        """The argument whose storage holds every one of these addresses (null and small values aside),
        or None: the origin of pointers a kernel made from integers."""
        a = np.asarray(addrs).reshape(-1).view(np.int64) if np.asarray(addrs).dtype == np.uint64 else \
            np.asarray(addrs, dtype=np.int64).reshape(-1)
        a = a[a >= 4096]
        if not a.size:
            return None
        lo, hi = int(a.min()), int(a.max())
        for sid, st in enumerate(self.storages):
            if st.base <= lo and hi < st.base + max(st.nbytes, 1):
                return self._tensor_storage.index(sid) if sid in self._tensor_storage else None
        return None

    def _choose_tensor(self, sid: int, a, active, st) -> int:
        cands = [i for i, s in enumerate(self._tensor_storage) if s == sid]
        if len(cands) <= 1:
            return cands[0] if cands else -1
        # Several arguments view one storage (aliasing): pick the view that covers most active lanes.
        best, best_hits = cands[0], -1
        lanes = a[active] - st.base if active.any() else a.reshape(-1)[:1] - st.base
        for i in cands:
            t = self.tensors[i]
            span = t.storage_offset + sum((s - 1) * abs(d) for s, d in zip(t.shape, t.strides) if s > 0)
            lo, hi = t.storage_offset * t.elem_bytes, (span + 1) * t.elem_bytes
            hits = int(((lanes >= lo) & (lanes < hi)).sum())
            if hits > best_hits:
                best, best_hits = i, hits
        return best
