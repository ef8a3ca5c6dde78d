"""The memory seam: a stand-in for the interpreter's C++ module that checks, records and serves every
load, store and atomic of a traced launch.

Loads and stores go through numpy gathers and scatters on the padded host copies (about 20 times faster
than the interpreter's per-lane C++ loop); atomics, and accesses whose lanes are not element-aligned,
go to the real C++ functions with the unsafe lanes masked off.
"""
from __future__ import annotations

import weakref
from typing import Optional

import numpy as np

from ...numerics import rounding
from ...numerics.rounding import bf16_to_f32
from ..batch import affine
from ..frames import where


def install_pointer_casts(scope, builder, memory) -> None:
    """Integers cast to pointers (a table of ``data_ptr()`` values loaded by the kernel) name the caller's
    memory; ``memory.translate`` moves them into the padded copies the traced launch runs on."""
    from ..memory import provenance
    from ..gpu.lowp import inner_method
    inner = inner_method(builder, "create_int_to_ptr")

    def create_int_to_ptr(val, dst_type):
        out = inner(val, dst_type)
        pointee = getattr(getattr(dst_type, "scalar", dst_type), "element_ty", None)
        out.data = memory.translate(out.data, pointee)
        provenance.tag(out, memory.tensor_at(out.data))
        return out
    scope.set_attr(builder, "create_int_to_ptr", create_int_to_ptr)


# --------------------------------------------------------------------------------------------------------
_RMW_KIND = {"ADD": "atomic_add", "FADD": "atomic_add", "MIN": "atomic_min", "UMIN": "atomic_min",
             "MAX": "atomic_max", "UMAX": "atomic_max", "AND": "atomic_and", "OR": "atomic_or",
             "XOR": "atomic_xor", "XCHG": "atomic_xchg"}


# bfloat16 atomics the GPU has (add, max, min, exchange): the fp32 operation on the two values
_BF16_RMW = {"FADD": np.add, "ADD": np.add, "MAX": np.fmax, "MIN": np.fmin, "XCHG": None}


def _lanes(ptrs) -> np.ndarray:
    materialise = getattr(ptrs, "materialise", None)
    return ptrs if materialise is None else materialise()


class MemoryProxy:
    """Stands in for the C++ interpreter module: checks and records each access, then forwards the
    safe lanes to the real implementation."""

    def __init__(self, real, rec):
        self._real = real
        self._rec = rec
        self._log: Optional[list] = None     # what writes overwrote, while a batched chunk may be undone
        self._access = None                  # the running op's Access (tensor, element offsets, aligned)
        self._held: list = []                # a batched chunk's stores not written yet (see _hold)
        # (the chunk check rewrites shared elements after settling them): by a weak reference, so that the
        # launch's memory, which holds views of the caller's storages, is freed when the launch is
        settle = weakref.WeakMethod(self.settle)
        rec.memory.settle = lambda sid=None: settle()(sid) if settle() is not None else None

    def __getattr__(self, name):
        self.settle()                        # any other C++ function may read or write any storage
        return getattr(self._real, name)

    def _raw(self):
        """The interpreter's C++ functions, which dereference raw addresses in the padded buffers: every
        storage is copied into its buffer first (record/memory/space.py copies lazily)."""
        self.settle()
        self._rec.memory.copy_all()
        return self._real

    # -- undoing a batched chunk -------------------------------------------------------------------------
    def begin_log(self) -> None:
        """Keep what every write overwrites from now on, so ``rollback`` can put it back."""
        self._log = []

    def end_log(self) -> None:
        self._log = None

    def rollback(self) -> None:
        """Put back, newest first, everything written since ``begin_log``; stop logging."""
        log, self._log = self._log or [], None
        self._held = []                       # never written: nothing to put back
        # Entries are tagged: a typed view of uint64 storage is itself a uint64 array, so the array's
        # dtype cannot tell a view apart from raw pointers (taking values for addresses crashed the process).
        # Views are looked up again here: a storage written in place may have moved into its buffer since
        # (an atomic needs raw addresses), and what was overwritten must be put back where the bytes are now.
        while log:
            how, a, b, c = log.pop()
            if how == "view":       # ((tensor, dtype), element offsets, old values)
                self._rec.memory.typed_view(*a)[b] = c
            elif how == "runs":     # ((tensor, dtype), (first offsets, strides, block shape), old values)
                affine.scatter(self._rec.memory.typed_view(*a), *b, c)
            else:                   # (raw pointers, old values, lanes)
                self._raw().store(a, b, c)

    # -- stores held until the chunk is kept ----------------------------------------------------------------
    def _hold(self, ptrs, value, safe, view) -> bool:
        """In a batched chunk, a store of whole blocks (every lane safe, or programs sitting out a masked
        trip) is held and written when the chunk is kept (``commit``): an undone chunk has nothing of it to
        put back, so no copy of what it overwrites is made (the output's bytes are read once less). Any other
        access to the storage before then writes the held stores first (``settle``), so every access sees
        the bytes a program-order run would."""
        if self._log is None or not view.flags.writeable:
            return False
        runs = self._runs(safe, ptrs.shape)
        if runs is None:
            found = self._whole_rows(safe, ptrs.shape)
            if found is None:
                return False
            runs, value = found[1], np.broadcast_to(value, ptrs.shape)[found[0]]
        plan = affine.scatter_plan(view, *runs)
        if plan is None:
            return False
        tensor = self._access.tensor
        self._held.append((self._rec.memory.storage_of(tensor), (tensor, value.dtype), runs, plan, value))
        return True

    def settle(self, sid: Optional[int] = None) -> None:
        """Write the held stores to storage ``sid`` (to every storage: None) now, in order, logging what they
        overwrite as an unheld store does."""
        if not self._held:
            return
        keep = []
        for entry in self._held:
            if sid is not None and entry[0] != sid:
                keep.append(entry)
                continue
            _, at, runs, plan, value = entry
            if self._log is not None:
                self._log.append(("runs", at, runs, affine.gather(self._rec.memory.typed_view(*at), *runs)))
            affine.write(plan, value)
        self._held = keep

    def commit(self) -> None:
        """The chunk is kept: write its held stores (nothing to log: it is no longer undone)."""
        held, self._held = self._held, []
        for _, _, _, plan, value in held:
            affine.write(plan, value)

    # -- the accesses --------------------------------------------------------------------------------------
    def _check(self, kind, file, line, ptrs, mask, elem_bytes):
        access = self._rec.memory_op(kind, file, line, ptrs, mask, elem_bytes)
        self._access = access
        if kind != "store":                   # (a store settles what it must in ``store``)
            self._settle_accessed()
        return access.safe, access.row

    def _settle_accessed(self) -> None:
        """Write the held stores to the running op's storage (to every storage, where it has none)."""
        if self._held:
            t = self._access.tensor
            self.settle(self._rec.memory.storage_of(t) if t >= 0 else None)

    def _typed(self, dtype):
        """The accessed storage as a numpy array of ``dtype`` when numpy can serve the op, else None."""
        a = self._access
        if a.tensor < 0 or not a.aligned:
            return None
        view = self._rec.memory.typed_view(a.tensor, dtype)
        return view if view.size else None

    def _runs(self, safe, shape):
        """(first element offsets, strides, block shape) when every lane is safe and each program's offsets are
        its first one plus one pattern (affine.gather and affine.scatter move them a run at a time)."""
        aff = self._rec.memory.affine
        return None if aff is None or not safe.all() else (aff[0], aff[1], shape[1:])

    def _whole_rows(self, safe, shape):
        """(the programs whose lanes are all safe, their runs as ``_runs`` gives them) when every other
        program has no safe lane (programs sitting out a masked loop's trip), else None."""
        aff = self._rec.memory.affine
        if aff is None or len(shape) < 2:
            return None
        rows = np.broadcast_to(safe, shape).reshape(shape[0], -1)
        full = rows.all(axis=1)
        if not (full | ~rows.any(axis=1)).all():
            return None
        return full, (aff[0][full], aff[1], shape[1:])

    def _save(self, ptrs, safe, dtype):
        """In a batched chunk, keep what a write overwrites so the chunk can be undone and re-run. Returns
        the programs' whole rows (``_whole_rows``) where it had to find them, for the write itself."""
        log = self._log
        if log is None or not safe.any():
            return None
        view, runs = self._typed(dtype), self._runs(safe, ptrs.shape)
        at = (self._access.tensor, dtype)
        found = None
        if view is not None and runs is None:          # programs sitting out a trip: the others' blocks
            found = self._whole_rows(safe, ptrs.shape)
            runs = None if found is None else found[1]
        if view is not None and runs is not None and view.flags.writeable:
            old = affine.gather(view, *runs)
            if old is not None:
                log.append(("runs", at, runs, old))
                return found
        if view is not None:
            off = np.asarray(self._access.offsets)
            idx = off.reshape(-1) if safe.all() else off[safe]
            log.append(("view", at, idx, view[idx]))
        else:
            dtype = np.dtype(dtype)
            ptrs = _lanes(ptrs)
            log.append(("raw", ptrs, self._raw().load(ptrs, safe, np.zeros(ptrs.shape, dtype), dtype), safe))
        return found

    def load(self, ptrs, mask, other, dtype):
        """``ptrs``: the addresses, or (a batched load of a lazy pointer block) described.Addresses, whose
        lanes are computed only on the paths that need every address."""
        file, line = where()
        safe, row = self._check("load", file, line, ptrs, mask, np.dtype(dtype).itemsize)
        a = self._access
        view = self._typed(dtype)
        if view is None:        # (the C++ load reads plain arrays: a batched mask or ``other`` may be a broadcast)
            out = self._raw().load(_lanes(ptrs), np.ascontiguousarray(safe), np.ascontiguousarray(other), dtype)
        elif safe.all():
            runs = self._runs(safe, ptrs.shape)
            # a batched chunk reads a storage no op wrote yet without copying it (memory.may_view)
            no_copy = self._rec.batched and self._rec.memory.may_view(a.tensor)
            out = None if runs is None else affine.gather(view, *runs, copy=not no_copy)
            if out is None:
                out = view[np.asarray(a.offsets)]
            elif no_copy and np.may_share_memory(out, view):
                self._rec.memory.note_view(a.tensor)
        else:
            out = self._load_rows(view, safe, ptrs.shape, other, dtype)
            if out is None:
                off = np.asarray(a.offsets)
                out = np.where(safe, view[np.where(safe, off, 0)], other).astype(dtype, copy=False)
        if not out.flags.c_contiguous and 0 not in out.strides:
            # Triton's load makes a C-ordered block; numpy follows the offsets' order (a transposed pattern
            # gives a column-major block), and a reduction over a block sums in its memory order
            out = np.ascontiguousarray(out)
        self._rec.record_values(row, out)
        floats = None if self._rec.nonfinite.lazy or a.tensor < 0 else self._floats(out)
        if floats is not None:
            self._rec.nonfinite.load(a.tensor, self._rec.memory.is_written(a.tensor), file, line, floats, safe,
                                     a.offsets, view if floats is out else None)
        return out

    def _floats(self, values: np.ndarray):
        """The float values an access moves, or None: a bfloat16 tensor's are uint16 bit patterns here,
        decoded (exactly) so that NaN and Inf are judged by value."""
        if values.dtype.kind == "f":
            return values
        t = self._access.tensor
        if values.dtype == np.uint16 and t >= 0 and self._rec.memory.tensors[t].dtype == "bfloat16":
            return bf16_to_f32(values)
        return None

    def _load_rows(self, view, safe, shape, other, dtype):
        """A load whose programs read all their lanes or none (a masked loop's trip): the reading programs'
        blocks a run at a time, ``other`` for the rest (what the lane-by-lane path gives); None otherwise."""
        found = self._whole_rows(safe, shape)
        if found is None:
            return None
        full, runs = found
        got = affine.gather(view, *runs) if full.any() else None
        if got is None and full.any():
            return None
        out = np.empty(shape, dtype=dtype)
        rest = ~full
        if rest.any():
            out[rest] = np.broadcast_to(other, shape)[rest]
        if got is not None:
            out[full] = got
        return out

    def store(self, ptrs, value, mask):
        """``ptrs``: the addresses, or (a batched store through a lazy pointer block) described.Addresses."""
        file, line = where()
        safe, row = self._check("store", file, line, ptrs, mask, value.dtype.itemsize)
        if self._access.aligned:       # (element offsets index the storage's typed view)
            self._rec.stored_values(self._access.tensor, value)
        self._rec.record_values(row, value)
        floats = self._floats(value)
        if floats is not None:
            self._rec.nonfinite.store(self._access.tensor, file, line, floats, safe, self._access.offsets)
        view = self._typed(value.dtype)
        if view is not None and safe.any() and self._hold(ptrs, value, safe, view):
            return None       # written when the chunk is kept
        self._settle_accessed()
        rows_found = self._save(ptrs, safe, value.dtype)
        runs = self._runs(safe, ptrs.shape)
        if view is None:
            return self._raw().store(_lanes(ptrs), value, safe)
        if not safe.any():
            return None       # nothing to write (an input's view may be read-only)
        if runs is not None and affine.scatter(view, *runs, value):
            return None       # written a run at a time (described or probed pointers: no offsets built)
        found = None if runs is not None else (rows_found or self._whole_rows(safe, ptrs.shape))
        if found is not None and affine.scatter(view, *found[1], np.broadcast_to(value, ptrs.shape)[found[0]]):
            return None       # the same for the programs that store, where the others sit out a trip
        off = np.asarray(self._access.offsets)
        value = np.broadcast_to(value, ptrs.shape)
        if safe.all():
            view[off.reshape(-1)] = value.reshape(-1)
        else:
            view[off[safe]] = value[safe]

    def atomic_rmw(self, op, ptrs, val, mask, sem):
        file, line = where()
        kind = _RMW_KIND.get(getattr(op, "name", str(op)).split(".")[-1], "atomic_add")
        safe, row = self._check(kind, file, line, ptrs, mask, val.dtype.itemsize)
        self._rec.record_values(row, val)
        self._save(ptrs, safe, val.dtype)
        name = getattr(op, "name", str(op)).split(".")[-1]
        if val.dtype == np.uint16 and name in _BF16_RMW:
            return self._bf16_rmw(name, _lanes(ptrs), val, safe)
        return self._raw().atomic_rmw(op, ptrs, val, safe, sem)

    def _bf16_rmw(self, name, ptrs, val, safe):
        """A bfloat16 atomic (the interpreter keeps bf16 as uint16 bits, and its C++ atomics have no 16-bit
        type; Triton has no 16-bit integer atomics, so these bits are bf16): each lane reads, combines in
        float64 (exact for two bf16 values) and rounds once to bf16 as the GPU's ``atom.add.noftz.bf16`` does, lanes on one address in lane
        order. Returns the old values."""
        raw, shape = self._raw(), ptrs.shape
        p, v, m = ptrs.reshape(-1), val.reshape(-1), np.asarray(safe).reshape(-1)
        old = np.zeros(p.shape, np.uint16)
        idx = np.flatnonzero(m)
        # lanes on one address run one after another: round k takes each address's k-th lane
        order = np.argsort(p[idx], kind="stable")
        sorted_p = p[idx][order]
        first = np.r_[0, np.flatnonzero(sorted_p[1:] != sorted_p[:-1]) + 1]
        rank = np.empty(len(idx), np.int64)
        rank[order] = np.arange(len(idx)) - np.repeat(first, np.diff(np.r_[first, len(idx)]))
        for k in range(int(rank.max()) + 1 if len(idx) else 0):
            lanes = idx[rank == k]
            at = np.ascontiguousarray(p[lanes])
            ones = np.ones(len(lanes), bool)
            cur = raw.load(at, ones, np.zeros(len(lanes), np.uint16), np.dtype(np.uint16))
            old[lanes] = cur
            a, b = (rounding.bf16_to_f32(x).astype(np.float64) for x in (cur, v[lanes]))
            bits = v[lanes] if name == "XCHG" else rounding.f64_to_narrow(_BF16_RMW[name](a, b), np.uint16, True)
            raw.store(at, np.ascontiguousarray(bits.astype(np.uint16)), ones)
        return old.reshape(shape)

    def atomic_cas(self, ptrs, cmp, val, sem):
        file, line = where()
        ones = np.ones(ptrs.shape, dtype=bool)
        safe, row = self._check("atomic_cas", file, line, ptrs, ones, val.dtype.itemsize)
        self._rec.record_values(row, val)
        self._save(ptrs, safe, val.dtype)
        if safe.all():
            return self._raw().atomic_cas(ptrs, cmp, val, sem)
        # CAS has no mask: run it on the safe lanes only; skipped lanes read back the compare value.
        out = np.array(np.broadcast_to(cmp, ptrs.shape), copy=True)
        if safe.any():
            out[safe] = self._raw().atomic_cas(np.ascontiguousarray(ptrs[safe]),
                                              np.ascontiguousarray(np.broadcast_to(cmp, ptrs.shape)[safe]),
                                              np.ascontiguousarray(np.broadcast_to(val, ptrs.shape)[safe]), sem)
        return out


