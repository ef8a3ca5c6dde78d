"""Running a launch's grid: chunks of programs in one numpy pass where that gives the same result, one
program at a time where it does not (or when asked)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..errors import BatchFallback, ChunkDiverged, ChunkRetry
from . import frames, parallel
from .batch import chunk as batch
from .interp import hooks, semantics
from .memory import provenance
from .options import DEFAULT_CHUNK

GROW_LANES = 1 << 20         # batch=True: after the first chunk, chunks of up to this many lanes per memory op
MAX_CHUNK = 1024             # (kernels of small blocks: fewer, larger numpy passes) and at most this many programs
MIN_CHUNK = 8                # a chunk that falls back halves the next one, down to this size
GIVE_UP_AFTER = 2            # consecutive fallbacks at MIN_CHUNK: run the rest of the launch one by one
PEEL_LIMIT = 4               # a chunk that diverged this often in a row at its first program alone: the rest one by one
RETRY = "retry"              # _run_chunk's answer when the chunk should run batched again (see ChunkRetry)


class ProgramFailure(Exception):
    """A program raised; carries its id and the user's source line to the session."""

    def __init__(self, pid, file, line, cause):
        super().__init__(str(cause))
        self.pid, self.file, self.line, self.cause = pid, file, line, cause


def program_order(grid: tuple) -> np.ndarray:
    """Every program id of ``grid`` in the order Triton's interpreter runs them (x outermost)."""
    x, y, z = np.meshgrid(np.arange(grid[0]), np.arange(grid[1]), np.arange(grid[2]), indexing="ij")
    return np.stack([x.reshape(-1), y.reshape(-1), z.reshape(-1)], axis=1).astype(np.int32)


@dataclass
class Schedule:
    """Where a launch's run of chunks stands: the next program (its launch position), the programs per chunk,
    the consecutive fallbacks at the smallest chunk, whether chunks still run batched and whether the chunk
    size may still grow. The chunks that run from a schedule depend on it alone, so a range of programs run
    from a copy of it in another process (record/parallel/) runs the chunks the launch runs there."""
    start: int
    chunk: int
    misses: int = 0
    batched: bool = False
    grow: bool = False

    def state(self) -> tuple:
        """Everything but the position: two schedules at one position with one state run the same chunks."""
        return (self.chunk, self.misses, self.batched, self.grow)


class Grid:
    """One launch's programs, run chunk by chunk inside the interpreter's scope (``run_grid`` makes it)."""

    def __init__(self, kernel, call_args, batched_args, order, builder, rec, proxy, on_done):
        self.kernel, self.call_args, self.batched_args = kernel, call_args, batched_args
        self.order, self.total = order, len(order)
        self.builder, self.rec, self.proxy, self.on_done = builder, rec, proxy, on_done

    def advance(self, s: Schedule, until: int) -> None:
        """Run chunks from ``s`` up to launch position ``until``, stopping early before a batched chunk that
        would end past it: a chunk is never cut short, so every chunk run is one the launch runs."""
        while s.start < until:
            n = min(s.chunk, self.total - s.start) if s.batched else until - s.start
            if s.start + n > until:
                return
            self.step(s, n)

    def step(self, s: Schedule, n: int) -> None:
        """Run the ``n`` programs from ``s.start``: one batched chunk where ``s`` batches (one by one where it
        falls back, the next chunk then smaller), else one by one."""
        rec, start, total = self.rec, s.start, self.total
        if s.batched and n > 1:
            why = _run_batched(self.kernel, self.batched_args, self.call_args, self.order[start:start + n], start,
                               self.builder, rec, self.proxy, self.on_done)
            if why is None:
                s.start, s.misses = start + n, 0
                if s.grow:             # (not for programs that diverge: each split re-runs the rest)
                    ran = rec.execution
                    s.chunk, s.grow = (_grown(s.chunk, ran.widest) if not ran.diverged_chunks else s.chunk), False
                return
            rec.note_fallback(start, n, why)
            # Programs that share memory often do so only within groups (a lock per group of rows, a
            # special first program): smaller chunks may avoid them. An op that is not batched will
            # not be in any chunk.
            s.misses = s.misses + 1 if s.chunk <= MIN_CHUNK else 0
            s.chunk = max(MIN_CHUNK, s.chunk // 2)
            if s.misses >= GIVE_UP_AFTER or "not batched" in why:
                s.batched = False
                rec.note_fallback(start + n, total - start - n, "batching stopped after repeated fallbacks")
        _run_sequential(self.kernel, self.call_args, self.order[start:start + n], self.builder, rec, self.on_done)
        s.start = start + n


def run_grid(fn, bound: dict, grid: tuple, memory, rec, on_done: Optional[Callable] = None,
             chunk: int = DEFAULT_CHUNK, debug: bool = False, grow: bool = False,
             numerics: str = "interpreter", workers: Optional[int] = 1, num_warps: int = 4) -> None:
    """Run every program of ``grid`` through the interpreter, recording into ``rec``.

    ``chunk`` > 1 runs that many programs at once where the result is provably the same as running
    them one by one (``grow``: more after the first chunk, where its memory ops' blocks are small, see
    GROW_LANES); ``on_done(n)`` is told after every n programs completed; ``debug`` checks
    ``tl.device_assert``; ``numerics="compiled"`` computes as the compiled kernel does (interp/semantics.py);
    ``workers`` > 1 (None: the cores this process may use that are idle) lets ranges of the programs run in
    forked processes where that pays and gives the same recording (record/parallel/). Raises
    ``ProgramFailure`` (carrying the program id and source line) when a program raises.
    """
    constexprs = hooks.constexpr_names(fn, list(bound))
    host = {name: (v if name in constexprs else memory.to_host(v, name)) for name, v in bound.items()}
    kernel = hooks.rewritten(fn, kernel=True)
    order = program_order(grid)
    total = len(order)
    with hooks.interpreter_scope(fn, rec, debug, numerics, num_warps) as proxy:
        call_args = {name: (hooks.constexpr_arg(v) if name in constexprs else semantics.kernel_arg(v))
                     for name, v in host.items()}
        for name, v in host.items():
            if name not in constexprs:
                _tag_pointers(v, call_args[name], memory)
        builder = hooks.builder()
        builder.set_grid_dim(*grid)
        batched_args = None
        if chunk > 1 and total > 1:
            try:
                batched_args = batch.batch_args(call_args)
            except BatchFallback as e:
                rec.note_fallback(0, total, str(e))
        g = Grid(kernel, call_args, batched_args, order, builder, rec, proxy, on_done)
        s = Schedule(0, chunk, batched=batched_args is not None, grow=grow)
        if total > 1 and parallel.wanted(workers):
            parallel.run(g, s, workers)
        g.advance(s, total)


def _grown(chunk: int, widest: int) -> int:
    """Programs per chunk for blocks of at most ``widest`` lanes per program (a power of two, never fewer)."""
    target = min(MAX_CHUNK, GROW_LANES // max(widest, 1))
    return max(chunk, 1 << (target.bit_length() - 1)) if target >= 1 else chunk


def _tag_pointers(host, arg, memory) -> None:
    """Tag each pointer argument with the tensor it points into (see provenance.py)."""
    if isinstance(host, tuple) and isinstance(arg, tuple):
        for h, a in zip(host, arg):
            _tag_pointers(h, a, memory)
    elif hasattr(host, "data_ptr") and hasattr(arg, "handle"):
        provenance.tag(arg.handle, memory.index_of_host(host))


def _run_sequential(kernel, call_args, pids, builder, rec, on_done) -> None:
    for p in pids:
        pid = (int(p[0]), int(p[1]), int(p[2]))
        builder.set_grid_idx(*pid)
        rec.begin_program(pid)
        try:
            kernel(**call_args)
        except Exception as e:  # re-raised with the program and line attached
            file, line = frames.where_in_traceback(e.__traceback__)
            raise ProgramFailure(pid, file, line, e) from e
        rec.end_program()
        if on_done is not None:
            on_done(1)


def _run_batched(kernel, batched_args, call_args, pids, first: int, builder, rec, proxy, on_done) -> Optional[str]:
    """Run ``pids`` (launch positions ``first``...) batched. Where the programs diverge (a branch or a loop
    bound that differs between them), the chunk is undone and its runs of consecutive programs that agree
    there run as chunks of their own, in launch order (a run may diverge again later, and is split again):
    exactly the chunking that would have been chosen had the boundaries been known, so results and traces
    stay those of one program at a time. Returns None when every program ran, else why the chunk must run
    one program at a time (nothing of it kept). Runs within runs are stepped here, not recursed into: a spin
    lock splits a chunk into one program and the rest, again and again: after PEEL_LIMIT such splits in a
    row the rest runs one by one (each split re-runs the whole rest up to where it diverges, so a chunk of n
    would cost n batched attempts, O(n^2) program-steps, for programs that run one at a time anyway)."""
    stack = [_batched(kernel, batched_args, call_args, pids, first, builder, rec, proxy, on_done)]
    result = None
    while stack:
        try:
            sub, at, peeled = stack[-1].send(result)
        except StopIteration as done:
            stack.pop()
            result = done.value
            continue
        stack.append(_batched(kernel, batched_args, call_args, sub, at, builder, rec, proxy, on_done, peeled))
        result = None
    return result


def _batched(kernel, batched_args, call_args, pids, first: int, builder, rec, proxy, on_done, peeled: int = 0):
    """``_run_batched`` of one chunk, as a generator: it yields each run of agreeing programs that is to run
    batched as (programs, launch position, splits in a row at the first program alone) and is sent back what
    running it returned. ``peeled``: how many such splits in a row made this chunk."""
    why = _run_chunk(kernel, batched_args, pids, builder, rec, proxy)
    for _ in range(2):                   # the same chunk again, keeping the lanes it lacked, or checking
        if why is RETRY:                 # every float operation (record/checks/nonfinite.py): each asks once
            why = _run_chunk(kernel, batched_args, pids, builder, rec, proxy)
    if why is RETRY:
        why = "the exact check lacked lanes three times"
    if why is None:
        if on_done is not None:
            on_done(len(pids))
        return None
    if not isinstance(why, ChunkDiverged):
        return why
    rec.execution.diverged_chunks += 1
    alone = 0
    runs = np.split(np.arange(len(pids)), np.flatnonzero(np.diff(why.labels)) + 1)
    # the first program alone and the rest agreeing (a spin lock: the first takes it, the rest wait)
    peel = peeled + 1 if len(runs) == 2 and len(runs[0]) == 1 else 0
    for run in runs:
        sub, at = pids[run], first + int(run[0])
        if len(sub) == 1:
            inner = "one program"
        elif peel >= PEEL_LIMIT:
            inner = f"the chunk split at its first program alone {peel} times in a row (a spin lock)"
        else:
            inner = yield sub, at, peel
        if inner is None:
            continue
        if len(sub) == 1:
            alone += 1
        else:
            rec.note_fallback(at, len(sub), inner)
        _run_sequential(kernel, call_args, sub, builder, rec, on_done)
    if alone:
        rec.note_fallback(first, alone, f"{alone} of {len(pids)} programs differ from both neighbours at a branch "
                                        f"or loop bound and ran one at a time")
    return None


def _run_chunk(kernel, batched_args, pids, builder, rec, proxy):
    """Run ``pids`` at once. Returns None when done, else why the chunk was undone (nothing of it kept):
    RETRY, the ChunkDiverged with its labels, or a message."""
    mark = rec.mark()
    proxy.begin_log()
    why = None
    chunk = batch.start(builder, pids)
    chunk.on_active = rec.set_active          # masked loops tell the recorder which programs run
    try:
        builder.set_grid_idx(*(int(v) for v in pids[0]))
        rec.begin_chunk(pids, batched=True)
        kernel(**batched_args)
        rec.end_chunk()
        proxy.commit()                        # the held stores (proxy._hold), once the chunk is kept
    except ChunkRetry:
        why = RETRY
    except ChunkDiverged as e:
        why = batch.widen(builder, e)         # raised on a masked loop's sub-chunk: labels for the whole chunk
    except BatchFallback as e:
        why = str(e)
    except Exception as e:  # the programs re-run one by one, where the failing one reports itself
        e = hooks.unwrap_interpreter_error(e)
        why = f"{type(e).__name__}: {e}"
    except BaseException:
        _undo(rec, proxy, mark)
        raise
    finally:
        chunk.on_active = None                # a loop left unfinished by an error tells no one later
        batch.stop(builder, chunk)
        rec.abort_chunk()
    if why is not None:
        _undo(rec, proxy, mark)
    proxy.end_log()
    return why


def _undo(rec, proxy, mark) -> None:
    """Put back what the chunk wrote and forget what it recorded."""
    proxy.rollback()
    rec.rollback(mark)
