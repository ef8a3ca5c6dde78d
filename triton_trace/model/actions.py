"""What the data objects do through later stages: save (the store), show and ``_repr_html_`` (the view).

The data model imports no stage. These methods call functions that the package's ``__init__`` installs
(``install``): the store to save a Trace, the view to render HTML (loaded, with plotly, on the first
display). Jupyter uses IPython's formatters (view/notebook.py registers them, and they take precedence);
marimo, VS Code, Quarto and nbconvert read ``_repr_html_``.
"""
from __future__ import annotations

from typing import Callable, Optional

# "html": obj -> HTML string; "show": display obj in the running notebook; "save": (trace, path) -> None
_RENDERER: dict = {}


def install(html: Optional[Callable] = None, show: Optional[Callable] = None, save: Optional[Callable] = None,
            **more: Callable) -> None:
    """``more``: further actions by name ("compiled", "reproducer"), reached through ``action(name)``."""
    _RENDERER.update({k: v for k, v in (("html", html), ("show", show), ("save", save)) if v is not None})
    _RENDERER.update(more)


def action(name: str) -> Callable:
    found = _RENDERER.get(name)
    if found is None:
        raise RuntimeError(f"no '{name}' is installed; import triton_trace (not only triton_trace.model)")
    return found


def save(trace, path) -> None:
    writer = _RENDERER.get("save")
    if writer is None:
        raise RuntimeError("no trace writer is installed; import triton_trace (not only triton_trace.model)")
    writer(trace, path)


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
        """Display inline in Jupyter, in the web viewer (keywords: program=, op=, budget=; see view/notebook.py)."""
        show(self, **kw)

    def _repr_html_(self) -> Optional[str]:
        return html(self)
