"""Which Triton releases the tracer runs on, and every private Triton name it touches (its seams): both
checked when triton_trace is imported, so a release that moved one fails there, naming what moved, instead
of mid-launch. The version range is what the test suite runs against.

``PRIVATE`` is the whole list: tests/project/test_architecture.py fails when any module of the package touches a
private Triton name (one imported from a private module, an attribute of such a module, an underscored
attribute of ``triton``/``tl``) that is not in it, or when it lists a name nobody uses. Upgrading Triton
starts by reading this one table.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.runtime import interpreter as _ti
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.driver import driver as _driver_config
from triton.runtime.jit import JITFunction

from ...errors import UnsupportedTritonVersion


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


# module -> {name: where it is used}; every name must exist in every supported release
PRIVATE = {
    "triton.runtime.interpreter": {
        "TensorHandle": "interp/access (for record/batch, divergence, gpu, memory/provenance, checks/padding), "
                        "interp/semantics: the interpreter's values",
        "_get_np_dtype": "interp/access (for record/batch, divergence, gpu): numpy dtype of a Triton type",
        "_interpreter": "interp/hooks, interp/access (for batch/memops): the C++ memory module the proxy stands "
                        "in for",
        "interpreter_builder": "interp/hooks, interp/access (for batch/tensor, divergence): the builder whose ops "
                               "are hooked",
        "interpreter_semantic": "interp/access: the semantic object libdevice calls take (gpu/libdevice); its "
                                "class's dot_scaled is wrapped to take the formats the interpreter passes "
                                "(gpu/dotscaled)",
        "_patch_lang": "interp/hooks", "_implicit_cvt": "interp/semantics",
        "GridExecutor": "interp/hooks", "InterpretedFunction": "interp/hooks, interp/kernels",
        "FunctionRewriter": "interp/rewrites",
        "ReduceOps": "interp/compute, interp/access (for checks/padding, gpu/compiledops, gpu/lowp)",
        "ScanOps": "interp/compute, interp/access (for gpu/compiledops, gpu/lowp)",
        "InterpreterBuilder": "interp/hooks",
    },
    "triton.runtime.jit": {
        "JITFunction": "interp/hooks: JITFunction.run is wrapped; interp/kernels; record/autotune",
        "JITFunction._unsafe_update_src": "suite/kernelsource: a library's source rewrite also replaces jit.fn",
        "create_function_from_signature": "compiled/toolchain, record/autotune: the launcher's argument binder",
    },
    "triton.runtime.autotuner": {"Autotuner": "interp/hooks, interp/kernels",
                                 "Heuristics": "interp/hooks, interp/kernels"},
    "triton.runtime.driver": {"driver": "interp/activedriver: the active-driver slot"},
    "triton.runtime": {"driver.active": "suite/bench: the active driver's benchmarker"},
    "triton.backends.compiler": {"GPUTarget": "compiled/toolchain, suite/driver, record/autotune"},
    "triton.backends.driver": {"DriverBase": "suite/driver: the stub GPU driver's base"},
    "triton.backends.nvidia.driver": {"ty_to_cpp": "suite/driver: the CUDA backend's type table"},
    "triton.compiler": {"ASTSource": "compiled/toolchain, record/autotune",
                        "make_backend": "compiled/toolchain, record/autotune"},
    "triton.compiler.errors": {"CompilationError": "errors",
                               "CompileTimeAssertionFailure": "record/autotune: an autotune config that fails "
                                                              "tl.static_assert is dropped"},
    "triton._C.libtriton": {"ir": "interp/access: mlir_context, for record/autotune's check that a config "
                                  "compiles",
                            "ir.context": "interp/access", "ir.load_dialects": "interp/access"},
    "triton.language.standard": {
        "_sum_combine": "interp/access: reductions recognised by their combine function (for batch/tensor, "
                        "gpu/lowp, gpu/compiledops, checks/padding)",
        "_prod_combine": "interp/access", "_elementwise_max": "interp/access", "_elementwise_min": "interp/access",
    },
}
PRIVATE_MODULES = ("triton.runtime.interpreter", "triton.runtime.jit", "triton.runtime.autotuner",
                   "triton.runtime.driver", "triton.backends", "triton.compiler", "triton._C",
                   "triton._internal_testing")

SEAMS = (
    (_ti, "_interpreter"), (_ti, "interpreter_builder"), (_ti, "_patch_lang"), (_ti, "_implicit_cvt"),
    (_ti, "GridExecutor"), (_ti, "InterpretedFunction"), (_ti, "ReduceOps"), (_ti, "ScanOps"),
    (_ti, "InterpreterBuilder"), (_ti, "FunctionRewriter"), (tl.core, "tensor_descriptor_base"),
    (JITFunction, "run"), (Autotuner, "run"), (Heuristics, "run"),
    (_driver_config, "_active"), (_driver_config, "_default"),      # activedriver.py (the CUDA redirect)
)


def _owner_name(owner) -> str:
    """A class's or module's name, or an instance's class (Triton's DriverConfig object)."""
    return getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None) or type(owner).__name__


def _missing_private() -> list:
    import importlib
    missing = []
    for module, names in PRIVATE.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            missing.append(module)
            continue
        missing += [f"{module}.{n}" for n in names if not _has_static(mod, n)]
    return missing


def _has_static(obj, dotted: str) -> bool:
    """Whether ``obj.a.b`` exists, without running properties (``driver.active`` starts a GPU driver)."""
    import inspect
    for part in dotted.split("."):
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            return False
    return True


def check_seams() -> list:
    """Names of hooked interpreter attributes that are missing in the installed Triton (empty when fine)."""
    missing = [f"{_owner_name(owner)}.{name}" for owner, name in SEAMS if not hasattr(owner, name)]
    missing += _missing_private()
    if hasattr(_ti, "_interpreter"):
        missing += [f"_interpreter.{n}" for n in ("load", "store", "atomic_rmw", "atomic_cas")
                    if not hasattr(_ti._interpreter, n)]
    rw = getattr(_ti, "FunctionRewriter", None)
    if rw is not None:
        missing += [f"FunctionRewriter.{n}" for n in ("_transform_ast", "_compile_and_exec", "_prepare_source",
                                                       "rewrite_ast")
                    if not hasattr(rw, n)]
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
