"""The cache simulation's loops (loops.c) built with the machine's C compiler and called through ctypes.

Built by native/cbuild.py once per machine and source (``cc -O2``, about a second), kept in the cache directory
(``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``, the compiled kernels' one) under a name
holding the source's hash, and loaded in a millisecond by any later process: every analysis, however short,
takes the compiled loops. ctypes lets go of the interpreter lock for each call, so the L2's two partitions
step on two cores. Where no compiler works (or ``TRITON_TRACE_NO_JIT=1``), ``library()`` is None, ``failure()``
says why, and the analysis keeps its numpy passes (lockstep.py, cache.py: the same counts, slower).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import subprocess
import threading
import warnings
from typing import Optional

import numpy as np

from . import cbuild

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loops.c")
DISABLED = cbuild.DISABLED

_lock = threading.Lock()
_lib = None
_failed: Optional[str] = None

_P = ctypes.c_void_p
_I = ctypes.c_int64
# argument types of each exported loop (T: the state's integer type, i32 or i64)
_SIGNATURES = {
    "tt_steps_{T}": (_P, _I, _P, _P, _P, _I, _P, _I, _P, _P, _P),
    "tt_entries_{T}": (_P, _I, _P, _P, _P, _P, _P, _I, _I, _P, _I, _I, _P, _P, _P),
}
_compiler = cbuild.compiler
_build = cbuild.build


def _load():
    # (late bound: tests count the builds and take the compiler away)
    lib = cbuild.load(SOURCE, "loops", lambda *a: _build(*a), lambda: _compiler())
    for name, args in _SIGNATURES.items():
        for t in ("i32", "i64"):
            fn = getattr(lib, name.format(T=t))
            fn.argtypes, fn.restype = args, _I
    for types in itertools.product(("i32", "i64"), repeat=4):     # indices, rows, lines in, lines out
        name = "_".join(types)
        fn = getattr(lib, f"tt_gather_{name}")
        fn.argtypes, fn.restype = (_P, _I, _P, _P, _P, _P, _P, _P, _P, _P), None
        fn = getattr(lib, f"tt_open_{name}")
        fn.argtypes, fn.restype = (_P, _I, _P, _P, _P, _P, _I, _P, _P, _I, _P, _I, _I, _I, _P, _P, _P), _I
    for t in ("i32", "i64"):
        fn = getattr(lib, f"tt_l1_{t}")
        fn.argtypes, fn.restype = (_P, _P, _I, _I, _P, _I, _P, _P, _P, _I, _I, _P), _I
    return lib


def library():
    """The loaded loops, built first where needed; None where they cannot be (see ``failure``)."""
    global _lib, _failed
    if _lib is not None or _failed is not None or DISABLED:
        return _lib
    with _lock:
        if _lib is None and _failed is None:
            try:
                _lib = _load()
            except (OSError, subprocess.SubprocessError, AttributeError) as exc:
                _failed = f"{type(exc).__name__}: {exc}"
                # said once per process: the analysis stays exact, only slower (TRITON_TRACE_NO_JIT=1 silences it)
                warnings.warn(f"triton_trace: the cache simulation's compiled loops are not available ({_failed}); "
                              f"analyze() uses its numpy passes: the same report, several times slower",
                              RuntimeWarning, stacklevel=2)
    return _lib


def failure() -> Optional[str]:
    """Why the compiled loops are not available (None: they are, or were never asked for)."""
    return "TRITON_TRACE_NO_JIT is set" if DISABLED else _failed


def ptr(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first element, for a ctypes call (the caller keeps ``a`` alive)."""
    assert a.flags.c_contiguous, "the compiled loops read arrays in C order"
    return a.ctypes.data


def as_bytes(a: np.ndarray) -> np.ndarray:
    """A bool or uint8 array as C-ordered bytes (a contiguous bool array without a copy)."""
    if a.dtype == np.bool_ and a.flags.c_contiguous:
        return a.view(np.uint8)
    return np.ascontiguousarray(a, dtype=np.uint8)


def suffix(dtype) -> str:
    """The loops' name suffix for an integer type (of indices, rows, lines or sets)."""
    return "i32" if np.dtype(dtype).itemsize == 4 else "i64"
