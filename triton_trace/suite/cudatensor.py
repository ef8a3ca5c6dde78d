"""The CUDA tensor that lives on the CPU, and how it answers and moves.

A ``CudaTensor`` is a ``torch.Tensor`` subclass over ordinary CPU memory that reports ``cuda:0`` as its
device (``device``, ``is_cuda``, ``get_device()``, ``type()``). Torch computes on it exactly as on any CPU
tensor: its ``__torch_function__`` runs the op with subclass dispatch off and marks the tensors it returns
as CUDA again, so ``(x + y).is_cuda`` holds and every value is the CPU's. Two alternatives were weighed:
patching ``Tensor.device``/``is_cuda`` for every tensor (then the reference tensors a test moves back with
``.cpu()`` also claim CUDA, and torch's own Python code takes its CUDA branches), or a device-faking mode
without a subclass (nothing would remember which tensors were "on the GPU"). The subclass costs about 3 us
per op over a plain CPU op.

Moves copy, as they do between a GPU and its host (``y = x.cpu(); y += 1`` leaves ``x`` alone), and ``.to``
on the device it is already on returns the same tensor, as torch does. ``Allocations`` counts the bytes of
live CUDA storages for ``torch.cuda.memory_allocated`` and its peak. The ways a test makes CUDA tensors
without a CUDA argument (factories, a library's kernels, generators) are in tensors.py.
"""
from __future__ import annotations

import weakref

import torch

from ..errors import NoSuchDevice

CUDA = torch.device("cuda", 0)
DEVICE_COUNT = 1


def is_cuda_device(device) -> bool:
    """Whether ``device`` (a string, torch.device or index) names a CUDA device."""
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device == "cuda" or device.startswith("cuda:")
    return isinstance(device, int) and not isinstance(device, bool)     # torch reads an index as CUDA's


def check_index(device) -> None:
    """Refuse a CUDA device other than cuda:0, as CUDA refuses an ordinal past its device count."""
    if isinstance(device, str):
        device = torch.device(device)
    index = device.index if isinstance(device, torch.device) else device
    if index is not None and not 0 <= index < DEVICE_COUNT:
        raise NoSuchDevice(f"CUDA device {index} does not exist: triton_trace's CUDA redirect has "
                           f"{DEVICE_COUNT} GPU (cuda:0); check torch.cuda.device_count() before using more")


class Allocations:
    """Bytes of the live storages behind CUDA tensors: a storage is counted once, from the first CUDA
    tensor seen on it until torch frees it (torch keeps one Python object per live storage, so a weak
    reference to it dies with the memory; a plain weakref, since ``weakref.finalize`` costs 5 us a tensor)."""

    def __init__(self):
        self.live: dict = {}             # storage address -> (bytes, weak reference to the storage)
        self.current = self.peak = 0
        self.allocated = self.freed = 0  # running totals, as torch.cuda.memory_stats counts them
        self.count = 0

    def track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self.live or storage.device.type != "cpu":
            return
        n = storage.nbytes()
        self.live[ptr] = (n, weakref.ref(storage, lambda _, ptr=ptr: self._free(ptr)))
        self.current += n
        self.allocated += n
        self.count += 1
        self.peak = max(self.peak, self.current)

    def _free(self, ptr: int) -> None:
        n = self.live.pop(ptr, (0, None))[0]
        self.current -= n
        self.freed += n

    def reset_peak(self) -> None:
        self.peak = self.current


ALLOCATIONS = Allocations()


def _plain(t: torch.Tensor) -> torch.Tensor:
    """The same tensor (same storage, same autograd history) as a plain CPU tensor."""
    return t.as_subclass(torch.Tensor) if isinstance(t, CudaTensor) else t


def as_cuda(t, leaf: bool = False):
    """Mark a CPU tensor (or the tensors of a tuple or list) as CUDA. ``leaf``: ``t`` was just made (a
    factory's result), so a ``requires_grad`` tensor stays a leaf whose ``.grad`` autograd fills."""
    if isinstance(t, (tuple, list)):
        return type(t)(as_cuda(v, leaf) for v in t)
    if not isinstance(t, torch.Tensor) or isinstance(t, CudaTensor):
        return t
    if t.layout != torch.strided or t.device.type != "cpu":
        return t
    ALLOCATIONS.track(t)
    if leaf and t.requires_grad and t.is_leaf:
        return torch.Tensor._make_subclass(CudaTensor, t.detach(), True)      # as nn.Parameter does
    return t.as_subclass(CudaTensor)


# --------------------------------------------------------------------------------------------------------
# moves between the devices: Tensor.cuda / cpu / to
# --------------------------------------------------------------------------------------------------------
def _to_cuda(t, device=None, non_blocking=False, memory_format=torch.preserve_format):
    if device is not None:
        check_index(device)
    if isinstance(t, CudaTensor):
        if memory_format == torch.preserve_format:
            return t
        return as_cuda(_plain(t).contiguous(memory_format=memory_format))
    return as_cuda(t.to(copy=True, memory_format=memory_format))


def _to_cpu(t, memory_format=torch.preserve_format):
    if isinstance(t, CudaTensor):
        return _plain(t).to(copy=True, memory_format=memory_format)
    return t if memory_format == torch.preserve_format else t.contiguous(memory_format=memory_format)


def _parse_to(args, kwargs) -> tuple:
    """(device or None, the remaining keyword arguments for a same-device ``Tensor.to``)."""
    device, rest = kwargs.pop("device", None), dict(kwargs)
    bools = []
    for a in args:
        if a is None:                          # nn.Module.to passes dtype=None positionally
            continue
        if isinstance(a, torch.dtype):
            rest["dtype"] = a
        elif isinstance(a, torch.Tensor):
            device, rest["dtype"] = a.device, a.dtype
        elif isinstance(a, bool):
            bools.append(a)
        elif isinstance(a, (str, torch.device, int)):
            device = a
        else:
            raise TypeError(f"Tensor.to() got an unexpected argument {a!r}")
    if bools:                                  # to(device, dtype, non_blocking, copy)
        rest.setdefault("non_blocking", bools[0])
        if len(bools) > 1:
            rest.setdefault("copy", bools[1])
    rest.pop("non_blocking", None)             # CPU copies are synchronous either way
    return device, rest


def _to(t, *args, **kwargs):
    device, rest = _parse_to(args, kwargs)
    here = isinstance(t, CudaTensor)
    if device is None:
        there = here
    elif is_cuda_device(device):
        check_index(device)
        there = True
    elif torch.device(device).type == "cpu":
        there = False
    else:                                      # meta, ...: leaves the redirect
        return _plain(t).to(device, **rest)
    src = _plain(t)
    out = src.to(**({**rest, "copy": True} if here != there else rest))
    if not there:
        return out
    return t if (out is src and here) else as_cuda(out)


def _type(t, dtype=None, non_blocking=False, **kwargs):
    if dtype is None and not kwargs:           # "torch.cuda.FloatTensor" for a CUDA tensor, as on the GPU
        name = _plain(t).type()
        return name.replace("torch.", "torch.cuda.", 1) if isinstance(t, CudaTensor) else name
    if isinstance(dtype, str) and ".cuda." in dtype:
        return as_cuda(_plain(t).type(dtype.replace(".cuda.", ".", 1)))
    return _plain(t).type(dtype, non_blocking, **kwargs)


def _no_op(t, *args, **kwargs):
    return None


def _pinned(t, *args, **kwargs):
    return t                                   # no page-locked host memory without a GPU: the copy is plain


MOVES = {
    torch.Tensor.cuda: _to_cuda, torch.Tensor.cpu: _to_cpu, torch.Tensor.to: _to, torch.Tensor.type: _type,
    torch.Tensor.record_stream: _no_op, torch.Tensor.pin_memory: _pinned,
}


class CudaTensor(torch.Tensor):
    """A CPU tensor that answers as one on ``cuda:0``. See the module's docstring."""

    @property
    def device(self):
        return CUDA

    @property
    def is_cuda(self):
        return True

    @property
    def is_cpu(self):
        return False

    def get_device(self):
        return 0

    def __deepcopy__(self, memo):
        # torch's default copies through new_empty, which subclass dispatch off would make plain
        if id(self) not in memo:
            copied = _plain(self.detach()).__deepcopy__(memo).requires_grad_(self.requires_grad)
            memo[id(self)] = as_cuda(copied, leaf=True)
        return memo[id(self)]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        move = MOVES.get(func)
        if move is not None:
            return move(*args, **kwargs)
        with torch._C.DisableTorchFunctionSubclass():     # as torch.Tensor.__torch_function__ runs ops
            out = func(*args, **kwargs)
        device = kwargs.get("device")
        if device is not None and not is_cuda_device(device):
            return out                                     # x.new_zeros(..., device="cpu")
        if func in _NO_WRAP:
            return out
        return as_cuda(out)


# what torch's default leaves unwrapped, less ``.grad``: a CUDA parameter's gradient is on CUDA too
_NO_WRAP = torch.overrides.get_default_nowrap_functions() - {torch.Tensor.grad.__get__}
