"""A kernel's early ``return`` that the programs of a batched chunk take differently, run as a GPU runs it:
the programs that leave sit out the rest of the kernel, the others go on, all in the one chunk.

``if n_tokens == 0: return`` (an MoE expert without tokens), ``if start >= seq_len: return`` of a ragged
batch, a split-K program with nothing to add: without this, programs that leave and programs that stay
split the chunk into runs that agree, and where they alternate the runs are a program or two long.
divergence/rewrite.py turns such a statement of the kernel's own body (not inside a loop or a branch, not in a
helper, where ``return`` only leaves the helper) into::

    X = c
    if X:                           # what the side does before it returns (a masked branch, divergence/branches.py)
        A
    if _triton_trace_exit(X):       # every running program leaves: return; some do: they stop running
        return
    C = _triton_trace_cut(locals(), names=(...))    # the names read later, cut to the programs left
    if 'x' in C: x = C['x']         # ... for each of them

From the exit on, the programs that returned are out of the chunk. While most of the programs stay, they
are masked (``Chunk.active``), as a masked loop's trip leaves out the programs past their last trip
(divergence/loops.py): their memory ops have no lanes, the recorder leaves them out of every later event, their
non-finite or overflowing values are not reported, and later loops and branches count only the running
programs. Once COMPACT_AT of them or fewer stay, the rest of the kernel runs on those alone
(``batch.Chunk.sub``, every name read later cut to their rows: compact.py), so it computes nothing for the
programs that left (values that cannot be cut, a block pointer, keep the mask instead). Where most of the
programs leave in long runs (a ragged batch's last rows: SPLIT_RUN), the chunk splits into the runs that
agree instead, as before: the runs that leave then compute nothing at all, at the price of running the
chunk's first ops again per run.
"""
from __future__ import annotations

import numpy as np

import triton.language as tl

from ..batch import compact, running as batch
from ..interp.access import builder
from .masked import COMPACT_AT, decided, varies   # COMPACT_AT: this module's own, to tune
# programs per run of those that leave or stay, on average, from which a chunk most of whose programs leave
# splits into the runs rather than masking them: runs this long are cheap to start again, shorter ones are
# many (a run of one program runs alone)
SPLIT_RUN = 32
_NOTHING: dict = {}


def leave(cond):
    """The rewritten exit's condition: true when every running program returns here (the ``if`` returns),
    false when none does or some do (those stop running; ``cut`` may then cut the chunk to the others). A
    plain value, or one the running programs agree on, is handed back as it is: the ``if`` decides as before."""
    chunk = batch.running(builder())
    if chunk is None or not isinstance(cond, tl.tensor) or cond.type.is_block() or \
            not varies(cond, chunk, "biuf"):
        return cond
    taken = np.asarray(cond.handle.data).reshape(chunk.size, -1)[:, 0] != 0   # NaN is true, as bool(nan)
    running = taken if chunk.active is None else taken[chunk.active]
    leaving = int(running.sum())
    if leaving in (0, len(running)):      # values differ, truth does not (``if n: return``)
        return leaving > 0
    runs = 1 + int(np.count_nonzero(running[1:] != running[:-1]))
    if len(running) >= SPLIT_RUN * runs and 2 * leaving > len(running):
        return cond                       # bool(cond) splits the chunk into the runs that agree
    decided(cond)
    stay = ~taken if chunk.active is None else chunk.active & ~taken
    chunk.set_active(stay)
    if len(running) - leaving <= COMPACT_AT * chunk.size:
        chunk.exit_keep = stay
    return False


def cut(names: dict, wanted: tuple = ()) -> dict:
    """After an exit: the names ``wanted`` (those read later) cut to the programs still running, which run
    the rest of the kernel as a chunk of their own; nothing (the exit's mask stays) when the exit left most
    programs running or some value cannot be cut."""
    chunk = batch.running(builder())
    if chunk is None or chunk.exit_keep is None:
        return _NOTHING
    keep, chunk.exit_keep = chunk.exit_keep, None
    if not all(compact.can_take(names[n]) for n in wanted if n in names):
        return _NOTHING
    out = {n: compact.take(names[n], keep) for n in wanted if n in names}
    sub = chunk.sub(keep)
    batch.switch(builder(), sub)
    sub.set_active(None)
    return out
