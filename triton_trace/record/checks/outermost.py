"""One check per memory op, whichever builder method the interpreter enters first.

Triton's interpreter runs a plain load or store through its masked twin (``create_store`` calls
``create_masked_store``), so a check that wraps both would judge one op twice. ``hook_outermost`` wraps
the named builder methods so that ``before`` runs for the outermost call only, before the access (an
access with a bad address may raise, and the check must have seen it first).
"""
from __future__ import annotations

from ..gpu.lowp import inner_method


def hook_outermost(scope, builder, names, before) -> None:
    """Wrap ``builder.<name>`` for each of ``names`` (those the builder has): ``before(name, args, kwargs)``
    runs once per op, for the outermost of the wrapped calls."""
    inside = [False]          # shared by the names, so the inner call of a plain op passes straight through
    for name in names:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _outermost(inner_method(builder, name), name, before, inside))


def _outermost(inner, name: str, before, inside: list):
    def run(*args, **kwargs):
        if inside[0]:
            return inner(*args, **kwargs)
        before(name, args, kwargs)
        inside[0] = True
        try:
            return inner(*args, **kwargs)
        finally:
            inside[0] = False
    return run
