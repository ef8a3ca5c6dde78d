"""The interpreter's objects as the rest of the recorder reaches them: its value class, its builder, its
semantic object, its memory module, its reduction and scan classes, the standard combine functions it
reduces with numpy, and an MLIR context from Triton's C++ module. Only record/interp/ imports Triton's
interpreter, ``triton._C`` or the underscored names of ``triton.language``
(tests/project/test_seam_access.py), so a release that moves one is fixed here, not in every module that
uses it.

What the hooks swap during a launch (the memory module becomes the proxy) is read at call time, hence
functions; what no hook replaces is a plain alias, which costs nothing on the hot paths."""
from __future__ import annotations

from typing import Optional

import triton.language as tl
from triton.runtime import interpreter as _ti

# a value of the interpreter: ``.data`` a numpy array, ``.dtype`` its Triton scalar type
TensorHandle = _ti.TensorHandle

# ``np_dtype(tl.float16)`` -> float16; any pointer type -> uint64 (the interpreter's own table)
np_dtype = _ti._get_np_dtype

# the classes behind tl.reduce and tl.associative_scan; recording and lowp patch their ``apply``
ReduceOps = _ti.ReduceOps
ScanOps = _ti.ScanOps


def builder():
    """The interpreter's builder instance: every op of a launch goes through its methods, and a batched
    chunk (batch/chunk.py) lives on it while it runs."""
    return _ti.interpreter_builder


def semantic():
    """The semantic object the language's builtins take (``_semantic=``), None where a release has none."""
    return getattr(_ti, "interpreter_semantic", None)


def memory():
    """The memory module loads and stores go through: the interpreter's C++ one, or the proxy the hooks put
    in its place for the launch (interp/proxy.py)."""
    return _ti._interpreter


# the combine functions tl.sum & co. pass, by what they compute: the interpreter (and a batched chunk)
# reduces these with one numpy call, a kernel's own combine function element by element
_COMBINES = (("_sum_combine", "sum"), ("_prod_combine", "prod"), ("_elementwise_max", "max"),
             ("_elementwise_min", "min"), ("_argmin_combine_tie_break_left", "argmin"),
             ("_argmin_combine_tie_break_fast", "argmin"), ("_argmax_combine_tie_break_left", "argmax"),
             ("_argmax_combine_tie_break_fast", "argmax"))
COMBINE_KINDS = {id(getattr(tl.standard, name)): kind for name, kind in _COMBINES if hasattr(tl.standard, name)}


def combine_kind(fn) -> Optional[str]:
    """"sum", "prod", "max", "min", "argmin" or "argmax" for a standard combine function, None for any
    other (a kernel's own)."""
    return COMBINE_KINDS.get(id(fn))


def mlir_context(backend):
    """A fresh MLIR context with Triton's dialects and ``backend``'s loaded: what building a kernel's IR needs
    (record/autotune.py compiles a config to see whether Triton's autotuner would drop it)."""
    from triton._C.libtriton import ir      # the compiler's half of the C++ module: only when a config is checked
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    return context
