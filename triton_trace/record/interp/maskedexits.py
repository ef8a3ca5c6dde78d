"""A kernel's early ``return`` that the programs of a batched chunk take differently, run as a GPU runs it:
the programs that leave sit out the rest of the kernel, the others go on, all in the one chunk.

``if n_tokens == 0: return`` (an MoE expert without tokens), ``if row >= n_rows: return`` of a ragged
batch, a split-K program with nothing to add: without this, programs that leave and programs that stay
split the chunk into runs that agree, and where they alternate the runs are a program or two long.
looprewrite.py turns such a statement of the kernel's own body (not inside a loop or a branch, not in a
helper, where ``return`` only leaves the helper) into::

    X = c
    if X:                           # what the side does before it returns (a masked branch, maskedbranches.py)
        A
    if _triton_trace_exit(X):       # every running program leaves: return; some do: they sit out the rest
        return

From the exit on, ``Chunk.active`` leaves out the programs that returned, exactly as a masked loop's trip
leaves out the programs past their last trip (maskedloops.py): their memory ops have no lanes, the recorder
leaves them out of every later event, their non-finite or overflowing values are not reported, and later
loops and branches count only the running programs. The rest of the kernel then still computes every
row of the chunk; where most of the programs leave, in long runs (a ragged batch's last rows: SPLIT_RUN), the
chunk splits into the runs that agree instead, as before: those that leave then compute nothing at all, for the
price of running the chunk's first ops again per run (a few programs that leave, or many that alternate,
cost less masked).
"""
from __future__ import annotations

import numpy as np

import triton.language as tl
from triton.runtime import interpreter as _ti

from . import batch
from .maskedloops import PREFIX, _varies

EXIT = PREFIX + "exit"
# programs per run of those that leave or stay, on average, from which a chunk most of whose programs leave
# splits into the runs rather than masking them: runs this long are cheap to start again, shorter ones are
# many (a run of one program runs alone)
SPLIT_RUN = 32


def leave(cond):
    """The rewritten exit's condition: true when every running program returns here (the ``if`` returns),
    false when none does or some do (those stop running: the chunk's active programs lose them). A plain
    value, or one the running programs agree on, is handed back as it is: the ``if`` decides as before."""
    chunk = batch.running(_ti.interpreter_builder)
    if chunk is None or chunk.root is not chunk or not isinstance(cond, tl.tensor) or cond.type.is_block() or \
            not _varies(cond, chunk, "biuf"):
        return cond
    taken = np.asarray(cond.handle.data).reshape(chunk.size, -1)[:, 0] != 0   # NaN is true, as bool(nan)
    running = taken if chunk.active is None else taken[chunk.active]
    runs = 1 + int(np.count_nonzero(running[1:] != running[:-1]))
    if len(running) >= SPLIT_RUN * runs and 2 * int(running.sum()) > len(running):
        return cond                       # bool(cond) splits the chunk into the runs that agree
    chunk.set_active(~taken if chunk.active is None else chunk.active & ~taken)
    return False
