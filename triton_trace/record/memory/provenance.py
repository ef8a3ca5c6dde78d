"""Which argument a pointer was derived from, carried alongside the pointer through the kernel.

An address alone can mislead: ``x_ptr + offs + 10**9`` may land inside another argument's memory, and
the access would be attributed to that tensor (and an ``on_oob="raise"`` message would name it). Each
pointer argument's handle is tagged with its tensor's index; the builder operations that derive pointers
from pointers (``+``, splat, broadcast, reshape, ``tl.where``, ...) pass the tag on; a memory operation
hands the tag of its pointers to the recorder, which attributes the access to that argument (and finds
the far lanes out of its bounds), falling back to addresses where no tag is known.
"""
from __future__ import annotations

from ..gpu.lowp import inner_method
from ..interp.access import TensorHandle
from ..patching import carried

ORIGIN = "_tt_origin"
# builder operations whose pointer result points into the same argument as their pointer operands
DERIVING = ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims", "create_reshape",
            "create_trans", "create_cat", "create_join", "create_bitcast", "ternary_op", "create_gather")
MEMORY = ("create_load", "create_store", "create_masked_load", "create_masked_store", "create_atomic_rmw",
          "create_atomic_cas")


def origin(handle):
    return carried(handle, ORIGIN, None)


def tag(handle, tensor_index) -> None:
    if tensor_index is not None and isinstance(handle, TensorHandle):
        setattr(handle, ORIGIN, tensor_index)


def _is_pointer(handle) -> bool:
    dtype = getattr(handle, "dtype", None)
    is_ptr = getattr(dtype, "is_ptr", None)
    return bool(is_ptr and is_ptr())


def _single_origin(args):
    found = {origin(a) for a in args if isinstance(a, TensorHandle)} - {None}
    return found.pop() if len(found) == 1 else None


def install(scope, builder, rec) -> None:
    for name in DERIVING:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _deriving(inner_method(builder, name)))
    for name in MEMORY:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _memory(inner_method(builder, name), rec))


def _deriving(inner):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        o = _single_origin(args)
        if o is not None and _is_pointer(out):
            tag(out, o)
        return out
    return run


def _memory(inner, rec):
    def run(*args, **kwargs):
        ptrs = next((a for a in args if _is_pointer(a)), None)
        rec.origin = origin(ptrs) if ptrs is not None else None
        try:
            return inner(*args, **kwargs)
        finally:
            rec.origin = None
    return run
