"""The interpreter's objects as the rest of the recorder reaches them: its value class, its builder, its
semantic object, its memory module, its reduction and scan classes, the standard combine functions it
reduces with numpy, and an MLIR context from Triton's C++ module. Only record/interp/ imports Triton's
interpreter, ``triton._C`` or the underscored names of ``triton.language``
(tests/project/test_seam_access.py), so a release that moves one is fixed here, not in every module that
uses it.

What the hooks swap during a launch (the memory module becomes the proxy) is read at call time, hence
functions; what no hook replaces is a plain alias, which costs nothing on the hot paths."""
from __future__ import annotations

from typing import Optional

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _ti

# a value of the interpreter: ``.data`` a numpy array, ``.dtype`` its Triton scalar type
TensorHandle = _ti.TensorHandle

# ``np_dtype(tl.float16)`` -> float16; any pointer type -> uint64 (the interpreter's own table)
np_dtype = _ti._get_np_dtype

# the classes behind tl.reduce and tl.associative_scan; recording and lowp patch their ``apply``
ReduceOps = _ti.ReduceOps
ScanOps = _ti.ScanOps


def builder():
    """The interpreter's builder instance: every op of a launch goes through its methods, and a batched
    chunk (batch/chunk.py) lives on it while it runs."""
    return _ti.interpreter_builder


def semantic():
    """The semantic object the language's builtins take (``_semantic=``), None where a release has none."""
    return getattr(_ti, "interpreter_semantic", None)


def memory():
    """The memory module loads and stores go through: the interpreter's C++ one, or the proxy the hooks put
    in its place for the launch (interp/proxy.py)."""
    return _ti._interpreter


# the combine functions tl.sum & co. pass, by what they compute: the interpreter (and a batched chunk)
# reduces these with one numpy call, a kernel's own combine function element by element
_COMBINES = (("_sum_combine", "sum"), ("_prod_combine", "prod"), ("_elementwise_max", "max"),
             ("_elementwise_min", "min"), ("_argmin_combine_tie_break_left", "argmin"),
             ("_argmin_combine_tie_break_fast", "argmin"), ("_argmax_combine_tie_break_left", "argmax"),
             ("_argmax_combine_tie_break_fast", "argmax"))
COMBINE_KINDS = {id(getattr(tl.standard, name)): kind for name, kind in _COMBINES if hasattr(tl.standard, name)}


def combine_kind(fn) -> Optional[str]:
    """"sum", "prod", "max", "min", "argmin" or "argmax" for a standard combine function, None for any
    other (a kernel's own)."""
    return COMBINE_KINDS.get(id(fn))


def block_combine(op, dtypes: list):
    """The kernel's own combine function of a reduction or scan ``op`` (a ReduceOps/ScanOps) over whole
    blocks: ``(left, right) -> out``, tuples of numpy arrays, one per operand of Triton type ``dtypes``. Each
    call is one call of the function on block tensors, made as the interpreter makes it on one pair of
    elements (the values through its ``to_tensor``, the results cast to the operands' types), so each
    element pair gets the builder's arithmetic as the interpreter's own loop gives it."""
    np_types = [np_dtype(dt) for dt in dtypes]

    def run(left: tuple, right: tuple) -> tuple:
        arrays = np.broadcast_arrays(*left, *right)
        shape, size = arrays[0].shape, arrays[0].size
        # one flat block of a power-of-two size (a block type's rule), padded with the first pair
        width = 1 << max(size - 1, 0).bit_length()
        flat = [np.concatenate([a.reshape(-1), np.repeat(a.reshape(-1)[:1], width - size)]) for a in arrays]
        ret = op.combine_fn.fn(*(op.to_tensor(a, dt) for a, dt in zip(flat, dtypes + dtypes)))
        ret = ret if isinstance(ret, tuple) else (ret,)
        values = (r.handle.data if isinstance(r, tl.core.tensor) else getattr(r, "value", r) for r in ret)
        return tuple(np.broadcast_to(np.asarray(v), (width,))[:size].reshape(shape).astype(t)
                     for v, t in zip(values, np_types))
    return run


def mlir_context(backend):
    """A fresh MLIR context with Triton's dialects and ``backend``'s loaded: what building a kernel's IR needs
    (record/autotune.py compiles a config to see whether Triton's autotuner would drop it)."""
    from triton._C.libtriton import ir      # the compiler's half of the C++ module: only when a config is checked
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    return context


def compile_ttgir(jit, args: dict, options: dict, arch: int) -> tuple:
    """(TTGIR text, num_warps, enable_fp_fusion as the backend resolved it) of ``jit`` compiled for ``sm_<arch>`` as its GPU launch would be: the launcher's
    binder specialises ``args`` (tensors: objects with ``dtype`` and ``data_ptr()``) under the launch
    ``options`` Triton knows; then the front end and the TTIR and TTGIR passes, no LLVM or ptxas
    (record/gpu/asbuilt.py; record/autotune.py compiles configs alike). Raises what the compiler raises."""
    import warnings
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    target = GPUTarget("cuda", arch, 32)
    names = {p.name for p in jit.params}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # Triton 3.9's FP-fusion default notice, once per compile
        backend = make_backend(target)
        known = set(backend.parse_options({}).__dict__)
        binder = create_function_from_signature(jit.signature, jit.params, backend)
        bound, spec, opts = binder(**{k: v for k, v in args.items() if k in names},
                                   **{k: v for k, v in options.items() if k in known and k not in names})
        opts, signature, constexprs, attrs = jit._pack_args(backend, opts, bound, spec, opts)
        src = ASTSource(jit, signature, constexprs, attrs)
        context = mlir_context(backend)
        module = src.make_ir(target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(),
                             context)
        try:
            stages, metadata = {}, {"hash": "0", "target": target, **opts.__dict__}
            backend.add_stages(stages, opts, src.language)
            for stage in ("ttir", "ttgir"):
                module = stages[stage](module, metadata)
            return (str(module), int(getattr(opts, "num_warps", 0) or 0),
                    bool(getattr(opts, "enable_fp_fusion", True)))
        finally:
            del module, context     # free the MLIR objects now (else nanobind reports them leaked at exit)


def jit_function(fn):
    """A @triton.jit function for ``fn`` (the Python function under an InterpretedFunction), to compile."""
    from triton.runtime.jit import JITFunction
    return JITFunction(fn)
