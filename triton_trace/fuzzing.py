"""Shape fuzzing with shrinking: ``triton_trace.fuzz(run, reference, dims={"n": (1, 4096)}, blocks=(128,))``.

Kernel bugs hide in sizes nobody tried: one past a block, a row length that is not a power of two, a
non-contiguous view. ``fuzz`` draws problem shapes with Hypothesis (sizes around the kernel's block sizes,
primes, powers of two and anything in range; memory layouts; dtypes), runs ``run(case)`` with every launch
traced, and fails a case whose launches have findings or whose outputs differ from ``reference(case)``.
Hypothesis then shrinks the failure to the smallest failing case, reports it with a line that replays it
(pasted, it raises the same failure), and keeps it in its example database so the next run tries it first.
A ``seed`` draws the same cases every run; the saved failures of this run's target come first either way.

``run(case)`` builds its inputs with ``case.make(shape)`` (random values, the drawn dtype and layout),
launches the kernel and returns the outputs (a tensor or a tuple of them); ``reference(case)`` returns
what they should be, built from the same ``case.make`` calls (they are seeded by the case).
``@triton_trace.fuzz.given(dims=..., ...)`` turns a test function ``test(case)`` into such a run inside
pytest. Hypothesis is needed only when fuzzing: ``pip install triton-trace[fuzz]``.
"""
from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from .errors import FuzzFailure, TraceUsageError

LAYOUTS = ("contiguous", "transposed", "sliced")
PRIMES = (3, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521)


@dataclass
class Case:
    """One drawn problem: sizes by name, the dtype and memory layout of the inputs, and a seed."""
    dims: dict
    dtype: str = "float32"
    layout: str = "contiguous"
    seed: int = 0
    _made: int = field(default=0, repr=False)

    def __getitem__(self, name: str) -> int:
        return self.dims[name]

    def make(self, shape: Sequence[int], dtype: Optional[torch.dtype] = None, fill: str = "randn") -> torch.Tensor:
        """A tensor of ``shape`` with this case's values, dtype and layout: ``transposed`` stores a 2-D (or
        higher) tensor with its last two dimensions swapped in memory; ``sliced`` is a view into a larger
        buffer, with a storage offset and padded rows. The n-th call of a case always gives the same values."""
        shape = tuple(int(s) for s in shape)
        dt = dtype or getattr(torch, self.dtype)
        gen = torch.Generator().manual_seed(self.seed * 1000 + self._made)
        self._made += 1

        def values(s):
            if fill == "zeros":
                return torch.zeros(s, dtype=dt)
            if dt.is_floating_point:
                return torch.randn(s, generator=gen).to(dt)
            return torch.randint(-100, 100, s, generator=gen).to(dt)
        if self.layout == "transposed" and len(shape) >= 2:
            return values(shape[:-2] + (shape[-1], shape[-2])).transpose(-1, -2)
        if self.layout == "sliced":
            padded = shape[:-1] + (shape[-1] + 3,) if shape else shape
            big = values(tuple(s + 1 for s in padded[:-1]) + padded[-1:]) if padded else values(())
            view = big[tuple(slice(1, None) for _ in padded[:-1]) + (slice(2, 2 + shape[-1]),)] if shape else big
            return view
        return values(shape)

    def replay(self, run: str = "run", reference: Optional[str] = None, kinds=None) -> str:
        """The line that runs this case again: ``run`` and ``reference`` are the names to call them by."""
        extra = (f", reference={reference}" if reference else "") + (f", kinds={sorted(kinds)!r}" if kinds else "")
        return (f"triton_trace.fuzz.replay({run}, {self.dims!r}, dtype={self.dtype!r}, layout={self.layout!r}, "
                f"seed={self.seed}{extra})")


def _sizes(lo: int, hi: int, blocks: Sequence[int]):
    from hypothesis import strategies as st
    special = {lo, hi, 1, 2}
    for b in blocks:
        special |= {b - 1, b, b + 1, 2 * b - 1, 2 * b + 1, 3 * b}
    special |= set(PRIMES) | {1 << k for k in range(31)}
    special = sorted(v for v in special if lo <= v <= hi)
    # integers first: Hypothesis shrinks a one_of toward its first branch, and integers shrink to the
    # exact smallest failing size (the special sizes are drawn as often)
    return st.one_of(st.integers(lo, hi), st.sampled_from(special))


def _compare(got, want, case: Case) -> Optional[str]:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for i, (g, w) in enumerate(zip(got, want)):
        try:
            torch.testing.assert_close(g, w, equal_nan=True)
        except AssertionError as e:
            return f"output {i} differs from the reference: {str(e).splitlines()[0]}"
    return None


def check_case(run: Callable, reference: Optional[Callable], case: Case, kinds=None) -> Optional[str]:
    """Run one case traced; what failed (findings, a mismatch, an error), or None."""
    from . import analyze, current_trace, reset, trace_all
    reset()
    try:
        with trace_all():
            out = run(case)
        trace = current_trace()
    except Exception as e:  # the kernel or the harness failed on this shape: that is a finding too
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    finally:
        reset()
    report = analyze(trace, layouts="model", what_if=False)     # findings only: no compile, no replays
    found = [f for f in report.findings if kinds is None or f.kind in kinds]
    if found:
        return "findings: " + "; ".join(f"{f.kind} in '{f.kernel}' at line {f.line}: {f.message}" for f in found[:3])
    if reference is not None:
        return _compare(out, reference(Case(case.dims, case.dtype, case.layout, case.seed)), case)
    return None


def fuzz(run: Callable, reference: Optional[Callable] = None, *, dims: dict, blocks: Sequence[int] = (),
         dtypes: Sequence[str] = ("float32",), layouts: Sequence[str] = ("contiguous",), kinds=None,
         max_examples: int = 100, seed: Optional[int] = 0, database: Optional[str] = ".hypothesis/triton_trace"):
    """Fuzz ``run`` over problem shapes (see the module docstring). ``dims``: name -> (low, high) sizes;
    ``blocks``: the kernel's block sizes, to draw around; ``layouts`` from ``contiguous``, ``transposed``,
    ``sliced``; ``kinds``: finding kinds that fail a case (default: all). ``seed=None`` draws freshly each
    run; ``database=None`` keeps no failures between runs. Raises ``FuzzFailure`` with the smallest failing
    case; returns a summary dict when every case passed."""
    try:
        from hypothesis import given, seed as seeded, settings, strategies as st, HealthCheck, Phase
    except ImportError:
        raise TraceUsageError("triton_trace.fuzz needs Hypothesis: pip install 'triton-trace[fuzz]'") from None
    bad_layouts = set(layouts) - set(LAYOUTS)
    if not dims or bad_layouts:
        raise TraceUsageError(f"fuzz(dims=...) names at least one size range, and layouts come from {LAYOUTS}; "
                              f"got dims={dims!r}, layouts={list(layouts)!r}")
    strategy = st.builds(
        Case,
        dims=st.fixed_dictionaries({name: _sizes(int(lo), int(hi), blocks) for name, (lo, hi) in dims.items()}),
        dtype=st.sampled_from(list(dtypes)), layout=st.sampled_from(list(layouts)), seed=st.integers(0, 3))
    failures: list = []
    ran = [0]
    saved = _Saved(database, _target(run, reference, dims, layouts, dtypes, kinds)) if database else None
    replay_line = lambda case: case.replay(_name(run, "run"), _name(reference, "reference"), kinds)
    t0 = time.perf_counter()
    for case in saved.cases() if saved else ():      # the failures of earlier runs first, as they were shrunk
        ran[0] += 1
        why = check_case(run, reference, case, kinds)
        if why is None:
            saved.forget(case)                          # fixed since
            continue
        err = _failure(case, why, replay_line(case))
        err.examples, err.first_failure = ran[0], case
        raise err

    # database=None: Hypothesis refuses one beside a seed (``@seed`` and derandomize); _Saved keeps failures
    @settings(max_examples=max_examples, deadline=None, print_blob=False, database=None,
              suppress_health_check=list(HealthCheck), phases=list(Phase))
    @given(strategy)
    def prop(case):
        ran[0] += 1
        why = check_case(run, reference, case, kinds)
        if why is not None:
            failures.append((case, why))
            raise AssertionError(why)

    try:
        (seeded(seed)(prop) if seed is not None else prop)()
    except AssertionError:
        case, why = failures[-1]          # the last failure Hypothesis saw is the shrunk one it reports
        if saved:
            saved.keep(case)
        err = _failure(case, why, replay_line(case))
        err.examples, err.first_failure = ran[0], failures[0][0]
        raise err from None
    return {"examples": ran[0], "seconds": round(time.perf_counter() - t0, 3)}


def _failure(case: Case, why: str, line: str) -> FuzzFailure:
    return FuzzFailure(f"smallest failing case: {case.dims}, dtype {case.dtype}, layout {case.layout}, "
                       f"seed {case.seed}: {why}\n  replay it: {line}", case)


def _name(fn: Optional[Callable], default: str) -> Optional[str]:
    """What the printed replay line calls ``fn``: its own name when it has one (a lambda does not), and the
    test function itself for ``fuzz.given`` (its decorated name is the whole fuzz)."""
    if fn is None:
        return None
    test = getattr(fn, "_fuzz_test", None)
    if test is not None:
        return f"{test.__name__}.__wrapped__" if test.__name__.isidentifier() else default
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else default


def _target(*parts) -> bytes:
    """A key of the fuzz target: the run's and the reference's code and the drawn space."""
    import hashlib
    import inspect
    h = hashlib.sha256()
    for p in parts:
        fn = getattr(p, "_fuzz_test", p)
        if callable(fn):
            try:
                p = inspect.getsource(fn)
            except (OSError, TypeError):        # defined where no source is kept: its name stands in
                p = getattr(fn, "__qualname__", "")
            p = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}\n{p}"
        h.update(repr(p).encode() + b"\0")
    return b"triton_trace.fuzz." + h.hexdigest()[:32].encode()


class _Saved:
    """The shrunk failures of one fuzz target, in an example database folder under a key of the target (its
    code and drawn space). Not Hypothesis's own use of it: a seed turns that off, and it keys entries by the
    test function, the one inner function every fuzz() shares, so a passing target would drop another's."""

    def __init__(self, path: str, key: bytes):
        from hypothesis.database import DirectoryBasedExampleDatabase
        self.db, self.key = DirectoryBasedExampleDatabase(path), key

    @staticmethod
    def _value(case: Case) -> bytes:
        return json.dumps([case.dims, case.dtype, case.layout, case.seed], sort_keys=True).encode()

    def cases(self) -> list:
        out = []
        for value in sorted(self.db.fetch(self.key)):
            try:
                dims, dtype, layout, seed = json.loads(value)
                out.append(Case({str(k): int(v) for k, v in dims.items()}, str(dtype), str(layout), int(seed)))
            except (ValueError, TypeError, AttributeError):     # not ours, or damaged: tried no more
                self.db.delete(self.key, value)
        return sorted(out, key=lambda c: (sorted(c.dims.items()), c.dtype, c.layout, c.seed))

    def keep(self, case: Case) -> None:
        self.db.save(self.key, self._value(case))

    def forget(self, case: Case) -> None:
        self.db.delete(self.key, self._value(case))


def replay(run: Callable, dims: dict, dtype: str = "float32", layout: str = "contiguous", seed: int = 0,
           reference: Optional[Callable] = None, kinds=None) -> None:
    """Run one case again, traced and checked, as ``FuzzFailure`` prints it: raises the same FuzzFailure when
    it still fails, returns None when it passes."""
    case = Case(dict(dims), dtype, layout, seed)
    why = check_case(run, reference, case, kinds)
    if why is not None:
        raise _failure(case, why, case.replay(_name(run, "run"), _name(reference, "reference"), kinds))


def given(*, dims: dict, reference: Optional[Callable] = None, **options):
    """``@triton_trace.fuzz.given(dims={"n": (1, 4096)}, blocks=(128,))`` above ``def test_x(case): ...``:
    the test body is the run (it launches the kernel and returns its outputs); pytest runs the fuzz."""
    def decorate(test):
        @functools.wraps(test)
        def wrapper(*args, **kwargs):
            def run(case):
                return test(case, *args, **kwargs)
            run._fuzz_test = test
            return fuzz(run, reference, dims=dims, **options)
        wrapper.__signature__ = _without_case(test)
        return wrapper
    return decorate


def _without_case(fn):
    import inspect
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


fuzz.given = given
fuzz.replay = replay
fuzz.Case = Case
