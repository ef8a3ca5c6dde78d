"""The address space a traced kernel runs in: padded host copies of its tensor arguments.

Every distinct storage behind the tensor arguments is copied into its own CPU buffer with a guard zone on
each side. The interpreter dereferences raw addresses, so this gives two things the original memory
cannot: an address just past one tensor can never land inside another argument (so every lane is
attributed to the tensor it was meant for), and a lane outside its tensor's storage is known before the
access executes and is skipped instead of reading or corrupting foreign memory. After the launch the
copies are written back to the caller's tensors, whatever device they live on.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..errors import BatchFallback, TraceUsageError
from ..model import TensorInfo
from .affine import affine_offsets, affine_rows, described
from .livestorages import LiveStorages, torch_dtype

GUARD_MIN = 1 << 16          # bytes of guard zone on each side of a storage, at least
ALIGN = 256                  # storages start on this alignment, like cudaMalloc's


@dataclass
class _Storage:
    key: tuple
    original: torch.UntypedStorage
    buffer: torch.Tensor      # uint8, guard + data + guard
    base: int                 # address of the first data byte in the copy
    nbytes: int
    guard: int
    written: bool = False


def _unwrap(arg):
    # triton.reinterpret wraps a tensor with another dtype; the storage is the base's.
    base = getattr(arg, "base", None)
    if base is not None and hasattr(arg, "dtype") and isinstance(base, torch.Tensor) and not isinstance(arg, torch.Tensor):
        return base, arg.dtype
    return arg, getattr(arg, "dtype", None)


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy bytes between uint8 tensors (torch's uint8 copy_ runs at a tenth of numpy's speed on CPU)."""
    if dst.device.type == "cpu" and src.device.type == "cpu":
        dst.numpy()[:] = src.numpy()
    else:
        dst.copy_(src.to(dst.device))


def _strides_of(obj, shape: tuple) -> tuple:
    stride = getattr(obj, "stride", None)
    if callable(stride):
        return tuple(int(v) for v in stride())
    strides = getattr(obj, "strides", None)
    if strides is not None:
        return tuple(int(v) for v in strides)
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(out))


class HostMemory:
    """Owns the padded copies; maps raw addresses back to (tensor, element offset)."""

    def __init__(self):
        self.storages: list = []
        self._by_key: dict = {}
        self.tensors: list = []           # TensorInfo, parallel to _tensor_storage
        self._tensor_storage: list = []   # index into self.storages
        self._starts = np.zeros(0, dtype=np.int64)
        self._order = np.zeros(0, dtype=np.int64)
        self._views: dict = {}
        self.aligned = False
        self.affine = None                # (first offset per program, element strides) of the last chunk op
        self.known_affine = None          # (first address per program, byte strides) of the next op's pointers
        self.found_affine = None          # the same, found by the last chunk op (interp/pointers.py keeps it)
        self._live_index = None           # LiveStorages, built when a pointer leads outside the arguments
        self._host_ids: dict = {}         # id(host tensor) -> its index in self.tensors
        self._hosts: list = []

    # -- building -----------------------------------------------------------------------------------------
    def host_tensor(self, name: str, arg) -> torch.Tensor:
        """Return a CPU tensor that views the padded copy of ``arg``'s storage, and register it."""
        t, dtype = _unwrap(arg)
        if not isinstance(t, torch.Tensor):
            t = self._tensor_like(name, t)
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        st = self._by_key.get(key)
        if st is None:
            nbytes = storage.nbytes()
            guard = max(GUARD_MIN, -(-min(nbytes, 1 << 24) // ALIGN) * ALIGN)
            # guard bytes are never read or written (lanes in them are skipped), so they stay unset
            buf = torch.empty(guard + nbytes + guard + ALIGN, dtype=torch.uint8)
            shift = (-buf.data_ptr()) % ALIGN
            data = buf[shift + guard: shift + guard + nbytes]
            if nbytes:
                src = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
                _copy(data, src)
            st = _Storage(key, storage, buf, buf.data_ptr() + shift + guard, nbytes, guard)
            self._by_key[key] = st
            self.storages.append(st)
        itemsize = t.element_size()
        offset_bytes = st.base - st.buffer.data_ptr()
        host = torch.empty(0, dtype=t.dtype).set_(
            st.buffer.untyped_storage(), offset_bytes // itemsize + t.storage_offset(), t.size(), t.stride())
        if offset_bytes % itemsize:
            raise AssertionError("guard zones are aligned to every element size")
        info = TensorInfo(
            name=name, dtype=str(t.dtype).replace("torch.", ""), shape=tuple(t.shape), strides=tuple(t.stride()),
            storage_offset=int(t.storage_offset()), storage_size=st.nbytes // itemsize, elem_bytes=itemsize,
            device=str(t.device), storage=self.storages.index(st))
        self.tensors.append(info)
        self._tensor_storage.append(self.storages.index(st))
        self._reindex()
        if dtype is not None and dtype != t.dtype:
            import triton
            host = triton.reinterpret(host, dtype)
        self._host_ids[id(host)] = len(self.tensors) - 1
        self._hosts.append(host)          # keeps the ids unique while the launch runs
        return host

    # -- memory the arguments do not name -----------------------------------------------------------------
    def _live(self) -> "LiveStorages":
        if self._live_index is None:
            self._live_index = LiveStorages()
        return self._live_index

    def _tensor_like(self, name: str, obj) -> torch.Tensor:
        """A torch view of a tensor-like argument (an object with ``data_ptr()`` and ``dtype``, as compiled
        Triton accepts: a library's own strided view class), found through the live storage holding it."""
        ptr = int(obj.data_ptr())
        dtype = getattr(obj, "dtype", None)
        if not isinstance(dtype, torch.dtype):
            raise TraceUsageError(f"argument '{name}' ({type(obj).__name__}) has data_ptr() but its dtype {dtype!r} "
                                  f"is not a torch.dtype; pass a torch tensor or an object whose .dtype is one")
        found = self._live().find(ptr, getattr(obj, "device", None))
        if found is None:
            raise TraceUsageError(
                f"argument '{name}' ({type(obj).__name__}) points at 0x{ptr:x}, which no live torch tensor's storage "
                f"holds; triton_trace copies arguments from torch storages, so pass a torch tensor (or a view "
                f"of the tensor that owns this memory)")
        storage, start = found
        itemsize = torch.empty(0, dtype=dtype).element_size()
        shape = tuple(int(v) for v in getattr(obj, "shape", ()) or ())
        strides = _strides_of(obj, shape)
        if (ptr - start) % itemsize:
            raise TraceUsageError(f"argument '{name}': data_ptr() 0x{ptr:x} is not aligned to its {dtype} elements")
        if not shape:                                  # no shape: the rest of the storage, as one dimension
            shape, strides = ((storage.nbytes() - (ptr - start)) // itemsize,), (1,)
        return torch.empty(0, dtype=dtype, device=storage.device).set_(storage, (ptr - start) // itemsize,
                                                                       shape, strides)

    def translate(self, addrs: np.ndarray, pointee=None) -> np.ndarray:
        """Addresses a kernel made from integers (a pointer loaded from memory: ``tensor.data_ptr()`` values
        in a table, cast with ``.to(tl.pointer_type(...))``) moved into the padded copies.

        An address inside a copy stays; one inside the caller's storage of an argument moves to the copy;
        one inside another live torch tensor's storage makes that storage part of the launch (copied,
        recorded, written back like an argument). Anything else is left as it is, so its lanes are out of
        bounds and skipped, never dereferenced."""
        a = np.asarray(addrs)
        flat = a.reshape(-1).astype(np.int64, copy=True) if a.dtype != np.uint64 else a.reshape(-1).view(np.int64).copy()
        starts = np.array([s.base - s.guard for s in self.storages], np.int64)
        sizes = np.array([2 * s.guard + s.nbytes for s in self.storages], np.int64)
        inside = np.zeros(flat.shape, bool)
        for lo, n in zip(starts, sizes):
            inside |= (flat >= lo) & (flat < lo + n)
        todo = ~inside & (flat >= 4096)              # null and small integers are never storages
        if todo.any():
            for st in list(self.storages):
                if st.original.device.type != "meta":
                    lo = st.original.data_ptr()
                    hit = todo & (flat >= lo) & (flat < lo + st.nbytes)
                    flat[hit] += st.base - lo
                    todo &= ~hit
        while todo.any():
            ptr = int(flat[todo][0])
            found = self._live().find(ptr, None)
            if found is None:
                todo &= flat != ptr
                continue
            storage, start = found
            self._adopt(storage, pointee)
            st = self.storages[-1]
            hit = todo & (flat >= start) & (flat < start + st.nbytes)
            flat[hit] += st.base - start
            todo &= ~hit
        out = flat.view(np.uint64) if a.dtype == np.uint64 else flat.astype(a.dtype)
        return out.reshape(a.shape)

    def _adopt(self, storage: torch.UntypedStorage, pointee) -> None:
        dtype = torch_dtype(pointee)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if storage.nbytes() % itemsize:
            dtype, itemsize = torch.uint8, 1
        whole = torch.empty(0, dtype=dtype, device=storage.device).set_(storage, 0, (storage.nbytes() // itemsize,))
        self.host_tensor(f"<memory at 0x{storage.data_ptr():x}, loaded as a pointer>", whole)

    def to_host(self, value, name: str):
        """``value`` with every tensor in it (also inside tuples and host-side tensor descriptors) replaced
        by its padded host copy; anything else is returned as is."""
        if isinstance(value, tuple):
            if hasattr(value, "_fields"):
                return type(value)(*(self.to_host(v, name) for v in value))
            return tuple(self.to_host(v, f"{name}[{i}]") for i, v in enumerate(value))
        if dataclasses.is_dataclass(value) and hasattr(value, "base") and hasattr(value, "block_shape"):
            return dataclasses.replace(value, base=self.to_host(value.base, name))
        if hasattr(value, "data_ptr"):
            return self.host_tensor(name, value)
        return value

    def index_of_host(self, host) -> Optional[int]:
        """The tensor index of a host tensor made by ``host_tensor`` (pointer provenance starts here)."""
        return self._host_ids.get(id(host))

    def _reindex(self):
        starts = np.array([s.base - s.guard for s in self.storages], dtype=np.int64)
        self._order = np.argsort(starts, kind="stable")
        self._starts = starts[self._order]

    # -- attribution --------------------------------------------------------------------------------------
    def attribute(self, addrs: np.ndarray, active: np.ndarray, elem_bytes: int, chunk: bool = False,
                  origin: Optional[int] = None):
        """Attribute one op's lanes to a tensor argument.

        Returns (tensor index or -1, element offsets relative to that tensor's storage (int64, same
        shape as addrs), lanes that are safe to execute). A lane is safe when it is active and inside the
        attributed tensor's storage; every other active lane is out of bounds and must be skipped.
        ``origin``, the argument the pointers were derived from (interp/provenance.py), decides when
        known; else the addresses do. With ``chunk``, ``addrs`` has a leading axis over the programs of
        a batched chunk, and BatchFallback is raised unless every program's lanes go to one tensor (as
        they would alone).
        """
        a = addrs.view(np.int64) if addrs.dtype == np.uint64 else addrs.astype(np.int64, copy=False)
        self.affine = None
        if not self.storages:
            return -1, np.zeros(a.shape, np.int64), np.zeros(a.shape, bool)
        lo = hi = None
        sid = -1
        aff = None
        if chunk and elem_bytes & (elem_bytes - 1) == 0:
            k = self.known_affine
            aff = described(np.broadcast_to(k[0], a.shape[:1]), k[1], a.shape[1:]) if k is not None else None
            if aff is None:
                aff = affine_rows(a)
                self.found_affine = None if aff is None else (aff.first, aff.strides)
        if aff is not None:
            lo, hi = aff.lo, aff.hi
        if origin is not None and 0 <= origin < len(self.tensors):
            sid = self._tensor_storage[origin]
            if a.size and lo is None:
                lo, hi = int(a.min()), int(a.max())
        elif a.size:
            # nearly always every lane sits in one storage's padded region: two reductions tell
            if lo is None:
                lo, hi = int(a.min()), int(a.max())
            k = max(int(np.searchsorted(self._starts, lo, side="right")) - 1, 0)
            if k + 1 == len(self._starts) or hi < self._starts[k + 1]:
                sid = int(self._order[k])
        if sid < 0:
            sid = self._vote(a, active, chunk)
        if origin is not None and 0 <= origin < len(self.tensors):
            tid = origin
        elif chunk:
            if sum(1 for s in self._tensor_storage if s == sid) > 1:
                raise BatchFallback("arguments that alias one storage")
            tid = self._tensor_storage.index(sid) if sid in self._tensor_storage else -1
        else:
            tid = self._choose_tensor(sid, a, active, self.storages[sid])
        st = self.storages[sid]
        itemsize = elem_bytes       # offsets count in the access's element size (a cast pointer's too)
        pow2 = itemsize & (itemsize - 1) == 0
        inside = lo is not None and lo - st.base >= 0 and hi - st.base + elem_bytes <= st.nbytes
        if aff is not None and aff.addrs is None and inside and pow2 and not aff.bits & (itemsize - 1):
            # described pointers, every lane inside and aligned: the offsets are built from the description
            # (one pass) instead of derived from the addresses
            shift = itemsize.bit_length() - 1
            self.aligned = True
            self.affine = (aff.first - st.base) >> shift, tuple(v >> shift for v in aff.strides)
            return tid, affine_offsets(*self.affine, a.shape[1:]), active
        if aff is not None and aff.addrs is not None:
            rel = aff.addrs                                   # a fresh array equal to ``a``: reused in place
            np.subtract(rel, st.base, out=rel)
        else:
            rel = a - st.base
        # the usual case: no lane outside the storage
        safe = active if inside else active & (rel >= 0) & (rel + elem_bytes <= st.nbytes)
        # element-aligned lanes can be served from typed_view (all of them, for plain pointer arithmetic);
        # storages start 256-byte aligned, so an address's alignment is its offset's
        if aff is not None:
            self.aligned = itemsize == 1 or not aff.bits & (itemsize - 1)
        else:
            self.aligned = itemsize == 1 or not a.size or not int(np.bitwise_or.reduce(a, axis=None)) & (itemsize - 1)
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

    def storage_of(self, tensor: int) -> int:
        return self._tensor_storage[tensor]

    def tensor_of_storage(self, sid: int) -> int:
        return self._tensor_storage.index(sid)

    def typed_view(self, tensor: int, dtype) -> np.ndarray:
        """The padded copy of ``tensor``'s storage as a numpy array of ``dtype`` (element offsets index it).

        Gathers and scatters through it are ~20x faster than the interpreter's per-lane C++ loop."""
        dtype = np.dtype(dtype)
        sid = self._tensor_storage[tensor]
        key = (sid, dtype.str)
        view = self._views.get(key)
        if view is None:
            st = self.storages[sid]
            shift = st.base - st.buffer.data_ptr()
            n = st.nbytes // dtype.itemsize
            view = self._views[key] = st.buffer.numpy()[shift: shift + n * dtype.itemsize].view(dtype)
        return view

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

    def is_written(self, tensor: int) -> bool:
        """Whether the launch has stored to this argument's storage yet."""
        return tensor >= 0 and self.storages[self._tensor_storage[tensor]].written

    def mark_written(self, tensor: int) -> None:
        if tensor >= 0:
            self.storages[self._tensor_storage[tensor]].written = True

    def snapshot(self, limit: int, finished: bool) -> tuple:
        """(inputs, finals, description) for a reproducer: every storage's bytes as the launch found them
        (the caller's storages are untouched until ``copy_back``) and, when the launch ``finished``, the
        written ones as it left them; (None, None, why) when they do not fit in ``limit`` bytes."""
        sizes = [int(st.nbytes) for st in self.storages]
        written = [bool(st.written and finished) for st in self.storages]
        need = sum(sizes) + sum(n for n, w in zip(sizes, written) if w)
        desc = {"storages": sizes, "written": written, "kept": need <= limit}
        if need > limit:
            desc["note"] = (f"inputs not kept: the launch's storages need {need} bytes (before and after), more "
                            f"than the limit of {limit} bytes; pass trace(inputs=<bytes>) to raise it")
            return None, None, desc
        before, after = [], []
        for st, w in zip(self.storages, written):
            if not st.nbytes:
                continue
            src = torch.empty(0, dtype=torch.uint8, device=st.original.device).set_(st.original)
            before.append(src.cpu().numpy().copy())
            if w:
                shift = st.base - st.buffer.data_ptr()
                after.append(st.buffer[shift: shift + st.nbytes].numpy().copy())
        join = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return join(before), join(after), desc

    def copy_back(self) -> None:
        """Write the copies that the kernel stored to back into the caller's storages. Only safe lanes
        execute and they stay inside their attributed storage, so the written flags are exact."""
        for st in self.storages:
            if not st.nbytes or not st.written:
                continue
            shift = st.base - st.buffer.data_ptr()
            data = st.buffer[shift: shift + st.nbytes]
            dst = torch.empty(0, dtype=torch.uint8, device=st.original.device).set_(st.original)
            _copy(dst, data)
