"""Mapping a recorded op to the user's source line, cheaply.

The interpreter runs a rewritten copy of each kernel; its code objects are registered here, and an op is
attributed to the innermost frame running registered code. That is one walk up the frame chain per op
and no stack capture. Nothing here imports Triton.
"""
from __future__ import annotations

import inspect
import sys
from typing import Optional

_CODE_IDS: set = set()
_CODES: list = []      # keeps the registered code objects alive, so their ids stay unique


def register_codes(code) -> None:
    """Register ``code`` and the code objects nested in it (lambdas, inner functions) as user code."""
    if id(code) in _CODE_IDS:
        return
    _CODE_IDS.add(id(code))
    _CODES.append(code)
    for c in code.co_consts:
        if inspect.iscode(c):
            register_codes(c)


def where(depth: int = 2) -> tuple:
    """(file, line) of the innermost user-kernel frame above the caller, or (None, 0)."""
    f = sys._getframe(depth)
    ids = _CODE_IDS
    while f is not None:
        if id(f.f_code) in ids:
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return None, 0


def user_frame(depth: int = 2):
    """The innermost user-kernel frame above the caller (its locals hold the kernel's blocks), or None."""
    f = sys._getframe(depth)
    while f is not None:
        if id(f.f_code) in _CODE_IDS:
            return f
        f = f.f_back
    return None


def _tb_frames(tb) -> list:
    out = []
    while tb is not None:
        out.append((tb.tb_frame.f_code, tb.tb_lineno))
        tb = tb.tb_next
    return out


def where_in_traceback(tb) -> tuple:
    """(file, line) of the innermost user-kernel frame of a traceback, or (None, 0)."""
    found = (None, 0)
    for code, line in _tb_frames(tb):
        if id(code) in _CODE_IDS:
            found = (code.co_filename, line)
    return found


def raised_in_library(tb, library_dir: str) -> Optional[str]:
    """When an exception was raised inside ``library_dir`` below the user's kernel code, the name of the
    library function the kernel called (e.g. ``make_block_ptr``); else None."""
    frames = _tb_frames(tb)
    user = [i for i, (code, _) in enumerate(frames) if id(code) in _CODE_IDS]
    if not user or not frames[-1][0].co_filename.startswith(library_dir):
        return None
    for code, _ in frames[user[-1] + 1:]:
        # Triton wraps each builtin in a decorator and the interpreter in a lambda; skip those.
        if code.co_filename.startswith(library_dir) and code.co_name not in ("wrapper", "<lambda>"):
            return code.co_name
    return None


_SOURCES: dict = {}


def code_key(fn):
    """A dict key for ``fn``'s code. Code objects compare equal when their bodies do, whatever their file:
    Inductor writes one kernel body into several generated files, so the file is part of the key."""
    code = getattr(fn, "__code__", fn)
    return code, getattr(code, "co_filename", None)


def kernel_source(fn) -> tuple:
    """(source, file, line of the ``def``) of a Python function, or ("", "", 0) when unavailable.
    Cached per code object: reading and tokenising the file cost more than a small launch."""
    key = code_key(fn)
    found = _SOURCES.get(key)
    if found is None:
        found = _SOURCES[key] = _read_source(fn)
    return found


def remember_source(fn, source: str, file: str, def_line: int) -> None:
    """What Triton's rewriter already read of a kernel, so ``kernel_source`` need not read it again."""
    _SOURCES.setdefault(code_key(fn), (source, file, def_line))


def _read_source(fn) -> tuple:
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return "", "", 0
    file = fn.__code__.co_filename     # the name the rewritten kernel's frames carry
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return "".join(lines), file, start + i
    return "".join(lines), file, start
