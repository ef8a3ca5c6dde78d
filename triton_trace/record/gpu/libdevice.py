"""libdevice math in traced kernels.

How the calls reach the interpreter, and what goes wrong there without this module:

- ``triton.language.extra.libdevice`` holds stubs (``def tanh(arg0): ...``) that a GPU compile swaps for the
  backend's module; the interpreter calls the stub itself, which returns None ("cannot convert None to
  tensor", or ``unsupported operand type(s) for +: 'int' and 'NoneType'``);
- ``triton.language.extra.cuda.libdevice`` holds ``@core.extern`` builtins, which the interpreter never
  hands a semantic object ("Did you forget to add @triton.jit ?");
- both end in ``builder.create_extern_elementwise(lib, path, "__nv_tanhf", args, ret_type, pure)``, which
  the interpreter refuses (NotImplementedError).

For one launch, every stub and every CUDA builtin gets a body that dispatches to the CUDA builtin with the
interpreter's semantic, whichever way the kernel reached it (``libdevice.tanh``, ``tl.extra.cuda.libdevice.
tanh``, or a name imported with ``from ... import tanh``, since the function object itself changes), and
``create_extern_elementwise`` computes the symbol with numpy (``libdevice_ops.OPS``). A symbol with no numpy
equivalent raises NotImplementedError from inside Triton, which the session reports as ``UnsupportedOp``.
"""
from __future__ import annotations

import inspect

import numpy as np
import triton.language.extra.libdevice as _stubs
from triton.language.extra.cuda import libdevice as _cuda

from ...numerics import libdevice_exact  # noqa: F401  (registers the exact symbols in OPS)
from ...numerics.libdevice_ops import OPS
from ..interp.access import TensorHandle, np_dtype, semantic

_DISPATCH = "_triton_trace_libdevice"
# float32 symbols that look at bits, not values: no flush to zero
_NO_FTZ = {"__nv_isnanf", "__nv_isinff", "__nv_finitef", "__nv_signbitf", "__nv_float_as_int", "__nv_float_as_uint",
           "__nv_copysignf"}
_FLT_MIN = np.float32(np.finfo(np.float32).tiny)
_STUB_CODES: dict = {}


def supported_symbols() -> list:
    return sorted(OPS)


def install(scope, builder) -> None:
    scope.set_attr(builder, "create_extern_elementwise", _extern(builder.create_extern_elementwise))
    scope.set_attr(_stubs, _DISPATCH, _dispatch)
    swaps = _swaps()
    saved = [(fn, fn.__code__, fn.__kwdefaults__) for fn, _, _ in swaps]

    def undo():
        for fn, code, kw in saved:
            fn.__code__, fn.__kwdefaults__ = code, kw
    scope.on_restore(undo)
    for fn, code, kwdefaults in swaps:
        fn.__code__ = code
        if kwdefaults is not None:
            fn.__kwdefaults__ = kwdefaults


_SWAPS: list = []


def _swaps() -> list:
    """(function, code to run, kwdefaults or None) for every libdevice function a launch redirects; found
    once per process (hundreds of functions: scanning them on every launch dominated small launches)."""
    if not _SWAPS:
        for name, fn in vars(_stubs).items():
            if inspect.isfunction(fn) and fn.__module__ == _stubs.__name__ and not fn.__code__.co_freevars:
                _SWAPS.append((fn, _stub_code(name), None))
        for fn in vars(_cuda).values():
            if getattr(fn, "__triton_builtin__", False) and getattr(fn, "__code__", None) is not None \
                    and fn.__code__.co_freevars == ("fn",):
                _SWAPS.append((fn, _BUILTIN_CODE, {"_triton_trace_semantic": semantic()}))
    return _SWAPS


def _stub_code(name: str):
    code = _STUB_CODES.get(name)
    if code is None:
        ns: dict = {}
        src = f"def {name}(*args, **kwargs):\n    return {_DISPATCH}({name!r}, args, kwargs)\n"
        exec(compile(src, f"<triton_trace libdevice.{name}>", "exec"), ns)
        code = _STUB_CODES[name] = ns[name].__code__
    return code


def _dispatch(name: str, args: tuple, kwargs: dict):
    builtin = vars(_cuda).get(name)
    if builtin is None:
        raise NotImplementedError(f"libdevice.{name} has no CUDA implementation in Triton's "
                                  f"triton.language.extra.cuda.libdevice, so it does not compile for an NVIDIA GPU")
    target = getattr(builtin, "__wrapped__", builtin)
    return target(*args, _semantic=semantic(), **kwargs)


def _subnormal(x):
    return (x != 0) & (np.abs(x) < _FLT_MIN)


def _flush(x):
    """float32 subnormals to signed zero: Triton builds libdevice with __CUDA_FTZ on (enable_reflect_ftz), and
    an H200 flushes the inputs and results of its float32 functions."""
    if x.dtype != np.float32:
        return x
    return np.where(_subnormal(x), np.copysign(np.float32(0), x), x).astype(np.float32)


def _builtin_template(fn):
    # the body a CUDA libdevice builtin gets for the launch; ``fn`` is the builtin's own closure cell
    def wrapper(*args, _triton_trace_semantic=None, **kwargs):
        if kwargs.get("_semantic") is None:
            kwargs["_semantic"] = _triton_trace_semantic
        return fn(*args, **kwargs)
    return wrapper


_BUILTIN_CODE = _builtin_template(None).__code__


def _extern(inner):
    def create_extern_elementwise(lib_name, lib_path, symbol, arg_list, ret_type, is_pure):
        impl = OPS.get(symbol)
        if impl is None:
            try:
                return inner(lib_name, lib_path, symbol, arg_list, ret_type, is_pure)
            except NotImplementedError as e:
                raise NotImplementedError(
                    f"libdevice function {symbol} has no numpy equivalent in triton_trace, so it cannot run "
                    f"on the CPU (README.md, 'Supported Triton features', lists the ones that can)"
                ).with_traceback(e.__traceback__) from None
        ftz = symbol not in _NO_FTZ
        with np.errstate(all="ignore"):
            args = [_flush(h.data) if ftz else h.data for h in arg_list]
            out = np.asarray(impl(*args))
            want = np_dtype(ret_type)
            if out.dtype != want:
                out = out.astype(want)        # integers keep their low bits, floats round to nearest
            if symbol == "__nv_nextafterf":
                out = np.where(_subnormal(out), np.where(args[0] == 0, np.copysign(_FLT_MIN, out),
                                                          np.copysign(np.float32(0), out)), out).astype(np.float32)
            elif ftz:
                out = _flush(out)
        return TensorHandle(out, ret_type.scalar)
    return create_extern_elementwise
