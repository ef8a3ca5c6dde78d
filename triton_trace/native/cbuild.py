"""C sources of the package built with the machine's compiler and loaded through ctypes.

Each source is built once per machine (``cc -O2``, about a second) into the cache directory
(``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``, checked private: cachedir.py) under a name holding
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

from ..cachedir import cache_dir, check_file, private_dir

FLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")
DISABLED = bool(os.environ.get("TRITON_TRACE_NO_JIT"))


def compiler() -> Optional[str]:
    cc = os.environ.get("CC")
    return cc if cc and shutil.which(cc) else (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"))


def target(source: bytes, stem: str) -> str:
    """Where the build of ``source`` lives: any compiler's build serves (a process without one loads it)."""
    key = hashlib.sha256(source + repr((FLAGS, sys.platform, platform.machine())).encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), "native", f"{stem}-{key}.so")


def build(cc: str, source_path: str, path: str) -> None:
    folder = os.path.dirname(path)
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
    check_file(path)
    private_dir("native")


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
        private_dir("native")           # made 0700, or CacheUnusable (an OSError) where not this user's alone
        (builder or build)(cc, source_path, path)
    check_private(path)
    return ctypes.CDLL(path)
