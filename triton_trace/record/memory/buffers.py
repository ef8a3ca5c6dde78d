"""Which launches of a process used the same memory: one number per live storage, ``TensorInfo.buffer``.

A host loop that launches a kernel once per chunk of an output writes one storage over several launches;
judging that output launch by launch calls every other chunk unwritten. Storage offsets of two launches
compare only when both used the same storage while it was alive: an address alone is not enough (torch's
allocator hands a freed block to the next tensor), so each storage is held by a weak reference and a dead
or different storage at a known address gets a new number. torch keeps one Python object per live storage
(``untyped_storage()`` returns it again), so identity of that object is identity of the memory.
"""
from __future__ import annotations

import itertools
import threading
import weakref

_lock = threading.Lock()
_next = itertools.count()
_live: dict = {}          # (device, address, nbytes) -> (number, weak reference to the storage)


def number(storage) -> int:
    """The process-wide number of ``storage`` (a torch.UntypedStorage): the same for as long as it lives."""
    try:
        key = (str(storage.device), int(storage.data_ptr()), int(storage.nbytes()))
        ref = weakref.ref(storage)
    except (TypeError, RuntimeError, AttributeError):
        with _lock:
            return next(_next)            # not a storage torch keeps an object for: shared with no launch
    with _lock:
        known = _live.get(key)
        if known is not None and known[1]() is storage:
            return known[0]
        if len(_live) > 4096:             # forget storages that died (their keys may come back reused)
            for k in [k for k, (_, r) in _live.items() if r() is None]:
                del _live[k]
        n = next(_next)
        _live[key] = (n, ref)
        return n
