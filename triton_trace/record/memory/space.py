"""The address space a traced kernel runs in: a padded host buffer per storage of its tensor arguments
(for a CPU storage, usually only the addresses: see below).

Every distinct storage behind the tensor arguments gets its own CPU buffer with a guard zone on each
side. The interpreter dereferences raw addresses, so this gives two things the original memory cannot: an
address just past one tensor can never land inside another argument (so every lane is attributed to the
tensor it was meant for), and a lane outside its tensor's storage is known before the access executes and
is skipped instead of reading or corrupting foreign memory. After the launch the buffers that hold bytes
the kernel wrote are written back to the caller's tensors, whatever device they live on.

A CPU storage is never copied unless an access needs raw addresses (the interpreter's own C++ atomics)
or the launch keeps its inputs for a reproducer: loads read the caller's memory, and stores, which the
memory seam checks lane by lane before they execute, write it in place (a chunk that is undone puts back
what it overwrote). The buffer then only reserves the addresses, guard zones included; its pages are never
touched. With ``inputs`` kept, a storage is copied when first written, so the caller's bytes stay as the
launch found them until it ends.
"""
from __future__ import annotations

import ctypes

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ...errors import ChunkRetry, TraceUsageError
from ...model.trace import TensorInfo
from . import buffers
from .attribution import Attribution
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
    written: bool = False     # some op wrote it, kept or undone since (the chunk check's memory)
    stored: bool = False      # a write that stays recorded: undone with its chunk (what loads see)
    copied: bool = True       # the buffer holds the storage's bytes (else accesses go to ``original``)
    viewed: bool = False      # the running chunk holds loads of it that are views, not copies (see mark_written)


def _unwrap(arg):
    # triton.reinterpret wraps a tensor with another dtype; the storage is the base's.
    base = getattr(arg, "base", None)
    if base is not None and hasattr(arg, "dtype") and isinstance(base, torch.Tensor) and not isinstance(arg, torch.Tensor):
        return base, arg.dtype
    return arg, getattr(arg, "dtype", None)


def byte_array(t: torch.Tensor) -> np.ndarray:
    """A numpy view of the bytes of a contiguous CPU uint8 tensor that leaves its storage resizable:
    ``Tensor.numpy()`` marks the storage not resizable for good, and a later ``resize_`` or ``set_`` of the
    user's tensor, which a GPU allows, would then fail. The caller keeps ``t`` alive while using the view."""
    n = t.numel()
    if not n:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(t.data_ptr()))


def _copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy bytes between uint8 tensors (torch's uint8 copy_ runs at a tenth of numpy's speed on CPU)."""
    if dst.device.type == "cpu" and src.device.type == "cpu":
        byte_array(dst)[:] = byte_array(src)
    else:
        dst.copy_(src.to(dst.device))


def _bytes_of(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _own_storage(obj, ptr: int):
    """(storage, start) from the tensor-like's own ``untyped_storage()`` when it holds ``ptr`` (a library's
    view class over a torch tensor usually has one): no walk over the live tensors."""
    try:
        st = obj.untyped_storage()
    except (AttributeError, RuntimeError, NotImplementedError, TypeError):
        return None
    if not isinstance(st, torch.UntypedStorage):
        return None
    start = st.data_ptr()
    return (st, start) if start <= ptr < start + st.nbytes() else None


def _memory_device(obj):
    """Where a tensor-like's memory is: a CPU tensor under triton_trace.suite's CUDA redirect reports
    cuda:0 while its storage is the CPU's, so the device it reports does not rule a CPU storage out."""
    device = getattr(obj, "device", None)
    if device is not None and torch.device(device).type == "cuda" and not torch.cuda._is_compiled():
        return None
    return device


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


class HostMemory(Attribution):
    """Owns the padded copies; maps raw addresses back to (tensor, element offset)."""

    def __init__(self, in_place: bool = False):
        self.in_place = in_place          # CPU storages are written where they are (see the module's note)
        self.storages: list = []
        self._by_key: dict = {}
        self.tensors: list = []           # TensorInfo, parallel to _tensor_storage
        self._tensor_storage: list = []   # index into self.storages
        self._starts = np.zeros(0, dtype=np.int64)
        self._order = np.zeros(0, dtype=np.int64)
        self._views: dict = {}
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
        # by where the memory is, not the device the tensor reports (a CPU tensor may say cuda:0 under
        # triton_trace.suite's CUDA redirect): its storage is then read in place like any CPU storage
        key = (str(storage.device), storage.data_ptr())
        st = self._by_key.get(key)
        if st is None:
            nbytes = storage.nbytes()
            guard = max(GUARD_MIN, -(-min(nbytes, 1 << 24) // ALIGN) * ALIGN)
            # guard bytes are never read or written (lanes in them are skipped), so they stay unset
            buf = torch.empty(guard + nbytes + guard + ALIGN, dtype=torch.uint8)
            shift = (-buf.data_ptr()) % ALIGN
            data = buf[shift + guard: shift + guard + nbytes]
            lazy = storage.device.type == "cpu"
            if nbytes and not lazy:
                _copy(data, _bytes_of(storage))
            st = _Storage(key, storage, buf, buf.data_ptr() + shift + guard, nbytes, guard, copied=not (nbytes and lazy))
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
            device=str(t.device), storage=self.storages.index(st), buffer=buffers.number(storage))
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
        found = _own_storage(obj, ptr) or self._live().find(ptr, _memory_device(obj))
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

    @staticmethod
    def settle(sid=None) -> None:
        """Write what a batched chunk's stores to storage ``sid`` (None: every storage) hold back, before
        something rewrites its bytes outside the memory seam (the chunk check's fix-up). The seam
        (record/interp/proxy.py) puts its own here."""

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
            n = st.nbytes // dtype.itemsize
            if st.copied:
                shift = st.base - st.buffer.data_ptr()
                view = st.buffer.numpy()[shift: shift + n * dtype.itemsize].view(dtype)
            else:       # the caller's bytes: written through only in place
                view = byte_array(_bytes_of(st.original))[: n * dtype.itemsize].view(dtype)
                view.flags.writeable = self.in_place
            self._views[key] = view
        return view

    def _ensure_copied(self, sid: int) -> None:
        st = self.storages[sid]
        if not st.copied:
            shift = st.base - st.buffer.data_ptr()
            _copy(st.buffer[shift: shift + st.nbytes], _bytes_of(st.original))
            st.copied = True
            self._views = {k: v for k, v in self._views.items() if k[0] != sid}

    def copy_all(self) -> None:
        """Copy every storage into its buffer: before an access through raw addresses (the interpreter's
        own C++ loads, stores and atomics read the buffers)."""
        for sid in range(len(self.storages)):
            self._ensure_copied(sid)

    def is_written(self, tensor: int) -> bool:
        """Whether the launch has stored to this argument's storage yet (a write of a chunk that was undone
        does not count: see ``stored_flags``)."""
        return tensor >= 0 and self.storages[self._tensor_storage[tensor]].stored

    def stored_flags(self) -> tuple:
        return tuple(st.stored for st in self.storages)

    def restore_stored(self, flags: tuple) -> None:
        """Undo the ``stored`` marks of a chunk that is undone (``written`` stays: the chunk check keeps
        the lanes of a storage's loads from then on)."""
        for st, f in zip(self.storages, flags):
            st.stored = f

    def may_view(self, tensor: int) -> bool:
        """Whether a batched chunk's load of ``tensor`` may be a view of its storage instead of a copy: no op
        of the launch wrote the storage yet (a write in the same chunk sends it back: mark_written)."""
        return tensor >= 0 and not self.storages[self._tensor_storage[tensor]].written

    def note_view(self, tensor: int) -> None:
        self.storages[self._tensor_storage[tensor]].viewed = True

    def end_views(self) -> None:
        """A chunk begins: the loads of the last one are no longer in use."""
        for st in self.storages:
            st.viewed = False

    def mark_written(self, tensor: int) -> None:
        """Called before the first write executes: unless it is written in place, the storage's bytes
        move into its buffer now. A write to a storage the running chunk read as views (loads not copied)
        would change values the chunk still holds: the chunk is sent back to run again, its loads of the
        storage copied (it is written now)."""
        if tensor >= 0:
            sid = self._tensor_storage[tensor]
            if self.storages[sid].viewed:
                self.storages[sid].written = True
                self.storages[sid].viewed = False
                raise ChunkRetry(f"'{self.tensors[tensor].name}' is written after the chunk read it without copying")
            if not self.in_place:
                self._ensure_copied(sid)
            self.storages[sid].written = self.storages[sid].stored = True

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
            src = _bytes_of(st.original)
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
            if not st.nbytes or not st.written or not st.copied:     # (not copied: written in place)
                continue
            shift = st.base - st.buffer.data_ptr()
            data = st.buffer[shift: shift + st.nbytes]
            dst = _bytes_of(st.original)
            _copy(dst, data)
