"""A kernel whose source a test replaced runs that source under the redirect.

Triton's own language tests build kernels from a template by replacing text in a ``@triton.jit``
function's source: under ``TRITON_INTERPRET=1`` they ``exec`` the new text, on a GPU (which the redirect
answers as) they call ``JITFunction._unsafe_update_src(new)``, and the compiler reads ``jit.src``. The
interpreter runs the Python function ``jit.fn``, whose code is still the template's (a test then fails
with ``NameError: GENERATE_TEST_HERE``). While the redirect is on, that update also makes ``jit.fn`` a
function compiled from the new text, in the template's globals, as the interpreter branch of those tests
does; its text is registered with ``linecache`` under a name of its own, padded so that its lines keep the
template's line numbers, because the tracer reads a kernel's source through ``inspect``.
"""
from __future__ import annotations

import inspect
import itertools
import linecache
import os
import textwrap

from triton.runtime.jit import JITFunction

from ..record.patching import Scope

_SERIAL = itertools.count(1)


def function_from_source(fn, src: str):
    """A function compiled from ``src`` (a ``def`` of ``fn``'s name) in ``fn``'s globals, readable by
    ``inspect``, its lines numbered as ``fn``'s in its file."""
    text = textwrap.dedent(src)
    try:
        lines, start = inspect.getsourcelines(fn)
        def_line = start + next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def "))
    except (OSError, TypeError, StopIteration):     # no file behind fn: number from 1
        def_line = 1
    name = (f"<{os.path.basename(fn.__code__.co_filename)}:{def_line} {fn.__name__}, source replaced "
            f"#{next(_SERIAL)}>")
    padded = "\n" * (def_line - 1) + text
    linecache.cache[name] = (len(padded), None, padded.splitlines(keepends=True), name)
    namespace: dict = {}
    exec(compile(padded, name, "exec"), fn.__globals__, namespace)
    made = namespace.get(fn.__name__)
    if not callable(made):
        raise ValueError(f"the new source of kernel '{fn.__name__}' defines no function of that name")
    return made


def install(scope: Scope) -> None:
    """Make ``JITFunction._unsafe_update_src`` also replace ``jit.fn`` (put back with ``scope``)."""
    original = JITFunction._unsafe_update_src

    def update_src(self, new_src):
        original(self, new_src)
        self.fn = function_from_source(self.fn, new_src)

    scope.set_attr(JITFunction, "_unsafe_update_src", update_src)
