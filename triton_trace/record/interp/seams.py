"""Which Triton releases the tracer runs on, and the private interpreter attributes it hooks (its seams):
both checked when triton_trace is imported, so a release that moved one fails there, naming what moved,
instead of mid-launch. The version range is what the test suite runs against."""
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


def check_seams() -> list:
    """Names of hooked interpreter attributes that are missing in the installed Triton (empty when fine)."""
    missing = [f"{_owner_name(owner)}.{name}" for owner, name in SEAMS if not hasattr(owner, name)]
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
