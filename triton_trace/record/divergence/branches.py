"""``if`` statements whose condition differs between the programs of a batched chunk, run as a GPU runs a
divergent branch: each side once, with only the programs that take it active, and every name a side
assigns merged per program afterwards.

divergence/rewrite.py turns ``if c: A`` / ``else: B`` in a kernel or a @triton.jit helper into::

    I = _triton_trace_if(c, assigned=(...), live=(...), has_else=...)
    for b in I:                     # the side every program takes; masked: True, then False
        if I.masked:
            R = I.begin(locals())   # the else side starts from the names as they were before the if
            if 'x' in R: x = R['x']     # ... for each name either side assigns
        if b:
            A
        else:
            B
        if I.masked:
            I.end(locals())
    if I.masked:
        M = I.merge()               # per program: the side it took
        if 'x' in M: x = M['x']     # ... for each of them read outside the if

Where the running programs agree on ``c`` (or one program runs alone) the loop runs once with ``c``: the
``if`` as Python runs it. Where they disagree in long runs of neighbours (``if pid == 0``, a tail), the chunk
splits into runs that agree (batch.agree), as before: no side is computed for programs that do not take it.
Otherwise each side runs with ``Chunk.active`` set to its programs (as a masked loop's trip): their memory
ops have no lanes for the others, the recorder leaves the others out of the side's events, and the others'
non-finite or overflowing values are not reported. Outputs and traces are those of one program at a time.
The chunk still splits where that cannot hold: a side with ``return``, ``break`` or ``continue`` (not
rewritten); a name bound on one side only and read after the if (the compiler rejects that; the
interpreter runs it); a plain value (not a tensor) that differs between the sides.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import triton.language as tl

from ...errors import ChunkDiverged
from ..batch import running as batch
from ..interp.access import builder
from .masked import MIN_MASKED_RUN, Masked, decided, varies

_UNBOUND = object()


def branch(cond, assigned: tuple = (), live: tuple = (), has_else: bool = False):
    """The rewritten ``if``'s state: its sides masked per program when the running programs disagree on
    ``cond`` in short runs, else the ``if`` as Python runs it. ``assigned``: the local names either side
    assigns; ``live``: those of them read anywhere outside the ``if`` (merged after it)."""
    chunk = batch.running(builder())
    if chunk is None or not isinstance(cond, tl.tensor) or cond.type.is_block() or \
            not varies(cond, chunk, "biuf"):
        return _Taken(cond)
    taken = np.asarray(cond.handle.data).reshape(chunk.size, -1)[:, 0] != 0    # NaN is true, as bool(nan)
    running = taken if chunk.active is None else taken[chunk.active]
    runs = 1 + int(np.count_nonzero(running[1:] != running[:-1]))
    if len(running) >= MIN_MASKED_RUN * runs:
        return _Taken(cond)            # bool(cond) splits the chunk into the runs that agree
    decided(cond)
    return MaskedIf(chunk, taken, assigned, live, has_else)


class _Taken:
    """One pass with the condition itself: the ``if`` as Python runs it."""
    __slots__ = ("cond",)
    masked = False

    def __init__(self, cond):
        self.cond = cond

    def __iter__(self):
        return iter((self.cond,))


class MaskedIf(Masked):
    """Both sides of an ``if``, each with its own programs active (over the running chunk ``chunk``)."""
    what = "a branch that the programs of a chunk take differently"
    masked = True

    def __init__(self, chunk, taken: np.ndarray, assigned: tuple, live: tuple, has_else: bool):
        super().__init__(chunk, (), assigned)
        self.taken, self.live, self.has_else = taken, live, has_else
        self._before: Optional[dict] = None
        self._then: Optional[dict] = None
        self._else: Optional[dict] = None

    def __iter__(self):
        try:
            for side in ((True, False) if self.has_else else (True,)):
                act = self.taken if side else ~self.taken
                self.chunk.set_active(act if self.outer is None else act & self.outer)
                yield side
        finally:
            self._end()

    def begin(self, names: dict) -> dict:
        """At the start of a side: the names it must start from (the else side: as before the if)."""
        if self._before is None:
            self._before = {n: names.get(n, _UNBOUND) for n in self.assigned}
            return {}
        return {n: v for n, v in self._before.items() if v is not _UNBOUND}

    def end(self, names: dict) -> None:
        values = {n: names.get(n, _UNBOUND) for n in self.live}
        if self._then is None:
            self._then = values
        else:
            # a name unbound before the if still holds the then side's object: the else side never bound it
            self._else = {n: _UNBOUND if self._before.get(n) is _UNBOUND and v is self._then[n] else v
                          for n, v in values.items()}

    def merge(self) -> dict:
        """Each name a side assigned that is read after the if: per program, the value of the side it took."""
        other = self._else if self.has_else else self._before
        self.active = self.taken          # _merge_value keeps the new value where active
        out = {}
        for name in self.live:
            then, other_v = self._then[name], other[name]
            if then is other_v:
                continue
            if then is _UNBOUND or other_v is _UNBOUND:
                self._split(f"'{name}' is bound on one side of a branch that programs take differently")
            out[name] = self._merge_value(name, other_v, then)
        self.active = None
        return out

    def _split(self, why: str):
        raise ChunkDiverged(why, self.taken.astype(np.int64))

    def _labels(self) -> np.ndarray:
        return self.taken.astype(np.int64)

    def _running(self) -> np.ndarray:
        return self.taken
