"""Loops whose trip count differs between the programs of a batched chunk, run as a GPU runs divergent
warps: to the largest trip count, each program doing its own trips only.

``for i in range(lo, hi, step)`` (or ``tl.range``) in a kernel or a @triton.jit helper, where ``hi`` is a
value of each program (a variable sequence length, a split-K tail, causal attention's
``(start_m + 1) * BLOCK_M``) or ``lo`` is (a persistent kernel's ``tl.range(pid, n_tiles, NUM_SMS)``: the
loop variable is then a scalar tensor, one value per program), would otherwise make the chunk split into
runs of consecutive programs that agree on it. The function's source is rewritten (divergence/rewrite.py) so such a loop becomes::

    L = _triton_trace_loop(lo, hi, step, names=(...), assigned=(...))   # range() unless hi differs
    for i in L:
        if L.compact:                           # programs left: run on those still running
            C = L.enter(locals())
            if 'x' in C: x = C['x']             # ... for each local name the body uses
        S = L.save(locals()) if L.masked else None
        <body>
        if S is not None:
            M = L.merge(S, locals())            # names the body assigns: where(active, new, old)
            if 'x' in M: x = M['x']             # ... for each of them
    if L.compacted:
        C = L.leave(locals())                   # every program's values again, as it left the loop
        if 'x' in C: x = C['x']

A trip that some programs sit out runs in one of two ways. Masked (``Chunk.active``): their memory ops have
no active lanes, the recorder leaves them out of the trip's events, their non-finite or overflowing values
are not reported, and after the trip every name the body assigned keeps its old value for them. Cut
(``enter``), once at most COMPACT_AT of the programs still make the trips: the names are cut to the running
programs' rows (compact.py) and the trips run on a sub-chunk of them alone (``batch.Chunk.sub``), so work
shrinks with the programs left (causal attention: half the work of the non-causal loop); the values each
program held when it left are put back together after the loop. Either way the result is what each
program computes alone: ``step`` must agree (else the chunk splits as before), the body may not
``break``, ``continue`` or ``return``, and the loop variable may not be read after the loop (its last value
differs per program); such loops are left as they are. A name first bound inside the loop, where some
program runs no trip at all, splits the chunk when something outside the loop reads it (alone, that program
would not have the name); a name only the body reads needs nothing for that program, which never reads it.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import triton.language as tl

from ...errors import BatchFallback, ChunkDiverged
from ..batch import compact, running as batch
from ..interp.access import TensorHandle, builder, np_dtype
from . import induction
from .masked import COMPACT_AT, MIN_MASKED_RUN, Masked, varies   # COMPACT_AT: this module's own, to tune
from .names import PREFIX


def loop(*args, names: tuple = (), assigned: tuple = (), var: Optional[str] = None, outside: tuple = None):
    """``range(*args)``, masked per program where a bound differs in the running chunk. ``names``: the
    function's local names the loop's body uses; ``assigned``: those it assigns (without loop variables);
    ``var``: the loop variable; ``outside``: the assigned names read anywhere outside the loop (None: all)."""
    lo, hi = (0, args[0]) if len(args) == 1 else args[:2]
    var_type = induction.loop_type((lo, hi, args[2] if len(args) > 2 else 1))
    chunk = batch.running(builder())
    if chunk is None:
        return _Plain(range(*args), var_type)
    vary_lo, vary_hi = varies(lo, chunk), varies(hi, chunk)
    if not (vary_lo or vary_hi):
        return _Plain(range(*args), var_type)
    step = int(args[2]) if len(args) > 2 else 1            # must agree: __index__ splits the chunk otherwise
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    starts, stops = (_per_program(x, chunk) if v else np.full(chunk.size, int(x), dtype=np.int64)
                     for x, v in ((lo, vary_lo), (hi, vary_hi)))
    # a persistent kernel's ``for tile in tl.range(pid, n_tiles, NUM_SMS)``: the loop variable differs per
    # program too, and is a scalar tensor of the loop's type (a GPU's induction variable) instead of an int
    dtype = (var_type or lo.dtype) if vary_lo else None
    out = MaskedRange(chunk, starts, stops, step, names, assigned, _long_runs(starts, stops, chunk), var, dtype)
    out.int_type = var_type
    out.outside = outside
    return out


def _per_program(x, chunk) -> np.ndarray:
    return np.asarray(x.handle.data).reshape(chunk.size, -1)[:, 0].astype(np.int64)


def _long_runs(starts: np.ndarray, stops: np.ndarray, chunk) -> bool:
    """Whether consecutive programs agree on the bounds in runs of MIN_MASKED_RUN or more, on average."""
    if chunk.active is not None:
        starts, stops = starts[chunk.active], stops[chunk.active]
    runs = 1 + int(np.count_nonzero((starts[1:] != starts[:-1]) | (stops[1:] != stops[:-1])))
    return len(stops) >= MIN_MASKED_RUN * runs


class _NoHooks:
    """The rewritten loop's hooks doing nothing: every program makes the same trips."""
    masked = compact = compacted = False

    @staticmethod
    def save(names):
        return None

    @staticmethod
    def merge(old, new, skip=()):
        return {}


class _Plain(_NoHooks):
    """``range(*args)``, as Python runs it, its values typed as the compiled loop's variable."""
    __slots__ = ("r", "var_type")

    def __init__(self, r, var_type=None):
        self.r, self.var_type = r, var_type

    def __iter__(self):
        return iter(self.r) if self.var_type is None else (induction.of(v, self.var_type) for v in self.r)


class _Divergent(Masked):
    """A loop whose programs make different numbers of trips. A trip some programs sit out runs either
    masked (their rows computed, then dropped by ``merge``) or, once at most COMPACT_AT of the programs
    still make the trips, on a sub-chunk of those programs alone (``enter``; ``leave`` puts the names back
    together after the loop): compact.py. Subclasses say which programs make trip ``self.trip``; ``active``
    is over ``cur``, the chunk running the trips."""

    def __init__(self, chunk, names=(), assigned=(), long_runs=False):
        super().__init__(chunk, names, assigned)
        self.long_runs = long_runs
        self.trip = 0
        self.cur, self.cur_rows = chunk, None           # the chunk running the trips; its rows in ``chunk``
        self.compact = False                            # the trip starts with ``enter``
        self.compacted = False                          # trips ran on a sub-chunk: ``leave`` after the loop
        self._can_compact = bool(names)
        self._fixed = None                              # the names the body only reads, over ``chunk``
        self._left: list = []                           # (rows in ``chunk``, {name: value}) as programs leave

    def _begin_trip(self, act) -> None:
        self.compact = self._fixed is None and self._can_compact or self._shrinks(act)
        if not self.compact:
            self._mask(act)

    def _shrinks(self, act) -> bool:
        return self._can_compact and self._fixed is not None and int(act.sum()) <= COMPACT_AT * len(act)

    def _mask(self, act) -> None:
        """Run this trip on ``cur`` with the programs ``act`` (bool over its rows) alone active."""
        if self.cur is self.chunk:
            everyone = self.outer if self.outer is not None else np.ones(self.chunk.size, dtype=bool)
            self.active = None if (act == everyone).all() else act
            self.chunk.set_active(act if self.active is not None else self.outer)
        else:
            self.active = None if act.all() else act
            self.cur.set_active(self.active)

    def enter(self, names: dict) -> dict:
        """At the start of a trip: the body's names cut to the programs that make it, which run it as a
        sub-chunk of their own (empty when the trip runs masked)."""
        act = self._running()
        if self._fixed is None:
            # the first trip: can every name be cut? the names the body only reads keep these values
            if not all(compact.can_take(names[n]) for n in self.names if n in names):
                self._can_compact = False
                if self.long_runs:
                    # neighbours mostly agree (causal attention's query blocks with a block pointer): running
                    # the runs of programs that agree as chunks of their own wastes no work
                    raise ChunkDiverged("a loop's trip count differs between programs", self._labels())
            else:
                reads = set(self.names) - set(self.assigned)
                self._fixed = {n: names[n] for n in reads if n in names}
        if not self._shrinks(act) or act.all():
            self._mask(act)
            return {}
        rows = np.arange(self.chunk.size) if self.cur_rows is None else self.cur_rows
        gone = ~act
        self._left.append((rows[gone], {n: compact.take(names[n], gone) if n in names else compact.UNBOUND
                                        for n in self.assigned}))
        out = {n: compact.take(names[n], act) for n in self.names + ((self.var,) if self.var else ()) if n in names}
        self.cur, self.cur_rows = self.cur.sub(act), rows[act]
        batch.switch(builder(), self.cur)
        self.active = None
        self.cur.set_active(None)
        self.compacted = True
        return out

    def leave(self, names: dict) -> dict:
        """After the loop: every name over all the programs again, each program's as it left the loop."""
        self._left.append((self.cur_rows, {n: names.get(n, compact.UNBOUND) for n in self.assigned}))
        batch.switch(builder(), self.chunk)
        self.cur, self.cur_rows = self.chunk, None
        self.chunk.set_active(self.outer)
        out = dict(self._fixed)
        for n in self.assigned:
            v = compact.assemble(n, [(rows, left[n]) for rows, left in self._left], self.chunk.size,
                                 dead=not self._read_outside(n))
            if v is not compact.UNBOUND:
                out[n] = v
        return out

    @property
    def masked(self) -> bool:
        """Some programs sit this trip out."""
        return self.active is not None

    def save(self, names: dict) -> Optional[dict]:
        return None if self.active is None else dict(names)

    def merge(self, old: Optional[dict], new: dict, skip: tuple = ()) -> dict:
        """The body's names after a trip: programs that sat it out keep their values from before it.
        ``skip``: loop variables (never read after their loops)."""
        if old is None:
            return {}
        out = {}
        for name, value in new.items():
            if name.startswith(PREFIX) or name in skip:
                continue
            before = old.get(name, _UNBOUND)
            if before is value:
                continue
            if before is _UNBOUND:
                if not self._read_outside(name):
                    out[name] = value
                    continue
                self._split(f"'{name}' is first set on a trip some programs do not make")
            out[name] = self._merge_value(name, before, value)
        return out


class MaskedRange(_Divergent):
    """``range(start, stop, step)`` per program: ``starts``/``stops`` over the chunk's programs."""
    int_type = None         # the type an int loop variable answers as (induction.py)

    def __init__(self, chunk, starts: np.ndarray, stops: np.ndarray, step: int, names=(), assigned=(),
                 long_runs=False, var=None, var_dtype=None):
        super().__init__(chunk, names, assigned, long_runs)
        self.starts, self.stops, self.step = starts, stops, step
        self.var, self.var_dtype = var, var_dtype       # var_dtype: the loop variable is a tensor (starts differ)
        self.trips = np.maximum(0, -(-(stops - starts) // step)) if step > 0 else \
            np.maximum(0, -(-(starts - stops) // -step))
        if self.outer is not None:
            self.trips = np.where(self.outer, self.trips, 0)

    def _running(self) -> np.ndarray:
        act = self.trips > self.trip
        return act if self.cur_rows is None else act[self.cur_rows]

    def _labels(self) -> np.ndarray:
        return np.unique(np.stack([self.starts, self.stops, self.trips], axis=1), axis=0,
                         return_inverse=True)[1].reshape(-1)

    def __iter__(self):
        most = int(self.trips.max(initial=0))
        try:
            for t in range(most):
                self.trip = t
                self._begin_trip(self._running())
                yield self._value(t)
        finally:
            self._end()

    def _value(self, t: int):
        """The loop variable on trip ``t``, for the programs of ``cur``."""
        if self.var_dtype is None:
            return induction.of(int(self.starts[0]) + t * self.step, self.int_type)  # every program starts alike
        starts = self.starts if self.cur_rows is None else self.starts[self.cur_rows]
        data = (starts + t * self.step).astype(np_dtype(self.var_dtype)).reshape(-1, 1)
        return tl.tensor(TensorHandle(data, self.var_dtype), self.var_dtype)


class MaskedWhile(_Divergent):
    """``while cond:`` per program, once the programs' conditions differ: a program whose condition is
    false has left the loop for good (its later conditions are evaluated masked off, like the body)."""

    def __init__(self, chunk, names=(), assigned=()):
        super().__init__(chunk, names, assigned)
        self.live: Optional[np.ndarray] = None          # over ``chunk``: still looping, once conditions differed
        self.trip = -1

    def _running(self) -> np.ndarray:
        return self.live if self.cur_rows is None else self.live[self.cur_rows]

    def _labels(self) -> np.ndarray:
        return self.live.astype(np.int64)

    def test(self, cond) -> bool:
        self.trip += 1
        if self.live is None:
            if not (isinstance(cond, tl.tensor) and varies(cond, self.cur, "biuf")):
                return bool(cond)                      # one value for every program (else the chunk splits)
            self.live = np.ones(self.chunk.size, dtype=bool) if self.outer is None else self.outer.copy()
        if isinstance(cond, tl.tensor):
            if cond.type.is_block():
                raise BatchFallback("a while condition that is a block, in a loop whose programs differ")
            c = np.asarray(cond.handle.data).reshape(-1)
            c = np.broadcast_to(c != 0, (self.cur.size,))
        else:
            c = np.full(self.cur.size, bool(cond))
        rows = np.arange(self.chunk.size) if self.cur_rows is None else self.cur_rows
        live = self.live.copy()                 # the last trip's programs stay as its events recorded them
        live[rows] &= c
        self.live = live
        act = self._running()
        if not act.any():
            self._end()
            return False
        self._begin_trip(act)
        return True


class _PlainWhile(_NoHooks):
    """A ``while`` outside a batched chunk: the condition as Python evaluates it."""

    @staticmethod
    def test(cond):
        return cond


def while_loop(names: tuple = (), assigned: tuple = (), outside: tuple = None):
    """A ``while`` loop's state: masked per program once the programs' conditions differ."""
    chunk = batch.running(builder())
    if chunk is None:
        return _PlainWhile()
    out = MaskedWhile(chunk, names, assigned)
    out.outside = outside
    return out


_UNBOUND = object()
