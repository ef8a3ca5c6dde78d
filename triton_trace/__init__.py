"""triton_trace: trace Triton kernels on the CPU through Triton's interpreter, analyse and view the trace.

Importing the package is inert and cheap: every public name loads its module on first use (the recording
core without Flask or plotly; the GPU machine has neither), and the supported-release check runs when the
recorder loads (record/interp/hooks.py). tests/project/test_import_cost.py checks which modules the import pulls in.
"""
from __future__ import annotations

__version__ = "0.1.0"

# name -> (module, attribute): loaded on first use
_LAZY = {
    **{n: ("triton_trace.record.session", n) for n in ("trace", "trace_all", "current_trace", "reset", "set_progress")},
    **{n: ("triton_trace.errors", n) for n in (
        "FindingsError", "FuzzFailure", "OutOfBoundsAccess", "ProgramError", "TraceFileError", "TraceUsageError",
        "TritonTraceError", "UnsupportedOp", "UnsupportedTritonVersion")},
    **{n: ("triton_trace.model", n) for n in ("KINDS", "Access", "Launch", "TensorInfo", "Trace")},
    "load": ("triton_trace.store.tracefile", "load"),
    "save": ("triton_trace.store.tracefile", "save"),
    "compiled": ("triton_trace.compiled", "compile_launch"),
    "reproducer": ("triton_trace.repro", "write_reproducer"),
    "analyze": ("triton_trace.analysis", "analyze"),
    "check": ("triton_trace.analysis", "check"),
    "Report": ("triton_trace.analysis", "Report"),
    "diff": ("triton_trace.analysis.diff", "diff"),
    "compare": ("triton_trace.gpucheck", "compare"),
    "launch": ("triton_trace.view.server", "launch"),
    "create_app": ("triton_trace.view.server", "create_app"),
    "show": ("triton_trace.view.notebook", "show"),
    "iframe": ("triton_trace.view.notebook", "iframe"),
    "fuzz": ("triton_trace.fuzzing", "fuzz"),
    "enable_progress": ("triton_trace.view.progress", "enable_progress"),
    "cuda_on_cpu": ("triton_trace.suite", "cuda_on_cpu"),
    "inductor_on_cpu": ("triton_trace.suite", "inductor_on_cpu"),
}
_STARTED = False


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        _first_use()
        return value
    raise AttributeError(f"module 'triton_trace' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "trace", "trace_all", "current_trace", "reset", "load", "save", "set_progress",
    "Trace", "Launch", "Access", "TensorInfo", "KINDS",
    "TritonTraceError", "ProgramError", "FindingsError", "TraceUsageError", "TraceFileError", "UnsupportedOp",
    "UnsupportedTritonVersion", "OutOfBoundsAccess", "FuzzFailure", "fuzz",
    "analyze", "check", "Report", "diff", "compare", "launch", "create_app", "show", "iframe", "enable_progress",
    "cuda_on_cpu", "inductor_on_cpu", "compiled", "reproducer",
]


def _first_use() -> None:
    """Once, when the first public name is used: the progress bar for long launches (a notebook bar in
    Jupyter, a terminal bar on a TTY stderr) and Jupyter's formatters for Trace, Launch and Report."""
    global _STARTED
    if _STARTED:
        return
    _STARTED = True
    import sys
    from .view.progress import enable_progress
    enable_progress("auto")
    if "IPython" in sys.modules:
        from IPython import get_ipython
        if get_ipython() is not None:
            from .view.notebook import register_formatters
            register_formatters()

