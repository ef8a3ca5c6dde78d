"""numpy's allocations during a traced launch from blocks the launch already touched (arena.c).

A batched chunk allocates and frees large temporaries op after op. Through glibc each comes back as fresh
pages (zeroed by the kernel on first touch) and each unmap interrupts the process's other threads, BLAS's
among them, to flush their TLBs: on this project's virtual machines a 4096^3 fp16 matmul spent half of its
stacked products waiting on that. ``active()`` installs arena.c as numpy's memory handler for the launch
(numpy keeps the handler in a context variable: other threads and contexts keep theirs). When the last one
leaves, up to LINGER_MAX bytes of what it kept wait LINGER_S seconds for the next launch (launches in a row
then start on touched pages: a 4M-element vector add traced 29-31 -> 27-28 ms, page faults 2600-2800 -> 15-270
per launch) and the rest is unmapped. Values are untouched: only where the bytes live changes.

The handler is set through numpy's C API (``PyDataMem_SetHandler``, slot 304 of its API table, numpy 1.22
and later; checked by the name numpy reports once it is set). Where the source cannot be built or numpy
lacks the slot, ``active()`` does nothing (``failure()`` says why); ``TRITON_TRACE_NO_ARENA=1`` or
``TRITON_TRACE_NO_JIT=1`` turn it off.

``small_pages()`` (inside ``active()``, and around ``analyze``) has numpy map large arrays without
huge-page advice, and the arena too. numpy advises huge pages for arrays of 4 MB and more; on the virtual
machines this project is measured on (Firecracker guests that hand freed memory back to the host), the first
touch of fresh memory so advised ran at 30-120 MB/s against 1.5-2.5 GB/s without (a 400 MB array filled in
1.7-4.7 s against 0.16 s), and the analysis of a 4096^3 matmul touches most of its memory once.
``TRITON_TRACE_HUGEPAGES=1`` keeps numpy's choice. Only where the bytes live changes, never a value.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import Optional

import numpy as np

from . import cbuild

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arena.c")
DISABLED = cbuild.DISABLED or bool(os.environ.get("TRITON_TRACE_NO_ARENA"))
NAME = "triton_trace_arena"
HUGE_PAGES = os.environ.get("TRITON_TRACE_HUGEPAGES", "") == "1"
LINGER_MAX = 256 << 20           # bytes kept after the last launch ends, for the next (and an eighth of KEEP)
LINGER_S = 1.0                    # seconds they wait for it
KEEP_MAX = 1 << 30                # bytes of freed blocks kept at most (and an eighth of the machine's memory)
_SET_HANDLER_SLOT = 304           # numpy/__multiarray_api.h: PyDataMem_SetHandler

_lock = threading.Lock()
_state: Optional[tuple] = None    # (library, our handler capsule, numpy's set-handler function)
_failed: Optional[str] = None


def _numpy_modules():
    try:
        from numpy._core import _multiarray_umath as umath, multiarray
    except ImportError:                        # numpy 1.x
        from numpy.core import _multiarray_umath as umath, multiarray
    return umath, multiarray


def _setup() -> tuple:
    if np.lib.NumpyVersion(np.__version__) < "1.22.0":
        raise OSError(f"numpy {np.__version__} has no memory handlers (1.22 and later do)")
    lib = cbuild.load(SOURCE, "arena")
    lib.tt_arena_enter.argtypes, lib.tt_arena_enter.restype = (ctypes.c_int64,), None
    lib.tt_arena_exit.argtypes, lib.tt_arena_exit.restype = (ctypes.c_int64,), ctypes.c_int64
    lib.tt_arena_trim.argtypes, lib.tt_arena_trim.restype = (), ctypes.c_int64
    lib.tt_arena_stats.argtypes, lib.tt_arena_stats.restype = (ctypes.c_void_p,), None
    lib.tt_arena_huge.argtypes, lib.tt_arena_huge.restype = (ctypes.c_int,), None
    lib.tt_arena_huge(int(HUGE_PAGES))
    api = ctypes.pythonapi
    # function objects of our own: setting argtypes on ctypes.pythonapi's would change them for everyone
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", api))
    new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
        ("PyCapsule_New", api))
    umath, _ = _numpy_modules()
    table = ctypes.cast(get_pointer(umath._ARRAY_API, None), ctypes.POINTER(ctypes.c_void_p))
    set_handler = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(table[_SET_HANDLER_SLOT])
    # the handler and the capsule's name are statics of the library, which is never unloaded
    capsule = new_capsule(ctypes.addressof(ctypes.c_char.in_dll(lib, "tt_arena_handler")),
                          ctypes.addressof(ctypes.c_char.in_dll(lib, "tt_arena_capsule_name")), None)
    return lib, capsule, set_handler


_dec_ref = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("Py_DecRef", ctypes.pythonapi))


def _swap(set_handler, handler):
    """Make ``handler`` numpy's in this context; the one it replaces."""
    p = set_handler(handler)            # a new reference
    old = ctypes.cast(p, ctypes.py_object).value
    _dec_ref(p)
    return old


def _ready() -> Optional[tuple]:
    global _state, _failed
    if _state is not None or _failed is not None or DISABLED:
        return _state
    with _lock:
        if _state is None and _failed is None:
            try:
                state = _setup()
                _, multiarray = _numpy_modules()
                old = _swap(state[2], state[1])
                name = multiarray.get_handler_name()
                _swap(state[2], old)
                if name != NAME:
                    raise OSError(f"numpy reports the handler {name!r} after setting {NAME!r}")
                _state = state
            except (OSError, subprocess.SubprocessError, AttributeError, ValueError) as exc:
                _failed = f"{type(exc).__name__}: {exc}"
    return _state


def failure() -> Optional[str]:
    """Why the arena is not used (None: it is, or was never asked for)."""
    if DISABLED:
        return "TRITON_TRACE_NO_ARENA or TRITON_TRACE_NO_JIT is set"
    return _failed


def _keep_limit() -> int:
    try:
        return min(KEEP_MAX, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8)
    except (ValueError, OSError, AttributeError):
        return KEEP_MAX // 4


_pages_lock = threading.Lock()
_pages_users = 0
_pages_before: Optional[bool] = None


def _madvise_setter():
    _, multiarray = _numpy_modules()
    return getattr(multiarray, "_set_madvise_hugepage", None)


@contextmanager
def small_pages():
    """Inside, numpy gives new arrays no huge-page advice (see the module docstring); numpy's setting is back
    when the last thread inside leaves. The setting is numpy's, process-wide: other threads' arrays made
    meanwhile get small pages too (their values are the same)."""
    global _pages_users, _pages_before
    setter = None if HUGE_PAGES else _madvise_setter()
    if setter is None:
        yield
        return
    with _pages_lock:
        if _pages_users == 0:
            _pages_before = bool(setter(False))
        _pages_users += 1
    try:
        yield
    finally:
        with _pages_lock:
            _pages_users -= 1
            if _pages_users == 0:
                setter(_pages_before)


@contextmanager
def active():
    """numpy allocates from the arena inside, with small pages (``small_pages``); on leaving, numpy's
    previous handler is back and, unless another launch is inside, what the arena kept is unmapped (up to
    LINGER_MAX bytes of it LINGER_S seconds later, unless a launch comes first)."""
    with small_pages():
        with _arena():
            yield


@contextmanager
def _arena():
    state = _ready()
    if state is None:
        yield
        return
    lib, capsule, set_handler = state
    keep = _keep_limit()
    lib.tt_arena_enter(keep)
    try:
        old = _swap(set_handler, capsule)
    except BaseException:
        lib.tt_arena_exit(0)
        raise
    try:
        yield
    finally:
        _swap(set_handler, old)
        lib.tt_arena_exit(_linger_limit(keep))
        _trim_later(lib)


_trim_lock = threading.Condition()
_trim_at: Optional[float] = None      # when what the last launch left is unmapped (None: nothing to do)
_trimmer: Optional[threading.Thread] = None


def _trim_later(lib) -> None:
    """Launches in a row (a model's layers, a test's cases) reuse what the previous one kept; LINGER_S after
    the last one, a thread unmaps it (tt_arena_trim: unless a launch is in by then)."""
    global _trim_at, _trimmer
    with _trim_lock:
        _trim_at = time.monotonic() + LINGER_S
        if _trimmer is None or not _trimmer.is_alive():
            _trimmer = threading.Thread(target=_trim_when_idle, args=(lib,), name="triton_trace-arena-trim",
                                        daemon=True)
            _trimmer.start()
        _trim_lock.notify()


def _trim_when_idle(lib) -> None:
    global _trim_at
    with _trim_lock:
        while True:
            if _trim_at is None:
                _trim_lock.wait()
                continue
            wait = _trim_at - time.monotonic()
            if wait > 0:
                _trim_lock.wait(wait)
                continue
            _trim_at = None
            lib.tt_arena_trim()


def release() -> int:
    """Unmap now what the last launch left for the next one (nothing while a launch is in); the bytes."""
    state = _ready()
    return 0 if state is None else int(state[0].tt_arena_trim())


def _linger_limit(keep: Optional[int] = None) -> int:
    return min(LINGER_MAX, (_keep_limit() if keep is None else keep) // 8)


def stats() -> dict:
    """Large requests served from kept blocks (hits) or newly mapped (misses) since the process started, and
    what is kept now."""
    state = _ready()
    if state is None:
        return {}
    out = np.zeros(5, np.int64)
    state[0].tt_arena_stats(out.ctypes.data)
    return dict(zip(("hits", "misses", "kept_bytes", "kept_blocks", "launches"), (int(v) for v in out)))
