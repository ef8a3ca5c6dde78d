"""The cache simulation's loops (loops.c) built with the machine's C compiler and called through ctypes.

Built once per machine and source (``cc -O2``, about a second), kept in the cache directory
(``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``, the compiled kernels' one) under a name
holding the source's hash, and loaded in a millisecond by any later process: every analysis, however short,
takes the compiled loops. ctypes lets go of the interpreter lock for each call, so the L2's two partitions
step on two cores. Where no compiler works (or ``TRITON_TRACE_NO_JIT=1``), ``library()`` is None, ``failure()``
says why, and the analysis keeps its numpy passes (lockstep.py, cache.py: the same counts, slower).
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from typing import Optional

import numpy as np

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loops.c")
FLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")
DISABLED = bool(os.environ.get("TRITON_TRACE_NO_JIT"))

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


def _compiler() -> Optional[str]:
    cc = os.environ.get("CC")
    return cc if cc and shutil.which(cc) else (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"))


def _target(source: bytes) -> str:
    """Where the build of ``source`` lives: any compiler's build serves (a process without one loads it)."""
    from ..compiled import cache_dir
    key = hashlib.sha256(source + repr((FLAGS, sys.platform, platform.machine())).encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), "native", f"loops-{key}.so")


def _build(cc: str, source: bytes, path: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    # compiled beside its final name, then renamed: two processes building at once each load a whole file
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", tmp, SOURCE], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{cc} could not compile {SOURCE}: {done.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)          # (whatever the umask: _check_private refuses what others may write)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_private(path: str) -> None:
    """Refuse a build that someone else could have written: loading it runs its code in this process."""
    if not hasattr(os, "getuid"):
        return
    for p in (path, os.path.dirname(path)):
        st = os.stat(p)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise OSError(f"{p} is not this user's alone (owner uid {st.st_uid}, mode {oct(st.st_mode & 0o777)}): "
                          f"not loading the compiled loops from it; set TRITON_TRACE_CACHE_DIR to a private folder")


def _load():
    with open(SOURCE, "rb") as f:
        source = f.read()
    cc = _compiler()
    path = _target(source)
    if not os.path.exists(path):
        if cc is None:
            raise OSError("no C compiler (cc, gcc or clang) on PATH, and the loops were never built here")
        _build(cc, source, path)
    _check_private(path)
    lib = ctypes.CDLL(path)
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
