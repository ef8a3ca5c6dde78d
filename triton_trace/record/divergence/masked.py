"""What every masked construct of a batched chunk shares (a loop's trips, an if's sides): the chunk it runs
on, the programs that sit a part of it out, and each name's values put together per program afterwards, as
a GPU's divergent warps keep them: where a program ran the part, its new value; where it sat out, its old.

A subclass says which programs run the current part (``_running``) and how they group where the construct
cannot run masked (``_labels``): loops.py (for and while), branches.py (if). ``varies`` is the test every
rewritten construct starts with: does this scalar differ between the running programs at all?"""
from __future__ import annotations

from typing import Optional

import numpy as np

import triton.language as tl

from ...errors import BatchFallback, ChunkDiverged
from ..batch import running as batch
from ..checks import overflow_ops
from ..interp.access import TensorHandle, builder
from ..memory import provenance

MIN_MASKED_RUN = 4     # programs that agree with their neighbours, on average: fewer, and the loop is masked
# A trip that this share of the running programs makes, or less, runs on them alone. Cut as soon as a few
# programs have left: a cut takes the running programs' values once, where a masked trip computes the finished
# programs' lanes too and merges every loop value of every program (causal attention, S=2048: 0.8-0.9 s
# traced when cut at 75%, 0.45-0.6 s at 99%; measured by benchmarks/speed/bench_divergent.py).
COMPACT_AT = 0.99


def decided(cond) -> None:
    """Hand the condition of an ``if`` (or exit) that runs masked, its truth never asked, to the checks that
    follow what decides control flow (an undefined integer division: record/checks/overflow_ops.py installs
    the method while a launch runs)."""
    hook = getattr(type(cond), overflow_ops.DECIDES, None)
    if hook is not None:
        hook(cond)


def varies(x, chunk, kinds: str = "iu") -> bool:
    """Whether ``x`` is a scalar tensor (of numpy kind ``kinds``: integers) whose value differs between the
    chunk's running programs."""
    if not isinstance(x, tl.tensor) or x.type.is_block():
        return False
    d = np.asarray(x.handle.data)
    if d.ndim == 0 or d.shape[0] <= 1 or d.dtype.kind not in kinds:
        return False
    d = d.reshape(d.shape[0], -1)[:, 0]
    if chunk.active is not None:
        d = d[chunk.active]
    return len(d) > 1 and bool((d != d[0]).any())


# values compared for equality across a part's programs: == on anything else may run Triton ops
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


class Masked:
    """A construct whose parts some programs of ``chunk`` sit out; ``names``: the local names its body uses,
    ``assigned``: those it assigns."""
    var = None
    what = "a loop whose trip count differs between programs"      # for the reasons a chunk splits
    # The assigned names read anywhere outside the construct (None: all of them). A name first bound in a part
    # that some program does not run is unbound for that program; if nothing outside reads it, that program
    # never reads it at all, so its rows may hold anything.
    outside: Optional[tuple] = None

    def __init__(self, chunk, names=(), assigned=()):
        self.chunk, self.names, self.assigned = chunk, names, assigned
        self.outer = chunk.active                       # an enclosing masked construct's programs
        self.active: Optional[np.ndarray] = None        # this part's programs, when some sit out

    def _labels(self) -> np.ndarray:
        """Groups of programs that agree on the construct's parts (where it cannot run masked)."""
        raise NotImplementedError

    def _running(self) -> np.ndarray:
        """The programs that run the current part."""
        raise NotImplementedError

    def _end(self) -> None:
        self.active = None
        # a body that raised leaves a for loop's generator to the garbage collector: by then another chunk
        # may run, and only the chunk this loop belongs to, still running, may be told
        if batch.running(builder()) is self.chunk:
            self.chunk.set_active(self.outer)

    def _read_outside(self, name: str) -> bool:
        return self.outside is None or name in self.outside

    def _split(self, why: str):
        """Programs that run this part and those that do not run apart (as chunks of their own)."""
        raise ChunkDiverged(why, self._running().astype(np.int64))

    def _merge_value(self, name, before, value):
        """``name``'s value after the part: ``value`` for the programs in ``active``, ``before`` for the others
        (their provenance and overflow tags following their lanes); a plain value must not differ."""
        if isinstance(value, tl.tensor) and isinstance(before, tl.tensor) and \
                isinstance(value.handle, TensorHandle) and isinstance(before.handle, TensorHandle):
            if value.type != before.type:
                raise BatchFallback(f"'{name}' changes type in {self.what}")
            new_d, old_d = value.handle.data, before.handle.data
            keep = self.active.reshape((-1,) + (1,) * (max(np.ndim(new_d), np.ndim(old_d)) - 1))
            data = np.where(keep, new_d, old_d).astype(np.asarray(new_d).dtype, copy=False)
            h = TensorHandle(data, value.handle.dtype)
            origin = provenance.origin(value.handle)
            if origin is not None and origin == provenance.origin(before.handle):
                provenance.tag(h, origin)
            # the overflow tags follow their lanes: the trip's for the programs that ran it
            (c_new, l_new), (c_old, l_old) = (overflow_ops._lanes_of(x.handle, data.shape) for x in (value, before))
            if c_new is not None or c_old is not None:
                none = np.zeros(data.shape, dtype=bool)
                ran = none if l_new is None else l_new & keep
                sat = none if l_old is None else l_old & ~keep
                if ran.any() and sat.any() and c_new is not c_old:
                    # one tag holds one cause: two programs' different overflows cannot both be kept
                    raise BatchFallback(f"integers wrapped differently in programs of {self.what}")
                if ran.any() or sat.any():
                    setattr(h, overflow_ops.TAG, (c_new if ran.any() else c_old, ran | sat))
            return tl.tensor(h, value.type)
        if isinstance(value, tuple) and type(before) is type(value) and len(before) == len(value) and \
                not hasattr(value, "_fields"):
            return type(value)(self._merge_value(name, b, v) for b, v in zip(before, value))
        if isinstance(value, tl.constexpr) and isinstance(before, tl.constexpr):
            b, v = before.value, value.value
        else:
            b, v = before, value
        # only plain values are compared: == on anything else may run Triton ops (tensors inside)
        if not (type(b) is type(v) and isinstance(v, _PLAIN) and b == v):
            self._split(f"'{name}' holds a value that differs between trips, which programs that sit one out "
                        f"would keep")
        return value
