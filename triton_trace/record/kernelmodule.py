"""What a kernel needs besides its own source, read at trace time: the @triton.jit helpers it calls (their
sources, recursively), the modules and objects it names, its global constants, and each argument as a
Python expression. Launch.meta["module"] keeps it, so a reproducer script or a compile for another target
can rebuild the kernel's module later, in another process, without the user's code.

Nothing here runs the kernel; names the kernel does not use are not looked at.
"""
from __future__ import annotations

import ast
import builtins
import enum
import importlib
import math
import textwrap

import triton

from . import frames
from .interp import kernels as hooks

MAX_HELPERS = 64


def source_from_def(source: str) -> tuple:
    """(source from the ``def`` line on, dedented; how many lines came before it): decorators dropped."""
    lines = source.splitlines()
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return textwrap.dedent("\n".join(lines[i:])) + "\n", i
    return textwrap.dedent(source), 0


def _names_used(fn, body: str) -> list:
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return []
    local = set(fn.__code__.co_varnames)     # parameters and every name the function assigns
    seen = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local \
                and node.id not in seen:
            seen.append(node.id)
    return seen


def _scope(fn) -> dict:
    scope = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                scope[name] = cell.cell_contents
            except ValueError:       # an empty cell: the name is assigned after the kernel was made
                continue
    return scope


def literal(v):
    """A Python expression that evaluates to ``v``, or None when there is none we trust."""
    if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        v = v.item()                  # np.float64(1.5) -> 1.5: its repr is not a plain literal
    elif isinstance(v, enum.Enum):
        v = v.value if isinstance(v, (int, str)) else None
        if v is None:
            return None
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else f"float({str(v)!r})"
    if hasattr(v, "value") and type(v).__name__ == "constexpr":
        inner = literal(v.value)
        return None if inner is None else f"tl.constexpr({inner})"
    if type(v).__name__ == "dtype" and type(v).__module__.startswith("triton"):
        return f"tl.dtype({v.name!r})"
    if isinstance(v, (tuple, list)):
        parts = [literal(x) for x in v]
        if any(p is None for p in parts):
            return None
        inner = ", ".join(parts) + ("," if isinstance(v, tuple) and len(v) == 1 else "")
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    return None


def _importable(obj):
    """``from module import name`` that gives back ``obj``, or None."""
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not mod or not qual or "<" in qual or "." in qual or mod == "__main__":
        return None
    try:
        if getattr(importlib.import_module(mod), qual) is obj:
            return mod, qual
    except (ImportError, AttributeError):
        return None
    return None


class _Capture:
    def __init__(self):
        self.helpers, self.imports, self.constants, self.missing = [], [], [], []
        self._bound: dict = {}      # name -> what it was bound to (a conflict between two scopes is reported)

    def bind(self, name: str, what: str, owner: str) -> bool:
        if name in self._bound:
            if self._bound[name] != what:
                self.missing.append({"name": name, "why": f"'{owner}' and another function mean different "
                                                          f"things by '{name}'"})
            return False
        self._bound[name] = what
        return True

    def function(self, fn, owner: str) -> None:
        source, file, def_line = frames.kernel_source(fn)
        body, _ = source_from_def(source)
        scope = _scope(fn)
        for name in _names_used(fn, body):
            if name not in scope:
                if not hasattr(builtins, name):
                    self.missing.append({"name": name, "why": f"'{owner}' names it, but it is not defined"})
                continue
            self.name(name, scope[name], owner)

    def name(self, name: str, obj, owner: str) -> None:
        if hooks.is_kernel(obj):
            fn = hooks.python_fn(obj)
            if not self.bind(name, f"jit:{id(fn)}", owner):
                return
            if len(self.helpers) >= MAX_HELPERS:
                self.missing.append({"name": name, "why": f"more than {MAX_HELPERS} helpers"})
                return
            source, file, def_line = frames.kernel_source(fn)
            if not source:
                self.missing.append({"name": name, "why": "its source could not be read"})
                return
            body, _ = source_from_def(source)
            self.helpers.append({"name": name, "def_name": fn.__name__, "source": body, "file": file,
                                 "line": def_line})
            self.function(fn, fn.__name__)
        elif type(obj).__name__ == "module":
            line = f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
            if self.bind(name, line, owner):
                self.imports.append(line)
        elif literal(obj) is not None:
            line = f"{name} = {literal(obj)}"
            if self.bind(name, line, owner):
                self.constants.append(line)
        elif _importable(obj) is not None:
            mod, qual = _importable(obj)
            line = f"from {mod} import {qual}" + ("" if qual == name else f" as {name}")
            if self.bind(name, line, owner):
                self.imports.append(line)
        else:
            self.missing.append({"name": name, "why": f"'{owner}' uses a {type(obj).__name__} that is not a "
                                                      f"module, constant, importable object or jit function"})


_CAPTURED: dict = {}     # code object -> capture; a kernel's helpers and globals are read once per process


def capture(fn) -> dict:
    """meta["module"] for the kernel whose Python function is ``fn`` (helpers, imports, constants, and
    the names that could not be reproduced with why)."""
    found = _CAPTURED.get(frames.code_key(fn))
    if found is None:
        cap = _Capture()
        cap.function(fn, fn.__name__)
        found = _CAPTURED[frames.code_key(fn)] = {"helpers": cap.helpers, "imports": cap.imports,
                                          "constants": cap.constants, "missing": cap.missing,
                                          "triton": triton.__version__}
    return found


def argument_expressions(bound: dict, tensor_names: set) -> dict:
    """Per kernel parameter, how to rebuild it: {"kind": "tensor" | "value" | "descriptor" | "other",
    "expr": a Python expression for values}. Tensors are rebuilt from the launch's tensor table."""
    out = {}
    for name, v in bound.items():
        if name in tensor_names and hasattr(v, "data_ptr"):
            out[name] = {"kind": "tensor"}
        elif hasattr(v, "block_shape") and hasattr(getattr(v, "base", None), "data_ptr"):
            out[name] = {"kind": "descriptor", "shape": [int(s) for s in v.shape],
                         "strides": [int(s) for s in v.strides], "block_shape": [int(s) for s in v.block_shape]}
        elif literal(v) is not None:
            out[name] = {"kind": "value", "expr": literal(v)}
        else:
            out[name] = {"kind": "other", "type": type(v).__name__}
    return out
