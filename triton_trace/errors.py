"""Every error triton_trace raises. Each message names the thing the user has to fix."""
from __future__ import annotations

from typing import Optional

from triton.compiler.errors import CompilationError
from triton.errors import TritonError
from triton.runtime.errors import InterpreterError


class TritonTraceError(Exception):
    """Base class of all triton_trace errors."""


class UnsupportedTritonVersion(TritonTraceError, ImportError):
    """The installed Triton is outside the range whose interpreter internals we hook."""


class TraceUsageError(TritonTraceError, ValueError):
    """A bad argument to the public API (decorator options, grid, kernel arguments, program filters)."""


class ProgramError(TritonTraceError, InterpreterError):
    """An exception inside one program of a traced kernel.

    A drop-in for Triton's interpreter: it is an ``InterpreterError`` (so a ``triton.TritonError``) whose
    ``__cause__`` is the original exception, as the plain interpreter raises. ``program_error`` also makes
    it an instance of the cause's own class where that is a Triton error, and a ``CompilationError`` where
    Triton's front end refused the kernel (what a compiled launch raises). The launch it happened in is
    kept in the current trace with every program that completed (and the ops the failing program recorded
    before it failed), so nothing recorded is lost.
    """

    def __init__(self, kernel: str, program: tuple, file: str | None, line: int | None, cause: BaseException):
        self.kernel = kernel
        self.program = tuple(program)
        self.file = file
        self.line = line
        self.cause = cause
        where = f"{file}:{line}" if line else "an unknown line"
        self._set_message(
            f"kernel '{kernel}' failed in program {self.program} at {where}: "
            f"{type(cause).__name__}: {cause}. The programs that completed are kept in "
            f"triton_trace.current_trace().")

    def _set_message(self, message: str) -> None:
        # InterpreterError and CompilationError print their own attributes: keep all three in step
        Exception.__init__(self, message)
        self.error_message = self.message = message

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        # the mixed-in classes are made at run time: pickle (pytest-xdist, multiprocessing) the plain one
        return _rebuild, (self.args[0],)


def _rebuild(message: str) -> "TritonTraceError":
    return TritonTraceError(message)


class UnsupportedOp(ProgramError):
    """A Triton operation that Triton's interpreter, and so the tracer, cannot run (inline assembly,
    extern elementwise functions, block pointers on Triton releases that removed them), named with the
    program and source line that called it."""

    def __init__(self, kernel: str, program: tuple, file: str | None, line: int | None, cause: BaseException,
                 op: str):
        self.op = op
        super().__init__(kernel, program, file, line, cause)
        where = f"{file}:{line}" if line else "an unknown line"
        name = op if op.startswith(("__nv_", "libdevice")) else f"tl.{op}"
        self._set_message(
            f"kernel '{kernel}' calls {name} at {where} (program {self.program}), which triton_trace cannot run "
            f"on the CPU ({cause}). Replace {name} with plain tl operations, or put it behind a tl.constexpr flag "
            f"that is off when tracing (see README, \"Supported Triton features\"). "
            f"The programs that completed are kept in triton_trace.current_trace().")


_MIXED: dict = {}


def program_error(kernel: str, program: tuple, file: Optional[str], line: Optional[int], cause: BaseException,
                  op: Optional[str] = None, front_end: bool = False) -> ProgramError:
    """The error a failing program raises: a ``ProgramError`` (``UnsupportedOp`` when ``op`` names what
    cannot run) that is also an instance of what Triton would raise: the cause's class when it is a
    ``TritonError``, and ``CompilationError`` when ``front_end`` (Triton's language module refused the
    kernel, which a compiled launch reports at compile time)."""
    base = ProgramError if op is None else UnsupportedOp
    extra = []
    if isinstance(cause, TritonError) and not isinstance(cause, InterpreterError):
        extra.append(type(cause))
    if front_end and not any(issubclass(c, CompilationError) for c in extra):
        extra.append(CompilationError)
    cls = base
    if extra:
        key = (base,) + tuple(extra)
        cls = _MIXED.get(key)
        if cls is None:
            try:
                cls = type(base.__name__, (base,) + tuple(extra), {"__module__": __name__})
            except TypeError:        # a cause class whose layout cannot be mixed in: keep the base
                cls = base
            _MIXED[key] = cls
    args = (kernel, program, file, line, cause) + ((op,) if op is not None else ())
    return cls(*args)


class OutOfBoundsAccess(TritonTraceError):
    """Raised at the first out-of-bounds lane when tracing with ``on_oob="raise"``."""


class TraceFileError(TritonTraceError, ValueError):
    """A trace file that is damaged, of an unknown format version, or too large to load safely."""


class UntrustedTrace(TraceUsageError):
    """A launch read from a trace file this user did not record or sign: its kernel code is data and is not
    imported, compiled or run unless the user trusts that file (``load(path, trust=True)``, ``--trust``)."""


class CacheUnusable(TritonTraceError, OSError):
    """The cache folder (``TRITON_TRACE_CACHE_DIR``) or one below it cannot be used safely or at all (another
    user could write it, a symlink, not writable); the message names the folder and the fix."""


class CompileError(TritonTraceError, RuntimeError):
    """Triton's compiler refused a traced kernel for a GPU target (triton_trace.compiled); the message names
    the kernel, the target, Triton's version and the compiler's first lines."""


class FrontendError(TritonTraceError, RuntimeError):
    """The installed frontend (triton_trace/frontend) is missing or uses module syntax the notebook bundle
    cannot join (view/bundle.py): a broken install or an unsupported change to frontend/."""


class FindingsError(TritonTraceError, AssertionError):
    """``triton_trace.check()`` found problems; the message lists them (kernel, program, line, tensor).
    An AssertionError, so pytest shows it plainly."""

    def __init__(self, report):
        self.report = report
        super().__init__(report.summary())


class FuzzFailure(TritonTraceError, AssertionError):
    """``triton_trace.fuzz`` found a failing case: ``case`` is the smallest one Hypothesis shrank it to; the
    message says what failed (findings, a mismatch with the reference, an error) and how to replay it."""

    def __init__(self, message: str, case):
        super().__init__(message)
        self.case = case


class RequiresGPU(TritonTraceError, RuntimeError):
    """Under the CUDA redirect (triton_trace.suite), a test used what only a GPU can do (a CUDA graph, a
    compiled kernel's binary, the caching allocator's internals). ``what`` names it; ``pytest --tt-cuda``
    reports the test as skipped with "requires a GPU: <what>"."""

    def __init__(self, what: str):
        super().__init__(f"requires a GPU: {what} (triton_trace runs CUDA code on the CPU and cannot do this; "
                         f"run the test on a GPU, or leave this call out of it under --tt-cuda)")
        self.what = what


class NoSuchDevice(TritonTraceError, RuntimeError):
    """Under the CUDA redirect, a CUDA device index past ``torch.cuda.device_count()`` (one GPU)."""


class BatchFallback(Exception):
    """Internal, never reaches the user: a chunk of programs cannot run batched (programs branch
    differently, share memory they write, or use an op the batched mode lacks), so the executor undoes
    the chunk and runs its programs one at a time. The message is recorded in the launch as the reason."""


class ChunkRetry(BatchFallback):
    """Internal: a chunk wrote a storage whose earlier loads it kept only as ranges (nothing had written
    it yet), and the ranges overlap. The executor undoes the chunk and runs it batched again, now keeping
    those loads' lanes for the exact check."""


class ChunkDiverged(BatchFallback):
    """Internal, never reaches the user: the programs of a chunk hold different values where control flow
    needs one (a branch condition, a loop bound). ``labels`` gives each program of the chunk (in its order)
    the group of programs that agree there; the executor runs the runs of consecutive programs with one
    label as chunks of their own (record/executor.py)."""

    def __init__(self, message: str, labels):
        super().__init__(message)
        self.labels = labels
