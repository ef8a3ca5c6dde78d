"""Undo logs for what a launch changes in other people's modules, so they are restored exactly.

Nothing here knows about Triton; ``hooks`` decides what to patch and uses these to put it back.
"""
from __future__ import annotations

from typing import Callable, Iterable

_MISSING = object()


def _own(obj, name):
    """The attribute as stored on ``obj`` itself (not inherited), or _MISSING."""
    d = getattr(obj, "__dict__", None)
    if d is not None:
        return d.get(name, _MISSING)
    return getattr(obj, name, _MISSING)


class Scope:
    """Records attribute changes and undoes them in reverse order.

    It remembers the object's own entry, not what ``getattr`` finds: putting back an inherited method
    with ``setattr`` would copy it into the subclass, which is not how the class was found.
    """

    def __init__(self):
        self._undo: list = []

    def set_attr(self, obj, name: str, value) -> None:
        old = _own(obj, name)
        self._undo.append(lambda: _put_back(obj, name, old))
        setattr(obj, name, value)

    def set_item(self, mapping: dict, key, value) -> None:
        """``mapping[key] = value`` until restored (a module's globals, seen as the dict a function holds)."""
        old = mapping.get(key, _MISSING)
        self._undo.append(lambda: mapping.pop(key, None) if old is _MISSING else mapping.__setitem__(key, old))
        mapping[key] = value

    def on_restore(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the scope is restored, in reverse order with the attribute changes."""
        self._undo.append(fn)

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


def _put_back(obj, name, old) -> None:
    if old is _MISSING:
        if name in getattr(obj, "__dict__", {}) or not hasattr(obj, "__dict__"):
            delattr(obj, name)
    else:
        setattr(obj, name, old)


class Snapshot:
    """The own attributes of some modules and classes, put back exactly after code we do not control
    patched them. Attributes added meanwhile are removed, changed ones reset, removed ones re-added."""

    def __init__(self, objs: Iterable):
        self._saved = []
        seen = set()
        for obj in objs:
            if id(obj) not in seen:
                seen.add(id(obj))
                self._saved.append((obj, dict(vars(obj))))

    def restore(self) -> None:
        for obj, before in self._saved:
            now = vars(obj)
            for name in [n for n in now if n not in before]:
                delattr(obj, name)
            for name, value in before.items():
                if now.get(name, _MISSING) is not value:
                    setattr(obj, name, value)


def carried(obj, name: str, default=None):
    """What a check attached to a value (``setattr(handle, name, ...)``), or ``default``. Not
    ``getattr(obj, name, default)``: a ``tl.tuple`` argument's ``__getattr__`` raises ValueError for a name it
    lacks (Liger's mhc kernels pass tuples to atomics), and a class attribute must not count."""
    try:
        return vars(obj).get(name, default)
    except TypeError:           # no __dict__: a number, a string, None
        return default
