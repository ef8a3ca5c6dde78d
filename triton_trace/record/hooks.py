"""The only module that touches Triton's interpreter internals.

The seam is narrow: every load, store and atomic the interpreter executes (plain pointers, block
pointers, tensor descriptors, atomics) ends in one of four functions of the C++ interpreter module that
``triton.runtime.interpreter`` imports as ``_interpreter``. We swap that module attribute for a proxy for
the duration of one launch, plus a few builder methods for compute ops (dot, reductions, elementwise
math), and restore everything in ``finally``. ``check_seams`` fails loudly when a Triton release moves any
of them; the version range below is what the test suite runs against.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
from contextlib import contextmanager
from typing import Callable, Optional

import numpy as np

import triton
import triton.language as tl
from triton.runtime import interpreter as _ti
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.jit import JITFunction

from ..errors import UnsupportedTritonVersion

SUPPORTED = ((3, 5), (3, 9))     # inclusive major.minor range


def _version() -> tuple:
    parts = triton.__version__.split("+")[0].split(".")
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts[:2])


def check_version() -> None:
    v = _version()
    if not SUPPORTED[0] <= v <= SUPPORTED[1]:
        lo, hi = (".".join(map(str, s)) for s in SUPPORTED)
        raise UnsupportedTritonVersion(
            f"triton_trace supports Triton {lo}.x to {hi}.x; this environment has Triton {triton.__version__}. "
            f"Install a supported release, e.g. pip install 'triton>={lo},<{SUPPORTED[1][0]}.{SUPPORTED[1][1] + 1}'")


SEAMS = (
    (_ti, "_interpreter"), (_ti, "interpreter_builder"), (_ti, "_patch_lang"), (_ti, "_implicit_cvt"),
    (_ti, "GridExecutor"), (_ti, "InterpretedFunction"), (_ti, "ReduceOps"), (_ti, "ScanOps"),
    (_ti, "InterpreterBuilder"),
)


def check_seams() -> list:
    """Names of hooked interpreter attributes that are missing in the installed Triton (empty when fine)."""
    missing = [f"triton.runtime.interpreter.{name}" for mod, name in SEAMS if not hasattr(mod, name)]
    if hasattr(_ti, "_interpreter"):
        missing += [f"_interpreter.{n}" for n in ("load", "store", "atomic_rmw", "atomic_cas")
                    if not hasattr(_ti._interpreter, n)]
    b = getattr(_ti, "InterpreterBuilder", None)
    if b is not None:
        missing += [f"InterpreterBuilder.{n}" for n in ("create_dot", "binary_op", "unary_op", "ternary_op",
                                                        "set_grid_idx", "set_grid_dim") if not hasattr(b, n)]
    for cls in ("ReduceOps", "ScanOps"):
        if hasattr(_ti, cls) and not hasattr(getattr(_ti, cls), "apply"):
            missing.append(f"{cls}.apply")
    return missing


def require_seams() -> None:
    missing = check_seams()
    if missing:
        raise UnsupportedTritonVersion(
            f"Triton {triton.__version__} moved interpreter internals that triton_trace hooks: {', '.join(missing)}. "
            f"Use a Triton release in the supported range {SUPPORTED[0]} to {SUPPORTED[1]}.")


# --------------------------------------------------------------------------------------------------------
# kernels: unwrapping autotune / heuristics chains down to the Python function
# --------------------------------------------------------------------------------------------------------
def is_kernel(obj) -> bool:
    return isinstance(obj, (JITFunction, _ti.InterpretedFunction, Autotuner, Heuristics))


def innermost(obj):
    """The JITFunction / InterpretedFunction at the bottom of an autotune/heuristics chain."""
    while isinstance(obj, (Autotuner, Heuristics)):
        obj = obj.fn
    if not isinstance(obj, (JITFunction, _ti.InterpretedFunction)):
        raise TypeError(f"{obj!r} is not a @triton.jit kernel")
    return obj


def python_fn(obj) -> Callable:
    return innermost(obj).fn


def kernel_source(fn) -> tuple:
    try:
        lines, start = inspect.getsourcelines(fn)
        src = "".join(lines)
    except (OSError, TypeError):
        return "", "", 0
    file = inspect.getsourcefile(fn) or ""
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return src, file, start + i
    return src, file, start


# --------------------------------------------------------------------------------------------------------
# source lines: map an op to the user's (file, line) through the rewritten kernels' code objects
# --------------------------------------------------------------------------------------------------------
_CODE_IDS: set = set()
_CODES: list = []      # keeps the registered code objects alive, so their ids stay unique


def _register_codes(code) -> None:
    if id(code) in _CODE_IDS:
        return
    _CODE_IDS.add(id(code))
    _CODES.append(code)
    for c in code.co_consts:
        if inspect.iscode(c):
            _register_codes(c)


_TRITON_DIR = triton.__path__[0]


def _rewritten(fn):
    rewritten = _ti.InterpretedFunction(fn).rewrite()
    # Triton's own library functions (tl.sum, tl.softmax, ...) are not "user lines": an op inside them
    # is reported at the user's line that called them.
    if not (rewritten.__code__.co_filename or "").startswith(_TRITON_DIR):
        _register_codes(rewritten.__code__)
    return rewritten


def where(depth: int = 2) -> tuple:
    f = sys._getframe(depth)
    ids = _CODE_IDS
    while f is not None:
        if id(f.f_code) in ids:
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return None, 0


def where_in_traceback(tb) -> tuple:
    found = (None, 0)
    while tb is not None:
        if id(tb.tb_frame.f_code) in _CODE_IDS:
            found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


# --------------------------------------------------------------------------------------------------------
# the memory seam
# --------------------------------------------------------------------------------------------------------
_RMW_KIND = {"ADD": "atomic_add", "FADD": "atomic_add", "MIN": "atomic_min", "UMIN": "atomic_min",
             "MAX": "atomic_max", "UMAX": "atomic_max", "AND": "atomic_and", "OR": "atomic_or",
             "XOR": "atomic_xor", "XCHG": "atomic_xchg"}


class _MemoryProxy:
    """Stands in for the C++ interpreter module: checks and records each access, then forwards the
    safe lanes to the real implementation."""

    def __init__(self, real, rec):
        self._real = real
        self._rec = rec

    def __getattr__(self, name):
        return getattr(self._real, name)

    def load(self, ptrs, mask, other, dtype):
        file, line = where()
        safe, row = self._rec.memory_op("load", file, line, ptrs, mask, np.dtype(dtype).itemsize)
        out = self._real.load(ptrs, safe, other, dtype)
        self._rec.record_values(row, out)
        return out

    def store(self, ptrs, value, mask):
        file, line = where()
        safe, row = self._rec.memory_op("store", file, line, ptrs, mask, value.dtype.itemsize)
        self._rec.record_values(row, value)
        return self._real.store(ptrs, value, safe)

    def atomic_rmw(self, op, ptrs, val, mask, sem):
        file, line = where()
        kind = _RMW_KIND.get(getattr(op, "name", str(op)).split(".")[-1], "atomic_add")
        safe, row = self._rec.memory_op(kind, file, line, ptrs, mask, val.dtype.itemsize)
        self._rec.record_values(row, val)
        return self._real.atomic_rmw(op, ptrs, val, safe, sem)

    def atomic_cas(self, ptrs, cmp, val, sem):
        file, line = where()
        ones = np.ones(ptrs.shape, dtype=bool)
        safe, row = self._rec.memory_op("atomic_cas", file, line, ptrs, ones, val.dtype.itemsize)
        self._rec.record_values(row, val)
        if safe.all():
            return self._real.atomic_cas(ptrs, cmp, val, sem)
        # CAS has no mask: run it on the safe lanes only; skipped lanes read back the compare value.
        out = np.array(np.broadcast_to(cmp, ptrs.shape), copy=True)
        if safe.any():
            out[safe] = self._real.atomic_cas(np.ascontiguousarray(ptrs[safe]),
                                              np.ascontiguousarray(np.broadcast_to(cmp, ptrs.shape)[safe]),
                                              np.ascontiguousarray(np.broadcast_to(val, ptrs.shape)[safe]), sem)
        return out


# --------------------------------------------------------------------------------------------------------
# compute ops: dot, reductions and scans, elementwise math
# --------------------------------------------------------------------------------------------------------
def _is_float(handle) -> bool:
    try:
        return handle.dtype.scalar.is_floating()
    except AttributeError:
        return False


def _install_compute_hooks(scope, rec) -> None:
    b = _ti.interpreter_builder
    cls = type(b)

    def dot(self, a, bb, *args, **kwargs):
        out = cls.create_dot(self, a, bb, *args, **kwargs)
        sa, sb = a.data.shape, bb.data.shape
        batch = int(np.prod(sa[:-2])) if len(sa) > 2 else 1
        m, k, n = sa[-2] * batch, sa[-1], sb[-1]
        file, line = where()
        rec.compute_op("dot", file, line, tuple(out.data.shape), (m, n, k))
        return out

    def counted(method, flops_per_elem):
        orig = getattr(cls, method)

        def run(self, *args, **kwargs):
            out = orig(self, *args, **kwargs)
            if _is_float(out) and rec.recording:
                file, line = where()
                rec.add_flops(file, line, flops_per_elem * int(np.size(out.data)))
            return out
        return run

    scope.set_attr(b, "create_dot", dot.__get__(b))
    for name, per in (("binary_op", 1), ("unary_op", 1), ("ternary_op", 1), ("create_fma", 2)):
        if hasattr(cls, name):
            scope.set_attr(b, name, counted(name, per).__get__(b))

    for cls_name, kind in (("ReduceOps", "reduce"), ("ScanOps", "scan")):
        ops_cls = getattr(_ti, cls_name)
        orig_apply = ops_cls.apply

        def apply(self, input, _orig=orig_apply, _kind=kind):
            ret = _orig(self, input)
            if not isinstance(input, tuple):    # apply() re-enters itself with a 1-tuple
                return ret
            first = input[0] if isinstance(input, tuple) else input
            res = ret[0] if isinstance(ret, tuple) else ret
            if rec.recording and hasattr(first, "handle"):
                file, line = where()
                rec.compute_op(_kind, file, line, tuple(np.shape(first.handle.data)),
                               (int(np.size(first.handle.data)), int(np.size(res.handle.data)), 0))
            return ret
        scope.set_attr(ops_cls, "apply", apply)


# --------------------------------------------------------------------------------------------------------
# running a launch
# --------------------------------------------------------------------------------------------------------
class _Scope:
    """Records attribute changes and undoes them in reverse order."""

    def __init__(self):
        self._changes = []

    def set_attr(self, obj, name, value):
        self._changes.append((obj, name, obj.__dict__.get(name, _MISSING) if hasattr(obj, "__dict__") else
                              getattr(obj, name, _MISSING)))
        setattr(obj, name, value)

    def restore(self):
        while self._changes:
            obj, name, old = self._changes.pop()
            if old is _MISSING:
                try:
                    delattr(obj, name)
                except AttributeError:
                    pass
            else:
                setattr(obj, name, old)


_MISSING = object()


class _LangPatches:
    """The language patches of one launch: one per set of globals a kernel or helper sees."""

    def __init__(self):
        self.scopes = []
        self.seen = set()

    def ensure(self, fn):
        key = id(fn.__globals__)
        if key not in self.seen:
            self.seen.add(key)
            self.scopes.append(_ti._patch_lang(fn))
            # numpy >= 2.4 refuses int() of a 1-element array, which Triton 3.6's patch relies on
            fix = _Scope()
            fix.set_attr(tl.tensor, "__index__", lambda t: int(np.asarray(t.handle.data).reshape(-1)[0]))
            self.scopes.append(fix)

    def restore(self):
        while self.scopes:
            self.scopes.pop().restore()


_ACTIVE: list = []    # the _LangPatches of the launch being run (a stack, for re-entrant launches)


def _call_nested(self, *args, **kwargs):
    # A @triton.jit helper (the user's or Triton's standard library) called from inside the kernel: in
    # interpreter mode it is a plain call, once the language builtins its module sees are patched.
    if _ACTIVE:
        _ACTIVE[-1].ensure(self.fn)
    return _rewritten(self.fn)(*args, **kwargs)


@contextmanager
def interpreter_scope(fn, rec):
    """Install every hook for one launch of ``fn`` and restore Triton afterwards, whatever happens."""
    scope = _Scope()
    lang_scope = _LangPatches()
    knobs = getattr(triton, "knobs", None)
    _ACTIVE.append(lang_scope)
    try:
        lang_scope.ensure(fn)
        scope.set_attr(_ti, "_interpreter", _MemoryProxy(_ti._interpreter, rec))
        scope.set_attr(JITFunction, "__call__", _call_nested)
        scope.set_attr(_ti.InterpretedFunction, "__call__", _call_nested)
        if knobs is not None and hasattr(knobs, "runtime"):
            scope.set_attr(knobs.runtime, "interpret", True)
        _install_compute_hooks(scope, rec)
        yield
    finally:
        _ACTIVE.pop()
        scope.restore()
        lang_scope.restore()


def _constexpr_names(fn, arg_names) -> set:
    return set(_ti.GridExecutor(fn, arg_names, (1,)).constexprs)


def _to_host(value, name, memory):
    if isinstance(value, tuple):
        return type(value)(*(_to_host(v, name, memory) for v in value)) if hasattr(value, "_fields") else \
            tuple(_to_host(v, f"{name}[{i}]", memory) for i, v in enumerate(value))
    if dataclasses.is_dataclass(value) and hasattr(value, "base") and hasattr(value, "block_shape"):
        return dataclasses.replace(value, base=_to_host(value.base, name, memory))
    if hasattr(value, "data_ptr"):
        return memory.host_tensor(name, value)
    return value


def bind_args(fn, args, kwargs) -> dict:
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in kwargs.items() if k in params}
    return inspect.getcallargs(fn, *args, **kwargs)


def run_grid(fn, bound: dict, grid: tuple, memory, rec, on_program_start=None, on_program_end=None) -> None:
    """Run every program of ``grid`` through the interpreter, recording into ``rec``.

    Raises ``_ProgramFailure`` (carrying the program id and source line) when a program raises.
    """
    names = list(bound)
    constexprs = _constexpr_names(fn, names)
    host = {name: (v if name in constexprs else _to_host(v, name, memory)) for name, v in bound.items()}
    kernel = _rewritten(fn)
    with interpreter_scope(fn, rec):
        call_args = {name: (v if name in constexprs else _ti._implicit_cvt(v)) for name, v in host.items()}
        builder = _ti.interpreter_builder
        builder.set_grid_dim(*grid)
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    pid = (x, y, z)
                    builder.set_grid_idx(x, y, z)
                    rec.begin_program(pid)
                    if on_program_start is not None:
                        on_program_start(pid)
                    try:
                        kernel(**call_args)
                    except Exception as e:  # re-raised with the program and line attached
                        file, line = where_in_traceback(e.__traceback__)
                        raise ProgramFailure(pid, file, line, e) from e
                    rec.end_program()
                    if on_program_end is not None:
                        on_program_end(pid)


class ProgramFailure(Exception):
    def __init__(self, pid, file, line, cause):
        super().__init__(str(cause))
        self.pid, self.file, self.line, self.cause = pid, file, line, cause


def constexpr_names(obj) -> set:
    fn = python_fn(obj)
    return _constexpr_names(fn, list(inspect.signature(fn).parameters))


def unwrap_interpreter_error(e: BaseException) -> BaseException:
    """Triton wraps errors raised inside interpreted helpers; surface the original."""
    while isinstance(e, getattr(_ti, "InterpreterError", ())) and e.__cause__ is not None:
        e = e.__cause__
    return e


def autotune_parts(obj) -> Optional[list]:
    """The chain of Autotuner / Heuristics wrappers above the jit function, outermost first."""
    chain = []
    while isinstance(obj, (Autotuner, Heuristics)):
        chain.append(obj)
        obj = obj.fn
    return chain
