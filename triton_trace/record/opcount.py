"""How many ops the interpreter's builder executes: every call of one of its ``create_*`` methods while
``counting()`` is open, by name. benchmarks/speed/peers.py shows the count per traced launch: the number of
times a launch goes through the interpreter's op dispatch (a batched chunk's op, which runs every program
of the chunk at once, counts once), which is what a replay of a loop body's ops that skips the interpreter
could save.

The counters are the builder's own attributes for the while, each calling the method its class has at call
time (a batched chunk swaps the class), so the recording hooks a launch installs wrap them and put them back
when it ends; ``counting()`` removes them when it closes. Not for use around a launch in another thread.
"""
from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from ..errors import TraceUsageError
from .interp import access


def _counted(builder, name: str, counts: Counter):
    def run(*args, **kwargs):
        counts[name] += 1
        return getattr(type(builder), name)(builder, *args, **kwargs)
    run.__name__ = name
    return run


@contextmanager
def counting() -> Iterator[Counter]:
    """A Counter of the builder's ``create_*`` calls (op name -> calls) made while the block runs."""
    builder = access.builder()
    names = [n for n in dir(type(builder)) if n.startswith("create_") and callable(getattr(type(builder), n))]
    own = vars(builder)
    taken = [n for n in names if n in own]
    if taken:
        raise TraceUsageError(f"the interpreter's builder already has {taken[:3]} of its own: a launch is running "
                           f"or another counting() is open")
    counts: Counter = Counter()
    for n in names:
        setattr(builder, n, _counted(builder, n, counts))
    try:
        yield counts
    finally:
        for n in names:
            own.pop(n, None)
