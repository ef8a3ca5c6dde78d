"""triton_trace: trace Triton kernels on the CPU through Triton's interpreter, analyse and view the trace.

The recording core imports without Flask or plotly; the web and notebook views load them when used.
"""
from __future__ import annotations

from .record.interp import seams as _seams

_seams.check_version()
_seams.require_seams()

from .errors import (FindingsError, FuzzFailure, OutOfBoundsAccess, ProgramError, TraceFileError,  # noqa: E402
                     TraceUsageError, TritonTraceError, UnsupportedOp, UnsupportedTritonVersion)
from .model import KINDS, Access, Launch, TensorInfo, Trace  # noqa: E402
from .record.session import current_trace, reset, set_progress, trace, trace_all  # noqa: E402
from .store import load  # noqa: E402

__version__ = "0.1.0"

# Later pipeline stages load on first use: the recording core must import without Flask and plotly
# (the GPU machine has neither), and analysis is not needed just to record.
_LAZY = {
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
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'triton_trace' has no attribute '{name}'")

__all__ = [
    "trace", "trace_all", "current_trace", "reset", "load", "set_progress",
    "Trace", "Launch", "Access", "TensorInfo", "KINDS",
    "TritonTraceError", "ProgramError", "FindingsError", "TraceUsageError", "TraceFileError", "UnsupportedOp",
    "UnsupportedTritonVersion", "OutOfBoundsAccess", "FuzzFailure", "fuzz",
    "analyze", "check", "Report", "diff", "compare", "launch", "create_app", "show", "iframe", "enable_progress",
    "cuda_on_cpu",
]


def _render_html(obj) -> str:
    from .view.notebook import repr_html     # the view (and plotly) load on the first rich display
    return repr_html(obj)


def _save(trace, path) -> None:
    from . import store
    store.save(trace, path)


def _show(obj, **kw) -> None:
    from .view.notebook import show as show_in_notebook
    show_in_notebook(obj, **kw)


def _compiled(launch, target, **kw):
    from .compiled import compile_launch
    return compile_launch(launch, target, **kw)


def _reproducer(launch, path, **kw):
    from .repro import write_reproducer
    return write_reproducer(launch, path, **kw)


def _default_display() -> None:
    """Saving a Trace; a progress bar for long launches; rich display of Trace, Launch and Report in
    notebooks. Installed from here, so the data model (triton_trace.model) never imports a stage."""
    import sys
    from .model import actions
    from .view.progress import enable_progress
    actions.install(html=_render_html, show=_show, save=_save, compiled=_compiled, reproducer=_reproducer)
    enable_progress("auto")      # notebook bar in Jupyter, terminal bar on a TTY stderr, else none
    if "IPython" in sys.modules:
        from IPython import get_ipython
        if get_ipython() is not None:
            from .view.notebook import register_formatters
            register_formatters()


_default_display()
