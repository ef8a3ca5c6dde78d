"""The kernels the interpreter runs: a source-rewritten copy of each, ours, cached here rather than in Triton's
class-level cache, so tracing leaves ``InterpretedFunction.rewritten_fn`` as it was.

The rewrite is Triton's (``FunctionRewriter``) plus the compiler's meaning of ``and`` / ``or`` / ``not``
(gpu/pylogic.py) and, for the launched function, its early exits and divergent loops (divergence/rewrite.py).
It reads nothing of a function but its code (source, file, lines), its globals and its defaults, so a kernel
made anew with the code of one rewritten before (a kernel defined inside a test function, one per test case)
runs that rewrite instead of parsing and transforming its source again.
"""
from __future__ import annotations

import triton
from triton.runtime import interpreter as _ti

from .. import frames
from ..gpu import pylogic
from ..divergence import rewrite as looprewrite
from . import binding

TRITON_DIR = triton.__path__[0]
_REWRITTEN: dict = {}        # (function, kernel) -> its rewrite
_BY_CODE: dict = {}          # (code key, kernel) -> (globals, defaults, rewrite) of a function without a closure
_REWRITER: list = []


def _rewriter_class():
    """Triton's source rewrite of a kernel, plus the compiler's meaning of ``and`` / ``or`` / ``not``.
    Made on first use, so a Triton without FunctionRewriter fails in ``require_seams`` with its message."""
    if not _REWRITER:
        class Rewriter(_ti.FunctionRewriter):
            kernel = False      # the launched function (its early exits rewritten), not a helper

            def _transform_ast(self, src):
                return looprewrite.transform(pylogic.transform(super()._transform_ast(src)), self.kernel)

            def _prepare_source(self, lines):
                frames.remember_source(self.fn, "".join(lines), self.filename, self.def_file_lineno)
                return super()._prepare_source(lines)

            def _compile_and_exec(self, transformed_ast):
                pylogic.provide(self.fn.__globals__)
                looprewrite.provide(self.fn.__globals__)
                if self.fn.__code__.co_freevars:
                    return binding.with_closure(self.fn, transformed_ast, self.filename, vars(_ti))
                return super()._compile_and_exec(transformed_ast)
        _REWRITER.append(Rewriter)
    return _REWRITER[0]


def rewritten(fn, kernel: bool = False):
    """``fn`` as the interpreter runs it, rewritten; a ``kernel`` (the launched function) with its early
    exits rewritten too (a helper's ``return`` leaves only the helper)."""
    out = _REWRITTEN.get((fn, kernel))
    if out is None:
        out = _same_code(fn, kernel)
        if out is None:
            rewriter = _rewriter_class()(fn)
            rewriter.kernel = kernel
            out = rewriter.rewrite_ast()
            # Triton's own library functions (tl.sum, tl.softmax, ...) are not "user lines": an op inside
            # them is reported at the user's line that called them.
            if not (out.__code__.co_filename or "").startswith(TRITON_DIR):
                frames.register_codes(out.__code__)
            if not fn.__code__.co_freevars:      # a closure's rewrite binds its own cells (binding.with_closure)
                _BY_CODE[(frames.code_key(fn), kernel)] = (fn.__globals__, _defaults(fn), out)
        _REWRITTEN[(fn, kernel)] = out
    return out


def _defaults(fn):
    kw = fn.__kwdefaults__
    return fn.__defaults__, tuple(sorted(kw.items())) if kw else None


def _same_code(fn, kernel: bool):
    """The rewrite of an earlier function with ``fn``'s code, globals (the same dict) and defaults, or None."""
    found = _BY_CODE.get((frames.code_key(fn), kernel))
    if found is None or found[0] is not fn.__globals__ or fn.__code__.co_freevars:
        return None
    try:
        same = found[1] == _defaults(fn)
    except Exception:       # a default whose == raises or answers an array: taken as different, to be safe
        return None
    return found[2] if same is True else None
