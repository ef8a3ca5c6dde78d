"""Rich display hooks of the data objects (Trace, Launch, Report) for notebook front ends.

Jupyter uses IPython's formatters (view/notebook.py registers them, and they take precedence); marimo,
VS Code, Quarto and nbconvert read ``_repr_html_`` on the object. The data model and the analysis define those
methods here without importing the view stage: the package's ``__init__`` installs the renderer (which
loads the view, and plotly, on the first display).
"""
from __future__ import annotations

from typing import Callable, Optional

_RENDERER: dict = {}      # "html": obj -> HTML string; "show": display obj in the running notebook


def set_renderer(html: Optional[Callable] = None, show: Optional[Callable] = None) -> None:
    _RENDERER.clear()
    _RENDERER.update({k: v for k, v in (("html", html), ("show", show)) if v is not None})


def html(obj) -> Optional[str]:
    """The object's HTML, or None when no renderer is installed (a front end then shows its repr)."""
    render = _RENDERER.get("html")
    return render(obj) if render is not None else None


def show(obj, **kw) -> None:
    render = _RENDERER.get("show")
    if render is None:
        raise RuntimeError("no display is installed; import triton_trace (not only triton_trace.model)")
    render(obj, **kw)


class RichDisplay:
    """Mixed into the displayable data classes."""

    def show(self, **kw) -> None:
        """Display inline in Jupyter: program grid, findings, charts (self-contained HTML)."""
        show(self, **kw)

    def _repr_html_(self) -> Optional[str]:
        return html(self)
