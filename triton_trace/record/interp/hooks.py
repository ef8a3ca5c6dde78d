"""The only module that touches Triton's interpreter internals.

The seam is narrow: every load, store and atomic the interpreter executes (plain pointers, block
pointers, tensor descriptors, atomics) ends in one of four functions of the C++ interpreter module that
``triton.runtime.interpreter`` imports as ``_interpreter``. We swap that module attribute for a proxy for
the duration of one launch, plus builder methods for compute ops (dot, reductions, elementwise math:
compute.py) and the runtime checks' hooks (one row each in record/checks/table.py, installed in its order),
and restore everything in ``finally``. seams.py fails loudly at import when a Triton release moves any of
them.
"""
from __future__ import annotations

import builtins
import os
from contextlib import contextmanager
from typing import Callable, Optional

import numpy as np

import triton
import triton.language as tl
from triton.runtime import interpreter as _ti
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.jit import JITFunction

from .. import frames
from ..patching import Scope, Snapshot
from ..batch import tensor as batchtensor, pointers
from ..gpu import cudaextra, debugops
from ..checks import table
from ..memory import dataflow_ops, provenance
from . import binding, compute, rewrites, semantics
from .proxy import MemoryProxy, install_pointer_casts
# (callers use hooks.*)
from .kernels import (autotune_parts, innermost, is_kernel, pre_run_hooks, python_fn,  # noqa: F401
                      unspecialized)

_TRITON_DIR = rewrites.TRITON_DIR
rewritten = rewrites.rewritten      # (callers use hooks.rewritten)


_LANGUAGE_DIR = os.path.join(_TRITON_DIR, "language")


def raised_by_front_end(exc: BaseException) -> bool:
    """Whether Triton's language module (its front end: type checks, shapes, axes) raised ``exc``. A
    compiled launch reports those at compile time as a CompilationError."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename.startswith(_LANGUAGE_DIR)


def unsupported_op(exc: BaseException) -> Optional[str]:
    """The name of the Triton function a kernel called that the interpreter cannot run (it raised
    NotImplementedError from inside Triton: inline asm, extern elementwise, block pointers in 3.9), or None."""
    if not isinstance(exc, NotImplementedError):
        return None
    # an emulation of ours that stops short (inline asm outside the PTX subset) names the op itself
    return getattr(exc, "tt_op", None) or frames.raised_in_library(exc.__traceback__, _TRITON_DIR)


# --------------------------------------------------------------------------------------------------------
# running a launch
# --------------------------------------------------------------------------------------------------------
def _fix_index(scope: Scope) -> None:
    # numpy >= 2.4 refuses int() of a 1-element array, which Triton 3.6's tensor.__index__ patch relies on
    scope.set_attr(tl.tensor, "__index__", lambda t: int(np.asarray(t.handle.data).reshape(-1)[0]))


def _batch_tensor_patches(scope: Scope) -> None:
    # Python control flow on a tensor inside a batched chunk must see one value for all its programs
    t, b = tl.tensor, _ti.interpreter_builder
    scope.set_attr(t, "__bool__", batchtensor.tensor_bool(t.__dict__.get("__bool__", t.__bool__), b))
    scope.set_attr(t, "__index__", batchtensor.tensor_index(t.__dict__.get("__index__", t.__index__), b))
    if "T" in t.__dict__:
        scope.set_attr(t, "T", batchtensor.tensor_transpose(t.__dict__["T"], b))


class _LangPatches:
    """The language patches of one launch: one per set of globals a kernel or helper sees."""

    def __init__(self):
        self.swapped = {}             # tl.extra.cuda builtins -> the launch's versions (gpu/cudaextra.py)
        self.scopes = []
        self.seen = set()
        self.builtins = None          # id of each language builtin as found -> (module, name)

    def ensure(self, fn):
        key = id(fn.__globals__)
        if key not in self.seen:
            self.seen.add(key)
            if self.builtins is None:
                self.builtins = _language_builtins()
            # a helper whose module never imports triton.language (``return x + y * alpha``) compiles, but
            # Triton's interpreter asserts the module is visible: nothing of it to patch there
            if any(v is tl or v is tl.core for v in fn.__globals__.values()):
                self.scopes.append(_ti._patch_lang(fn))
            fix = Scope()
            _fix_index(fix)
            _batch_tensor_patches(fix)
            dataflow_ops.carry_transpose(fix)
            binding.map_elementwise(fix, _ti.interpreter_builder)
            _aliased_builtins(fn.__globals__, self.builtins, fix)
            self.scopes.append(fix)

    def restore(self):
        while self.scopes:
            self.scopes.pop().restore()


def _language_builtins() -> dict:
    """Every builtin of the language modules, by identity, before the launch patches them."""
    found = {}
    for mod in (tl.math, tl.core, tl):            # tl last: its name wins where a builtin is in several
        for name, value in vars(mod).items():
            if tl.core.is_builtin(value):
                found[id(value)] = (mod, name)
    return found


def _aliased_builtins(globals_: dict, builtins_: dict, scope: Scope) -> None:
    # A module-level alias of a builtin (``triton_cast = tl.cast``, ``from triton.language import where``)
    # compiles, since the code generator knows a builtin by identity, but the interpreter patches the
    # language modules only, so the alias would run the unpatched builtin ("Did you forget to add
    # @triton.jit?"): point it at the patched one for the launch
    for name, value in list(globals_.items()):
        place = builtins_.get(id(value)) if callable(value) else None
        if place is not None:
            patched = getattr(*place)
            if patched is not value:
                scope.set_item(globals_, name, patched)


_ACTIVE: list = []    # the _LangPatches of the launch being run (a stack, for re-entrant launches)


def constexpr_arg(value):
    """A constexpr argument as the launch passes it to the kernel: a ``tl.extra.cuda`` builtin (a function
    passed as a constexpr) becomes the launch's version."""
    return cudaextra.constexpr_arg(value, _ACTIVE[-1].swapped) if _ACTIVE else value


def _call_nested(self, *args, **kwargs):
    # A @triton.jit helper (the user's or Triton's standard library) called from inside the kernel: in
    # interpreter mode it is a plain call, once the language builtins its module sees are patched.
    if _ACTIVE:
        _ACTIVE[-1].ensure(self.fn)
    return rewritten(self.fn)(*args, **kwargs)


def _language_objects() -> list:
    """Everything Triton's language patch writes to. Its own restore puts back what getattr returned,
    which copies inherited members into classes; a snapshot of these puts them back exactly."""
    core = tl.core
    return [tl, core, tl.math, core.tensor, core.dtype, getattr(core, "condition", core.tensor),
            core.tensor_descriptor_base, type(_ti.interpreter_builder), _ti.interpreter_builder]


def _builtin_minmax(scope: Scope) -> None:
    # Compiled Triton turns Python's min/max on tensors into tl.minimum/tl.maximum; the interpreter runs
    # the Python builtins, which compare with __bool__ (a program-dependent branch in a batched chunk).
    for name, tl_fn in (("min", "minimum"), ("max", "maximum")):
        original = getattr(builtins, name)

        def minmax(*args, _orig=original, _tl=tl_fn, **kwargs):
            if kwargs or len(args) < 2 or not any(isinstance(a, tl.tensor) for a in args):
                return _orig(*args, **kwargs)
            out = args[0]
            for a in args[1:]:
                out = getattr(tl, _tl)(out, a)
            return out
        scope.set_attr(builtins, name, minmax)


def _set_interpret_knob(scope: Scope) -> None:
    # Triton's constexpr functions consult knobs.runtime.interpret while a kernel runs. Setting the knob
    # also writes TRITON_INTERPRET into os.environ, so both are put back.
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is None:
        return
    present, had = "interpret" in runtime.__dict__, runtime.__dict__.get("interpret")
    env = os.environ.get("TRITON_INTERPRET")

    def undo():
        if not present:
            runtime.__dict__.pop("interpret", None)
        else:
            runtime.__dict__["interpret"] = had
        if env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = env
    scope.on_restore(undo)
    runtime.interpret = True


def _cached_np_dtype(scope) -> None:
    """The interpreter's ``_get_np_dtype`` builds a 19-entry dict of Triton dtypes (hashed in Python) on
    every call, a few times per op: answered from a cache instead, per dtype."""
    original, cache = getattr(_ti, "_get_np_dtype", None), {}
    if original is None:
        return                          # (a release without it: nothing to speed up)

    def get_np_dtype(tt_dtype):
        try:
            return cache[tt_dtype]
        except KeyError:
            out = cache[tt_dtype] = original(tt_dtype)
            return out
        except TypeError:               # an unhashable type: as the interpreter answers it
            return original(tt_dtype)
    scope.set_attr(_ti, "_get_np_dtype", get_np_dtype)


@contextmanager
def interpreter_scope(fn, rec, debug: bool = False, numerics: str = "interpreter", num_warps: int = 4):
    """Install every hook for one launch of ``fn`` and restore Triton afterwards, whatever happens."""
    with _installed(fn, rec, debug, numerics, num_warps) as proxy:
        yield proxy


def _dtype_as_constexpr(scope) -> None:
    """A ``tl.dtype`` passed to a @triton.jit helper is a ``tl.constexpr`` in compiled code, so library
    helpers read ``dtype.value`` (FlagGems' ``get_dtype_max(dtype)``); the interpreter passes the bare dtype.
    During a traced launch a dtype's ``.value`` is the dtype itself, as the constexpr's would be."""
    if "value" not in vars(tl.dtype):
        scope.set_attr(tl.dtype, "value", property(lambda self: self))


@contextmanager
def _installed(fn, rec, debug: bool, numerics: str, num_warps: int = 4):
    snapshot = Snapshot(_language_objects())
    scope = Scope()
    lang_scope = _LangPatches()
    _ACTIVE.append(lang_scope)
    try:
        lang_scope.ensure(fn)
        proxy = MemoryProxy(_ti._interpreter, rec)
        scope.set_attr(_ti, "_interpreter", proxy)
        scope.set_attr(JITFunction, "__call__", _call_nested)
        scope.set_attr(_ti.InterpretedFunction, "__call__", _call_nested)
        binding.member_methods(scope)
        lang_scope.swapped = cudaextra.install(scope, num_warps)
        _set_interpret_knob(scope)
        _cached_np_dtype(scope)
        _builtin_minmax(scope)
        _dtype_as_constexpr(scope)
        compute.install(scope, rec)
        semantics.install(scope, _ti.interpreter_builder, numerics, rec, num_warps)
        for row in table.MONITORS:          # the runtime checks, before provenance: they read rec.origin
            for install in table.installers(row):
                install(scope, _ti.interpreter_builder, rec)
        install_pointer_casts(scope, _ti.interpreter_builder, rec.memory)
        provenance.install(scope, _ti.interpreter_builder, rec)
        pointers.install(scope, _ti.interpreter_builder, rec)
        debugops.install(scope, _ti.interpreter_builder, debug)
        yield proxy
    finally:
        _ACTIVE.pop()
        scope.restore()
        lang_scope.restore()
        snapshot.restore()


def debug_enabled(kernel_obj, kwargs: dict) -> bool:
    """Whether the launch checks ``tl.device_assert`` (debug on, as Triton decides it for a compiled launch)."""
    return debugops.debug_enabled(innermost(kernel_obj), kwargs)


def assert_detail(exc: BaseException):
    """The failing lanes and values of a ``tl.device_assert`` that stopped a launch, else None."""
    return exc.detail if isinstance(exc, debugops.DeviceAssertionFailed) else None


def builder():
    """The interpreter's builder instance (a batched chunk swaps its class for the chunk's duration)."""
    return _ti.interpreter_builder


def constexpr_names(fn, arg_names) -> set:
    """The kernel's constexpr parameters, as the compiler finds them ("constexpr" in the annotation's text).
    The interpreter's GridExecutor compares the normalised annotation with "constexpr" and so misses a
    quoted one under ``from __future__ import annotations`` (``BLOCK: "tl.constexpr"`` is then the text
    ``'tl.constexpr'``), which a GPU compile accepts."""
    found = set(_ti.GridExecutor(fn, arg_names, (1,)).constexprs)
    for name, note in getattr(fn, "__annotations__", {}).items():
        if name in arg_names and isinstance(note, str) and "constexpr" in note:
            found.add(name)
    return found


def unwrap_interpreter_error(e: BaseException) -> BaseException:
    """Triton wraps errors raised inside interpreted helpers; surface the original."""
    while isinstance(e, getattr(_ti, "InterpreterError", ())) and e.__cause__ is not None:
        e = e.__cause__
    return e


def _kernel_classes() -> list:
    """Triton's kernel classes, and every subclass that defines its own ``run`` (a library's autotuner, as
    FlagGems' LibTuner, benchmarks configs in its own ``run``, which would else bypass the route)."""
    found = [JITFunction, _ti.InterpretedFunction, Autotuner, Heuristics]
    seen, todo = set(found), list(found)
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
                if "run" in vars(sub):
                    found.append(sub)
    return found


@contextmanager
def kernel_runs_routed(handler: Callable):
    """Route every launch of every kernel class (``kernel[grid](...)`` ends in ``<class>.run``) through
    ``handler(kernel, original_run, *args, **kwargs)`` until the block exits. A kernel decorated with
    ``@trace`` keeps its own ``run``, which an instance attribute makes win over the class."""
    scope = Scope()

    def route(original):
        def run(self, *args, **kwargs):
            return handler(self, original, *args, **kwargs)
        return run
    try:
        for cls in _kernel_classes():
            scope.set_attr(cls, "run", route(cls.run))
        yield
    finally:
        scope.restore()
