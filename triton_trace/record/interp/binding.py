"""How the names of a kernel's source bind in a traced launch, where the compiler binds them otherwise.

- **Closures.** A kernel or helper defined inside a function (a test's local ``@triton.jit def compare``
  used by its kernel) reads the enclosing function's variables. Triton's interpreter runs a rewritten copy of
  the source executed in the module's globals, where those names are missing or mean something else (a local
  ``divmod`` helper became Python's builtin). The copy here is compiled inside a function whose parameters
  are the free variables, then given the original's own cells, so it sees them as they are at each call.
- **Tensor methods** (``x.sum()``, ``x.max()``): Triton's standard library registers its @jit functions on the
  tensor class; the code generator binds them, nothing does in Python when Triton was imported without
  TRITON_INTERPRET (the suite mode, ``trace_all``), so ``x.sum()`` lost its tensor.
- **``tl.map_elementwise``**: the compiler builds a region; here the function runs element by element
  (gpu/mapelementwise.py).
"""
from __future__ import annotations

import ast
import functools
import types

import triton.language as tl
from triton.runtime.jit import JITFunction

from ..gpu import mapelementwise

_OUTER = "_triton_trace_closure"


def with_closure(fn, transformed: ast.Module, filename: str, interpreter_globals: dict):
    """The rewritten ``fn`` (``transformed``: a module holding its ``def``) closing over ``fn``'s own cells."""
    free = fn.__code__.co_freevars
    outer = ast.FunctionDef(
        name=_OUTER, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free], kwonlyargs=[],
                                        kw_defaults=[], defaults=[]),
        body=[*transformed.body, ast.Return(value=ast.Name(id=fn.__name__, ctx=ast.Load()))], decorator_list=[],
        returns=None)
    if "type_params" in ast.FunctionDef._fields:       # Python >= 3.12
        outer.type_params = []
    module = ast.fix_missing_locations(ast.Module(body=[outer], type_ignores=[]))
    fn_globals = fn.__globals__
    for key, value in interpreter_globals.items():      # as the interpreter's own exec provides them
        fn_globals.setdefault(key, value)
    namespace: dict = {}
    exec(compile(module, filename=filename, mode="exec"), fn_globals, namespace)
    cells = dict(zip(free, fn.__closure__))
    made = namespace[_OUTER](*(cells[n].cell_contents if _filled(cells[n]) else None for n in free))
    out = types.FunctionType(made.__code__, fn_globals, made.__name__, made.__defaults__,
                             tuple(cells[n] for n in made.__code__.co_freevars))
    out.__kwdefaults__ = made.__kwdefaults__
    return out


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:          # a name the enclosing function binds later (a recursive helper)
        return False
    return True


def member_methods(scope) -> None:
    if hasattr(JITFunction, "__get__"):
        return

    def bind(self, obj, objtype=None):
        return self if not isinstance(obj, tl.tensor) else functools.partial(self, obj)
    scope.set_attr(JITFunction, "__get__", bind)


def map_elementwise(scope, builder) -> None:
    # set after the interpreter's language patch, which wraps the compiler's version (it builds an IR region)
    if hasattr(tl, "map_elementwise"):
        fn = mapelementwise.make(builder)
        for module in (tl, tl.core):
            scope.set_attr(module, "map_elementwise", fn)
