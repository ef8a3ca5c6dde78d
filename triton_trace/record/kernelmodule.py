"""What a kernel needs besides its own source, read at trace time: the @triton.jit helpers it calls (their
sources, recursively), the modules and objects it names, its global constants, and each argument as a
Python expression. The launch keeps it as ``Launch.module`` (model/kernelmodule.py), so a reproducer script
or a compile for another target can rebuild the kernel's module later, in another process, without the
user's code.

Nothing here runs the kernel; names the kernel does not use are not looked at. What is carried over stays
within the bounds a trace file is read back with (model.kernelmodule's MAX_*): a longer text is named as
not carried over instead.
"""
from __future__ import annotations

import ast
import builtins
import enum
import importlib
import math

import triton

from ..model.kernelmodule import (MAX_HELPERS, MAX_ITEMS, MAX_NAME, MAX_SOURCE, MAX_TEXT, Helper, KernelModule, Param,
                                  Unresolved, source_from_def)
from . import frames
from .interp import kernels as hooks


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


def json_arg(v):
    """An argument as ``Launch.args`` and ``Launch.config`` keep it: JSON-ready, tensors as None (they are in
    the tensor table), anything else as its repr, clipped."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "value") and v.value is not v:      # tl.constexpr (a dtype's .value is itself in a launch)
        return json_arg(v.value)
    if hasattr(v, "data_ptr"):
        return None
    if hasattr(v, "block_shape") and hasattr(getattr(v, "base", None), "data_ptr"):   # a TensorDescriptor
        # the tensor itself is in the tensor table; its repr would print every element
        return {"shape": [int(s) for s in v.shape], "strides": [int(s) for s in v.strides],
                "block_shape": [int(s) for s in v.block_shape]}
    if isinstance(v, (tuple, list)):
        return [json_arg(x) for x in v]
    text = repr(v)
    return text if len(text) <= 200 else text[:197] + "..."


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

    def miss(self, name: str, why: str) -> None:
        if len(self.missing) < MAX_ITEMS:
            self.missing.append(Unresolved(name[:MAX_NAME], why[:MAX_TEXT]))

    def add(self, lines: list, name: str, line: str, what: str) -> None:
        if len(line) > MAX_TEXT or len(lines) >= MAX_ITEMS:
            self.miss(name, f"its {what} is longer than the {MAX_TEXT} characters a trace carries"
                      if len(line) > MAX_TEXT else f"more than {MAX_ITEMS} {what}s")
        else:
            lines.append(line)

    def bind(self, name: str, what: str, owner: str) -> bool:
        if name in self._bound:
            if self._bound[name] != what:
                self.miss(name, f"'{owner}' and another function mean different things by '{name}'")
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
                    self.miss(name, f"'{owner}' names it, but it is not defined")
                continue
            self.name(name, scope[name], owner)

    def name(self, name: str, obj, owner: str) -> None:
        if hooks.is_kernel(obj):
            fn = hooks.python_fn(obj)
            if not self.bind(name, f"jit:{id(fn)}", owner):
                return
            if len(self.helpers) >= MAX_HELPERS:
                self.miss(name, f"more than {MAX_HELPERS} helpers")
                return
            source, file, def_line = frames.kernel_source(fn)
            if not source:
                self.miss(name, "its source could not be read")
                return
            body, _ = source_from_def(source)
            if len(body) > MAX_SOURCE or len(file) > MAX_NAME:
                self.miss(name, f"its source or file name is longer than a trace carries ({MAX_SOURCE} and "
                                f"{MAX_NAME} characters)")
                return
            self.helpers.append(Helper(name, fn.__name__, body, file, def_line))
            self.function(fn, fn.__name__)
        elif type(obj).__name__ == "module":
            line = f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
            if self.bind(name, line, owner):
                self.add(self.imports, name, line, "import")
        elif literal(obj) is not None:
            line = f"{name} = {literal(obj)}"
            if self.bind(name, line, owner):
                self.add(self.constants, name, line, "constant")
        elif _importable(obj) is not None:
            mod, qual = _importable(obj)
            line = f"from {mod} import {qual}" + ("" if qual == name else f" as {name}")
            if self.bind(name, line, owner):
                self.add(self.imports, name, line, "import")
        else:
            self.miss(name, f"'{owner}' uses a {type(obj).__name__} that is not a module, constant, importable "
                            f"object or jit function")


_CAPTURED: dict = {}     # code object -> capture; a kernel's helpers and globals are read once per process


def capture(fn) -> KernelModule:
    """The kernel module of the kernel whose Python function is ``fn``: helpers, imports, constants, and the
    names that could not be reproduced with why; its launches add their parameters and options to it."""
    found = _CAPTURED.get(frames.code_key(fn))
    if found is None:
        cap = _Capture()
        cap.function(fn, fn.__name__)
        found = _CAPTURED[frames.code_key(fn)] = KernelModule(
            helpers=tuple(cap.helpers), imports=tuple(cap.imports), constants=tuple(cap.constants),
            missing=tuple(cap.missing), triton=triton.__version__)
    return found


def argument_expressions(bound: dict, tensor_names: set) -> dict:
    """Per kernel parameter, how to rebuild it (model.kernelmodule.Param): a tensor from the launch's tensor
    table, a descriptor over it, a value from a Python expression, or "other" (not rebuilt)."""
    out = {}
    for name, v in bound.items():
        if name in tensor_names and hasattr(v, "data_ptr"):
            out[name] = Param("tensor")
        elif hasattr(v, "block_shape") and hasattr(getattr(v, "base", None), "data_ptr"):
            out[name] = Param("descriptor", shape=tuple(int(s) for s in v.shape),
                              strides=tuple(int(s) for s in v.strides),
                              block_shape=tuple(int(s) for s in v.block_shape))
        elif (expr := literal(v)) is not None and len(expr) <= MAX_TEXT:
            out[name] = Param("value", expr=expr)
        else:
            out[name] = Param("other", type=type(v).__name__[:MAX_TEXT])
    return out
