"""Poisoned ``torch.empty``: memory nobody initialised, made visible without a declaration.

Under ``trace_all(poison_empty=True)`` (and the CUDA redirect's ``poison_empty``), and from the decoration
on under ``@trace(poison_empty=True)`` (``from_now_on``), every tensor that
``torch.empty`` and its kin return is filled with a poison pattern: a quiet NaN with a payload of its own
for floats (not the NaN that torch writes, so a suite that fills its buffers with NaN itself is told
apart), 0xA5 bytes for integers (-1515870811 as int32: an index made of it is out of bounds). A kernel that
reads such memory before writing it then computes with NaN or a wild index, as it might with a GPU's
garbage, but reproducibly.

The storage is also remembered. When a traced launch starts, an argument whose whole storage still holds
the pattern is *undefined at launch*, as if named in ``trace(outputs=...)``, for the uninitialised-read
check alone (``Launch.meta["poisoned"]``): a storage that anything wrote, even in part, is left out, so a
buffer a test half-filled on purpose never gives a false finding. Checking the bytes, not bookkeeping of
who wrote what, is what makes writes by torch (``fill_``, ``copy_``, slicing) count without hooking them.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Optional

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

# dtype -> (the numpy integer type of its bits, the pattern)
_INT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
PATTERNS = {
    torch.float32: (np.uint32, 0x7FD5A5A5), torch.complex64: (np.uint32, 0x7FD5A5A5),
    torch.float64: (np.uint64, 0x7FF8A5A5A5A5A5A5), torch.complex128: (np.uint64, 0x7FF8A5A5A5A5A5A5),
    torch.float16: (np.uint16, 0x7E5A), torch.bfloat16: (np.uint16, 0x7FD5),
}
for _name in ("float8_e4m3fn", "float8_e5m2"):          # their NaN: all exponent and mantissa bits set
    if hasattr(torch, _name):
        PATTERNS[getattr(torch, _name)] = (np.uint8, 0x7F)
for _dt in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
    _size = torch.empty(0, dtype=_dt).element_size()
    PATTERNS[_dt] = (_INT[_size], int.from_bytes(b"\xa5" * _size, "little"))

# Factories whose memory is undefined (torch.empty's kin, the new_/_like forms included).
EMPTY_FACTORIES = frozenset(f for f in (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty,
                                        torch.Tensor.new_empty_strided) if f is not None)

# storage address -> (bytes, bits type, pattern, weak reference to the storage): the poisoned storages alive
_POISONED: dict = {}


def _storage_bits(storage: torch.UntypedStorage, bits) -> np.ndarray:
    from .space import byte_array  # not Tensor.numpy(): that makes the user's storage not resizable
    data = byte_array(torch.empty(0, dtype=torch.uint8).set_(storage))
    return data[:len(data) - len(data) % np.dtype(bits).itemsize].view(bits)


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill the whole storage of ``t`` with its dtype's pattern and remember it (bool and other dtypes
    without a pattern are left as they are). Returns ``t``."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return t
    entry = PATTERNS.get(t.dtype)
    if entry is None:
        return t
    storage = t.untyped_storage()
    if storage.device.type != "cpu" or not storage.nbytes():
        return t
    bits, pattern = entry
    _storage_bits(storage, bits)[:] = pattern
    ptr = storage.data_ptr()
    # forgotten with the storage (torch keeps one Python object per live storage, so it dies with the memory)
    _POISONED[ptr] = (storage.nbytes(), bits, pattern,
                      weakref.ref(storage, lambda ref, ptr=ptr: _forget(ptr, ref)))
    return t


def _forget(ptr: int, ref) -> None:
    entry = _POISONED.get(ptr)
    if entry is not None and entry[3] is ref:
        del _POISONED[ptr]


def still_poisoned(t) -> bool:
    """Whether every byte of the storage behind ``t`` still holds the pattern it was poisoned with."""
    if not _POISONED or not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return False
    storage = t.untyped_storage()
    entry = _POISONED.get(storage.data_ptr())
    if entry is None or entry[0] != storage.nbytes():
        return False
    return bool((_storage_bits(storage, entry[1]) == entry[2]).all())


def unwritten_arguments(bound: dict) -> tuple:
    """Names of the tensor arguments of a launch whose storage nothing has written since it was poisoned."""
    if not _POISONED:
        return ()
    return tuple(name for name, v in bound.items() if still_poisoned(v))


_SUSPENDED = [0]     # > 0 while the tracer runs a launch: its own buffers are not the user's memory


class PoisonEmpty(TorchFunctionMode):
    """Fills what the empty factories return. A mode, so ``from torch import empty`` is caught too."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in EMPTY_FACTORIES and not _SUSPENDED[0] and isinstance(out, torch.Tensor) and not _done(out):
            poison(out)
        return out


def _done(t: torch.Tensor) -> bool:
    """Whether ``t``'s storage was poisoned already: by another PoisonEmpty lower on the stack (a block's,
    over ``from_now_on``'s), which saw this call first."""
    if t.layout != torch.strided:
        return False
    storage = t.untyped_storage()
    entry = _POISONED.get(storage.data_ptr())
    return entry is not None and entry[3]() is storage


@contextmanager
def suspended():
    """No poisoning inside the block: the tracer's own buffers (a launch's padded address space, whose
    pages it never touches unless the kernel does) must stay untouched and cheap."""
    _SUSPENDED[0] += 1
    try:
        yield
    finally:
        _SUSPENDED[0] -= 1


@contextmanager
def poisoning(enabled: bool = True):
    """Poison every empty tensor made inside the block (a no-op when ``enabled`` is False)."""
    if not enabled:
        yield
        return
    with PoisonEmpty():
        yield


_FOR_GOOD: list = []     # the PoisonEmpty from_now_on() put at the bottom of each thread's mode stack


def from_now_on() -> None:
    """Poison every empty tensor made from now on, for the rest of the process (``@trace(poison_empty=True)``:
    a decorator has no block; the tensors a decorated kernel gets are made later, anywhere). torch's function
    modes are per thread: the mode goes under the modes of the thread that calls this, at the bottom of its
    stack, so a ``with`` block open now still pops its own mode when it ends."""
    stack = _mode_stack()
    if any(mode in _FOR_GOOD for mode in stack):
        return
    mode = PoisonEmpty()
    above = [torch.overrides._pop_mode() for _ in stack][::-1]
    torch.overrides._push_mode(mode)
    for m in above:
        torch.overrides._push_mode(m)
    _FOR_GOOD.append(mode)


def _mode_stack() -> list:
    return torch.overrides._get_current_function_mode_stack()


def pattern_of(dtype) -> Optional[int]:
    """The poison bits of ``dtype`` as an unsigned integer, or None when it is not poisoned."""
    entry = PATTERNS.get(dtype)
    return None if entry is None else entry[1]
