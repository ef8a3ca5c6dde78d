"""Every way a test makes a CUDA tensor without one in hand, on the CPU (the tensor itself: cudatensor.py).

``CudaFactories`` is the TorchFunctionMode that catches what no tensor argument can: factories given
``device="cuda"`` (``"cuda:0"``, ``torch.device("cuda", 0)``, an index), ``torch.set_default_device("cuda")``,
and ``.cuda()``/``.to("cuda")`` on plain CPU tensors (the moves of cudatensor.py). It costs about 2 us on
every op while it is installed, over the CudaTensor's 3.

``LibraryKernels`` routes an aten op on CUDA tensors to a library's own CUDA kernel: a library that registers
its kernels for the CUDA dispatch key (``torch.library``, as FlagGems' ``use_gems()`` does) would else never
run them, since a CudaTensor dispatches as a CPU tensor and torch's CPU kernel would answer (the test passes
hollow). In a CPU-only build of torch aten has no CUDA kernels, so a CUDA-key kernel is always a library's.
``F.scaled_dot_product_attention`` picks its backend before any dispatch key is asked: attention.py makes
CUDA's choice, so a library's CUDA registration of the fused op is reached there too.

``Generator`` stands in for ``torch.Generator``: one made for ``device="cuda"`` draws on the CPU.
"""
from __future__ import annotations

import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..errors import RequiresGPU
from ..record.memory import poison
from . import attention
# (ALLOCATIONS and DEVICE_COUNT: cudaapi and cudamemory read them here)
from .cudatensor import (ALLOCATIONS, CUDA, DEVICE_COUNT, MOVES, CudaTensor, as_cuda,  # noqa: F401
                         check_index, is_cuda_device)


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


class Factories(TorchFunctionMode):
    """Runs ``device="cuda"`` factories on the CPU and returns CudaTensors; moves plain tensors to CUDA;
    ``F.scaled_dot_product_attention`` takes CUDA's backend (attention.py)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        move = MOVES.get(func)
        if move is not None:
            return move(*args, **kwargs)
        if func is attention.SDPA:
            out = attention.sdpa(args, kwargs)
            if out is not None:
                return out
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


class CudaFactories(Factories):
    """``Factories`` for the whole redirect: entering it also enters ``LibraryKernels`` (one context for the
    redirect to install)."""

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
            # the op was called with subclass handling off (CudaTensor.__torch_function__ runs it so) and the
            # factories' mode popped; the library's own code gets both back, so what it makes from its CUDA
            # arguments is CUDA too, as on a GPU (torch.empty_like(q).device: FlagGems' flash attention asserts
            # it), and torch.tensor(..., device=x.device) lands on the CPU (its copy skips this mode)
            with self, Factories(), torch._C._EnableTorchFunction():
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
