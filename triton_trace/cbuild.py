"""C sources of the package built with the machine's compiler and loaded through ctypes.

Each source is built once per machine (``cc -O2``, about a second) into the cache directory
(``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``, the compiled kernels' one) under a name holding
the source's hash, and loaded in a millisecond by any later process, which needs no compiler. What uses a
build keeps a numpy path for where none can be made (no compiler, ``TRITON_TRACE_NO_JIT=1``).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Optional

FLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")
DISABLED = bool(os.environ.get("TRITON_TRACE_NO_JIT"))


def compiler() -> Optional[str]:
    cc = os.environ.get("CC")
    return cc if cc and shutil.which(cc) else (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"))


def cache_dir() -> str:
    """Where builds (and the compiled kernels, compiled/) are kept."""
    return os.environ.get("TRITON_TRACE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_trace")


def target(source: bytes, stem: str) -> str:
    """Where the build of ``source`` lives: any compiler's build serves (a process without one loads it)."""
    key = hashlib.sha256(source + repr((FLAGS, sys.platform, platform.machine())).encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), "native", f"{stem}-{key}.so")


def build(cc: str, source_path: str, path: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    # compiled beside its final name, then renamed: two processes building at once each load a whole file
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", tmp, source_path], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{cc} could not compile {source_path}: {done.stderr.strip()[-2000:]}")
        os.chmod(tmp, 0o755)          # (whatever the umask: check_private refuses what others may write)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_private(path: str) -> None:
    """Refuse a build that someone else could have written: loading it runs its code in this process."""
    if not hasattr(os, "getuid"):
        return
    for p in (path, os.path.dirname(path)):
        st = os.stat(p)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise OSError(f"{p} is not this user's alone (owner uid {st.st_uid}, mode {oct(st.st_mode & 0o777)}): "
                          f"not loading compiled code from it; set TRITON_TRACE_CACHE_DIR to a private folder")


def load(source_path: str, stem: str, builder: Callable = None, find_compiler: Callable = None) -> ctypes.CDLL:
    """The build of ``source_path``, made first where there is none (``builder(cc, source, path)`` with the
    compiler ``find_compiler()`` names; defaults ``build`` and ``compiler``). Raises OSError saying why where it
    cannot be."""
    with open(source_path, "rb") as f:
        source = f.read()
    path = target(source, stem)
    if not os.path.exists(path):
        cc = (find_compiler or compiler)()
        if cc is None:
            raise OSError(f"no C compiler (cc, gcc or clang) on PATH, and {os.path.basename(source_path)} was "
                          f"never built here")
        (builder or build)(cc, source_path, path)
    check_private(path)
    return ctypes.CDLL(path)
