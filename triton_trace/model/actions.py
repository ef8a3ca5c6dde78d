"""What the data objects do through later stages: save (the store), show and ``_repr_html_`` (the view).

The data model imports no stage: each action is named here by module and function (``DEFAULTS``) and
loaded on its first call (the view, with plotly, on the first display); ``install`` replaces one (tests,
embedders). Jupyter uses IPython's formatters (view/notebook.py registers them, and they take precedence);
marimo, VS Code, Quarto and nbconvert read ``_repr_html_``.
"""
from __future__ import annotations

from typing import Callable, Optional

# "html": obj -> HTML string; "show": display obj in the running notebook; "save": (trace, path) -> None;
# "compiled": (launch, target, **kw) -> compiled launch; "reproducer": (launch, path, **kw) -> path
DEFAULTS = {
    "html": ("triton_trace.view.notebook", "repr_html"),
    "show": ("triton_trace.view.notebook", "show"),
    "save": ("triton_trace.store.tracefile", "save"),
    "compiled": ("triton_trace.compiled", "compile_launch"),
    "reproducer": ("triton_trace.repro", "write_reproducer"),
}
_RENDERER: dict = {}


def _get(name: str) -> Optional[Callable]:
    found = _RENDERER.get(name)
    if found is None and name in DEFAULTS:
        import importlib
        module, attr = DEFAULTS[name]
        # looked up on every call, not kept: the module's function as it is now (a test may replace it)
        found = getattr(importlib.import_module(module), attr)
    return found


def install(html: Optional[Callable] = None, show: Optional[Callable] = None, save: Optional[Callable] = None,
            **more: Callable) -> None:
    """``more``: further actions by name ("compiled", "reproducer"), reached through ``action(name)``."""
    _RENDERER.update({k: v for k, v in (("html", html), ("show", show), ("save", save)) if v is not None})
    _RENDERER.update(more)


def action(name: str) -> Callable:
    found = _get(name)
    if found is None:
        raise RuntimeError(f"no action '{name}': the actions are {sorted(set(DEFAULTS) | set(_RENDERER))}")
    return found


def save(trace, path) -> None:
    action("save")(trace, path)


def html(obj) -> Optional[str]:
    """The object's HTML, or None when no renderer is installed (a front end then shows its repr)."""
    return action("html")(obj)


def show(obj, **kw) -> None:
    action("show")(obj, **kw)


class RichDisplay:
    """Mixed into the displayable data classes."""

    def show(self, **kw) -> None:
        """Display inline in Jupyter, in the web viewer (keywords: program=, op=, budget=; see view/notebook.py)."""
        show(self, **kw)

    def _repr_html_(self) -> Optional[str]:
        return html(self)
