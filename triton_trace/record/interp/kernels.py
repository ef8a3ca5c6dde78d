"""What a Triton kernel object is: a @triton.jit function (compiled or interpreted), possibly under autotune
and heuristics wrappers, and the Python function at the bottom. Apart from the hooks so that capturing a
kernel's module (record/kernelmodule.py) needs none of the recording machinery."""
from __future__ import annotations

from typing import Callable

from triton.runtime import interpreter as _ti
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.jit import JITFunction


def is_kernel(obj) -> bool:
    return isinstance(obj, (JITFunction, _ti.InterpretedFunction, Autotuner, Heuristics))


def innermost(obj):
    """The JITFunction / InterpretedFunction at the bottom of an autotune/heuristics chain."""
    while isinstance(obj, (Autotuner, Heuristics)):
        obj = obj.fn
    if not isinstance(obj, (JITFunction, _ti.InterpretedFunction)):
        raise TypeError(f"{obj!r} is not a @triton.jit kernel")
    return obj


def python_fn(obj) -> Callable:
    return innermost(obj).fn


def unspecialized(obj) -> tuple:
    """(the parameters ``@triton.jit(do_not_specialize=...)`` names, those of ``do_not_specialize_on_alignment``)
    of the kernel: what the GPU's launcher leaves unspecialized, and so must a compile of the traced kernel."""
    params = getattr(innermost(obj), "params", ())
    return (tuple(p.name for p in params if getattr(p, "do_not_specialize", False)),
            tuple(p.name for p in params if getattr(p, "do_not_specialize_on_alignment", False)))


def pre_run_hooks(obj) -> list:
    """The hooks registered with ``kernel.add_pre_run_hook``: Triton calls them with the launch's
    arguments before every launch, compiled or interpreted."""
    return list(getattr(innermost(obj), "pre_run_hooks", ()) or ())


def autotune_parts(obj) -> list:
    """The chain of Autotuner / Heuristics wrappers above the jit function, outermost first."""
    chain = []
    while isinstance(obj, (Autotuner, Heuristics)):
        chain.append(obj)
        obj = obj.fn
    return chain
