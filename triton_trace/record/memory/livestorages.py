"""Memory a traced kernel reaches without it being an argument: a pointer value read from a table of
``data_ptr()``s, or a tensor-like object. HostMemory (memory.py) copies such a storage in like an argument
once this finds it."""
from __future__ import annotations

import torch


_TL_TO_TORCH = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "int1": "bool",
                "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                "uint16": "uint16", "uint32": "uint32", "uint64": "uint64"}


def torch_dtype(pointee) -> torch.dtype:
    name = _TL_TO_TORCH.get(getattr(pointee, "name", ""), "uint8")
    return getattr(torch, name, torch.uint8)


class LiveStorages:
    """Every storage a live torch tensor holds, by address: how a pointer value that is not an argument
    (read from a table of ``data_ptr()``s) or a tensor-like object finds the memory it names. Built at
    most once per launch, and only when needed (it walks the garbage collector's objects)."""

    def __init__(self):
        import gc
        seen = {}
        for obj in gc.get_objects():
            # type(), not isinstance(): isinstance reads __class__, which some module proxies warn about
            if issubclass(type(obj), torch.Tensor) and obj.layout == torch.strided and obj.device.type != "meta":
                try:
                    st = obj.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                if st.nbytes():
                    seen.setdefault((st.data_ptr(), str(st.device)), st)
        self._items = sorted(((p, st) for (p, _), st in seen.items()), key=lambda item: item[0])

    def find(self, ptr: int, device=None):
        """(storage, its start address) holding byte ``ptr``, or None."""
        for start, st in self._items:
            if start <= ptr < start + st.nbytes() and (device is None or str(st.device) == str(device)):
                return st, start
        return None
