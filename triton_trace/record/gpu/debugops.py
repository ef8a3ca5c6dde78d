"""``tl.device_assert`` and prints inside a traced kernel.

Asserts: Triton's interpreter never checks ``tl.device_assert`` (its options keep ``debug`` off), while a
compiled kernel built with ``@triton.jit(debug=True)``, ``kernel[grid](..., debug=True)`` or
``TRITON_DEBUG=1`` traps on the first failing lane. A traced launch with debug on checks every lane: a
failure stops the launch with ``DeviceAssertionFailed`` naming the failing lanes and the values of the
names in the asserted expression; the session keeps what was recorded and stores the details in the
launch (``meta["assert_failed"]``), from which the report makes an ``assert_failed`` finding.

Prints: ``tl.device_print`` and Python's ``print`` in a kernel print once per program, in program order, as
the plain interpreter does. A batched chunk holds many programs in one value, so a print inside one
makes the chunk run again program by program.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import linecache
import os

import numpy as np
import triton
import triton.language as tl

from ...errors import BatchFallback
from .. import frames
from ..batch import running as batch

MAX_LANES = 8         # failing lanes (and their values) named in the message


class DeviceAssertionFailed(AssertionError):
    """A ``tl.device_assert`` whose condition is false on some lanes of a program."""

    def __init__(self, message: str, detail: dict):
        super().__init__(message)
        self.detail = detail


def debug_enabled(kernel_obj, kwargs: dict) -> bool:
    """Whether a compiled launch of this kernel would check device asserts (Triton's own rule:
    the launch's ``debug=`` argument, else the kernel's ``debug``, or TRITON_DEBUG)."""
    own = getattr(kernel_obj, "debug", None)
    if own is None:
        own = (getattr(kernel_obj, "kwargs", None) or {}).get("debug")
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    env = bool(getattr(runtime, "debug", False)) if runtime is not None else os.environ.get("TRITON_DEBUG") == "1"
    return bool(kwargs.get("debug", own)) or env


def install(scope, builder, debug: bool) -> None:
    if hasattr(builder, "options") and dataclasses.is_dataclass(builder.options):
        if debug:
            scope.set_attr(builder, "options", dataclasses.replace(builder.options, debug=True))
        elif getattr(builder.options, "sanitize_overflow", False):
            # Triton's semantic layer widens every int32 +, - and * to int64 and compares the result with
            # the int32 range (four more passes over the block) only to hand that condition to
            # device_assert, which drops it unless debug is on, as the compiler does. A quarter of a
            # vector add's run; wrapped values are still found (record/checks/overflow.py).
            scope.set_attr(builder, "options", dataclasses.replace(builder.options, sanitize_overflow=False))
    scope.set_attr(builder, "create_assert", lambda condition, message: _create_assert(builder, condition, message))
    original_print = builtins.print

    def kernel_print(*args, **kwargs):
        if batch.running(builder) is not None and frames.where()[0] is not None:
            raise BatchFallback("print in the kernel: prints run per program, in program order")
        return original_print(*args, **kwargs)
    scope.set_attr(builtins, "print", kernel_print)


def _create_assert(builder, condition, message):
    data = np.asarray(condition.data)
    chunk = batch.running(builder)
    if chunk is not None and chunk.active is not None and data.ndim and data.shape[0] == len(chunk.active):
        data = data | ~chunk.active.reshape((-1,) + (1,) * (data.ndim - 1))     # programs sitting out a trip
    if data.all():
        return None
    if batch.running(builder) is not None:
        # run the chunk again program by program: the first failing program stops the launch
        raise BatchFallback("a device_assert failed in the chunk")
    frame = frames.user_frame()
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, 0)
    bad = np.argwhere(~np.broadcast_to(data, data.shape or (1,)).astype(bool))
    expr = _asserted_expression(file, line)
    values = _values(frame, expr, data.shape, bad[:MAX_LANES])
    lanes = [tuple(int(v) for v in b) for b in bad[:MAX_LANES]]
    shown = "; ".join(f"{lane}: " + ", ".join(f"{k}={v[i]}" for k, v in values.items())
                      for i, lane in enumerate(lanes)) if values else ", ".join(map(str, lanes))
    text = (f"device_assert failed: {message!r}" + (f" ({expr})" if expr else "") +
            f" is false on {len(bad)} of {max(data.size, 1)} lane(s); first at block index {shown}")
    detail = {"message": str(message), "expression": expr, "file": file, "line": int(line or 0),
              "count": int(len(bad)), "lanes": [list(v) for v in lanes],
              "values": {k: [_plain(x) for x in v] for k, v in values.items()}}
    raise DeviceAssertionFailed(text, detail)


def _asserted_expression(file, line) -> str:
    """The source of the asserted condition, read from the kernel's file (empty when unavailable)."""
    if not file or not line:
        return ""
    text = linecache.getline(file, line).strip()
    try:
        call = ast.parse(text).body[0].value
    except (SyntaxError, IndexError, AttributeError):
        return ""
    if isinstance(call, ast.Call) and call.args:
        return ast.unparse(call.args[0])
    return ""


def _values(frame, expr: str, shape: tuple, lanes: np.ndarray) -> dict:
    """name -> its values at the failing lanes, for each block the asserted expression names."""
    if frame is None or not expr:
        return {}
    try:
        names = sorted({n.id for n in ast.walk(ast.parse(expr)) if isinstance(n, ast.Name)})
    except SyntaxError:
        return {}
    out = {}
    for name in names:
        v = frame.f_locals.get(name)
        if not isinstance(v, tl.tensor) or not hasattr(v.handle, "data"):
            continue
        d = np.asarray(v.handle.data)
        try:
            d = np.broadcast_to(d, shape) if shape else d.reshape(-1)[:1]
        except ValueError:
            continue
        out[name] = [d[tuple(lane)] if shape else d[0] for lane in lanes]
    return out


def _plain(x):
    x = np.asarray(x)
    return x.item() if x.size == 1 else x.tolist()
