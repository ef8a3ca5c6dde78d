"""Source lines of kernels, found in their own source with ``inspect`` so expectations follow the code."""
from __future__ import annotations

import inspect


def _function(kernel):
    """The Python function under a kernel object (@triton.jit, @triton.autotune, @triton.heuristics)."""
    fn = kernel
    while not inspect.isfunction(fn):
        fn = fn.fn
    return fn


def line_of(kernel, text: str, nth: int = 0) -> int:
    """The line, in ``kernel``'s source file, of the ``nth`` line of ``kernel`` that contains ``text``."""
    lines, start = inspect.getsourcelines(_function(kernel))
    return [start + i for i, ln in enumerate(lines) if text in ln][nth]


def marked_line(kernel, marker: str = "# BUG") -> int:
    """The one line of ``kernel`` that ends with ``marker``."""
    fn = _function(kernel)
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"{fn.__name__}: expected one line marked {marker!r}, found {hits}"
    return hits[0]
