"""CUDA tensors that live on the CPU: every way a test makes or moves one, and how they answer.

A ``CudaTensor`` is a ``torch.Tensor`` subclass over ordinary CPU memory that reports ``cuda:0`` as its
device (``device``, ``is_cuda``, ``get_device()``, ``type()``). Torch computes on it exactly as on any CPU
tensor: its ``__torch_function__`` runs the op with subclass dispatch off and marks the tensors it returns
as CUDA again, so ``(x + y).is_cuda`` holds and every value is the CPU's. Two alternatives were weighed:
patching ``Tensor.device``/``is_cuda`` for every tensor (then the reference tensors a test moves back with
``.cpu()`` also claim CUDA, and torch's own Python code takes its CUDA branches), or a device-faking mode
without a subclass (nothing would remember which tensors were "on the GPU"). The subclass costs about 3 us
per op over a plain CPU op; the factory mode about 2 us more, on every op while it is installed.

``CudaFactories`` is the TorchFunctionMode that catches what no tensor argument can: factories given
``device="cuda"`` (``"cuda:0"``, ``torch.device("cuda", 0)``, an index) and ``.cuda()``/``.to("cuda")`` on
plain CPU tensors. Moves copy, as they do between a GPU and its host (``y = x.cpu(); y += 1`` leaves ``x``
alone), and ``.to`` on the device it is already on returns the same tensor, as torch does.

``LibraryKernels`` routes an aten op on CUDA tensors to a library's own CUDA kernel: a library that registers
its kernels for the CUDA dispatch key (``torch.library``, as FlagGems' ``use_gems()`` does) would else never
run them, since a CudaTensor dispatches as a CPU tensor and torch's CPU kernel would answer (the test passes
hollow). In a CPU-only build of torch aten has no CUDA kernels, so a CUDA-key kernel is always a library's.

``Allocations`` counts the bytes of live CUDA storages for ``torch.cuda.memory_allocated`` and its peak.
"""
from __future__ import annotations

import weakref
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..errors import NoSuchDevice, RequiresGPU
from ..record.memory import poison

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


# --------------------------------------------------------------------------------------------------------
# factories
# --------------------------------------------------------------------------------------------------------
def _constructors() -> frozenset:
    """The factories a default device applies to: torch's own list (torch.set_default_device uses it)."""
    listed = getattr(getattr(torch.utils, "_device", None), "_device_constructors", None)
    return frozenset(listed()) if listed is not None else frozenset(
        (torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn, torch.randint, torch.arange,
         torch.linspace, torch.eye, torch.tensor, torch.empty_strided, torch.randperm))


CONSTRUCTORS = _constructors()
DEFAULT_CUDA = [False]       # torch.set_default_device("cuda") was called while the redirect is on


def set_default_device(original):
    """``torch.set_default_device`` under the redirect: "cuda" is remembered here (the factories without a
    device then make CUDA tensors) and torch's own default stays the CPU."""
    def set_default(device):
        DEFAULT_CUDA[0] = device is not None and is_cuda_device(device)
        if DEFAULT_CUDA[0]:
            check_index(device)
        return original(None if DEFAULT_CUDA[0] else device)
    return set_default


def get_default_device(original):
    return lambda: CUDA if DEFAULT_CUDA[0] else original()


class CudaFactories(TorchFunctionMode):
    """Runs ``device="cuda"`` factories on the CPU and returns CudaTensors; moves plain tensors to CUDA.
    Entering it also enters ``LibraryKernels`` (one context for the redirect to install)."""

    def __enter__(self):
        self._impl = torch.library.Library.impl
        torch.library.Library.impl = _recording(self._impl)
        self._kernels = LibraryKernels()
        self._kernels.__enter__()
        try:
            return super().__enter__()
        except BaseException:
            self._kernels.__exit__(None, None, None)
            torch.library.Library.impl = self._impl
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            try:
                self._kernels.__exit__(*exc)
            finally:
                torch.library.Library.impl = self._impl

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        move = MOVES.get(func)
        if move is not None:
            return move(*args, **kwargs)
        device = kwargs.get("device")
        if device is None and DEFAULT_CUDA[0] and func in CONSTRUCTORS:
            device = "cuda"
        if device is None or not is_cuda_device(device):
            if kwargs.get("pin_memory"):
                kwargs = {**kwargs, "pin_memory": False}
            return func(*args, **kwargs)
        check_index(device)
        kwargs = {**kwargs, "device": "cpu"}
        kwargs.pop("pin_memory", None)
        return as_cuda(func(*args, **kwargs), leaf=True)


# --------------------------------------------------------------------------------------------------------
# a library's CUDA kernels
# --------------------------------------------------------------------------------------------------------
_CUDA_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key


def library_kernel(func) -> bool:
    """Whether aten op ``func`` (an OpOverload) has a kernel registered for the CUDA key: a library's, since
    a CPU-only torch has none of its own. Asked on every call: ``use_gems()`` registers and removes them."""
    return _has_kernel(func.name(), "CUDA")


def _on_cuda(args, kwargs) -> bool:
    flat, _ = tree_flatten((args, kwargs))
    return any(isinstance(a, CudaTensor) for a in flat)


# op name -> [(weak reference to the torch.library.Library, its Python kernel, with_keyset)] registered for
# the CUDA key while the redirect is on, newest last: called directly, with the arguments as the dispatcher
# hands a Python kernel on a GPU (a scalar given for a Tensor argument stays a Python number; the boxed
# redispatch, the fallback for kernels registered elsewhere, refuses one)
_PY_KERNELS: dict = {}


def _recording(original):
    def impl(lib, op_name, fn, *args, **kwargs):
        out = original(lib, op_name, fn, *args, **kwargs)
        key = args[0] if args else kwargs.get("dispatch_key", "")
        if key == "CUDA" and callable(fn):
            name = op_name if isinstance(op_name, str) else op_name.name()
            name = name if "::" in name else f"{lib.ns}::{name}"
            name = name[:-len(".default")] if name.endswith(".default") else name
            _PY_KERNELS.setdefault(name, []).append((weakref.ref(lib), fn, bool(kwargs.get("with_keyset"))))
        return out
    return impl


def _python_kernel(name: str):
    for lib, fn, keyset in reversed(_PY_KERNELS.get(name, ())):
        alive = lib()
        if alive is not None and getattr(alive, "m", None) is not None:
            return fn, keyset
    return None


class LibraryKernels(TorchDispatchMode):
    """Runs an aten op whose CUDA kernel a library registered with that kernel when a CudaTensor is among its
    arguments, as the dispatcher does on a GPU; every other op runs as it would. The mode stays on inside
    the library's kernel, so the ops it calls reach the library's other kernels too. Off while the tracer
    runs a launch (its own copies of the arguments are not the library's business)."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # else torch.compile compiles nothing while the mode is on ("non-infra torch dispatch mode present");
        # compiled code still runs with it on
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if device is not None and is_cuda_device(device):
            # a factory or move to CUDA that no torch function mode saw: one called where the modes are
            # popped, as inside a mode's handler (torch.autograd.grad runs every backward there)
            check_index(device)
            return as_cuda(func(*args, **{**kwargs, "device": torch.device("cpu")}), leaf=True)
        if library_kernel(func) and not poison._SUSPENDED[0] and _on_cuda(args, kwargs):
            found = _python_kernel(func.name())
            with self:
                if found is None:
                    return as_cuda(func.redispatch(_CUDA_KEYS, *args, **kwargs))
                fn, keyset = found
                return as_cuda(fn(_CUDA_KEYS, *args, **kwargs) if keyset else fn(*args, **kwargs))
        try:
            return func(*args, **kwargs)
        except NotImplementedError as e:
            # an op torch implements for CUDA alone (aten::_scaled_dot_product_flash_attention): a GPU's
            if not _has_kernel(func.name(), "CPU") and _on_cuda(args, kwargs):
                raise RequiresGPU(f"torch's CUDA kernel of {func.name()} (it has none for the CPU)") from e
            raise


# --------------------------------------------------------------------------------------------------------
# torch.Generator(device="cuda")
# --------------------------------------------------------------------------------------------------------
_GENERATOR = torch.Generator


class _GeneratorMeta(type(_GENERATOR)):
    def __instancecheck__(cls, obj):           # torch.Generator's own instances still pass isinstance
        return isinstance(obj, _GENERATOR)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _GENERATOR)


class Generator(_GENERATOR, metaclass=_GeneratorMeta):
    """``torch.Generator`` while the redirect is on: one for ``device="cuda"`` is a CPU generator (random
    numbers for CUDA tensors are drawn on the CPU) that reports the CUDA device."""

    def __new__(cls, device="cpu"):
        cuda = is_cuda_device(device)
        g = _GENERATOR.__new__(cls, "cpu" if cuda else device)
        g._tt_cuda = cuda
        return g

    def __init__(self, device="cpu"):
        pass

    @property
    def device(self):
        return CUDA if self._tt_cuda else super().device

