"""Every error triton_trace raises. Each message names the thing the user has to fix."""
from __future__ import annotations


class TritonTraceError(Exception):
    """Base class of all triton_trace errors."""


class UnsupportedTritonVersion(TritonTraceError, ImportError):
    """The installed Triton is outside the range whose interpreter internals we hook."""


class TraceUsageError(TritonTraceError, ValueError):
    """A bad argument to the public API (decorator options, grid, kernel arguments, program filters)."""


class ProgramError(TritonTraceError):
    """An exception inside one program of a traced kernel.

    The launch it happened in is kept in the current trace with every program that completed
    (and the ops the failing program recorded before it failed), so nothing recorded is lost.
    """

    def __init__(self, kernel: str, program: tuple, file: str | None, line: int | None, cause: BaseException):
        self.kernel = kernel
        self.program = tuple(program)
        self.file = file
        self.line = line
        self.cause = cause
        where = f"{file}:{line}" if line else "an unknown line"
        super().__init__(
            f"kernel '{kernel}' failed in program {self.program} at {where}: "
            f"{type(cause).__name__}: {cause}. The programs that completed are kept in "
            f"triton_trace.current_trace().")


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
        self.args = (
            f"kernel '{kernel}' calls {name} at {where} (program {self.program}), which triton_trace cannot run "
            f"on the CPU ({cause}). Replace {name} with plain tl operations, or put it behind a tl.constexpr flag "
            f"that is off when tracing (see README, \"Supported Triton features\"). "
            f"The programs that completed are kept in triton_trace.current_trace().",)

    def __str__(self) -> str:
        return self.args[0]


class OutOfBoundsAccess(TritonTraceError):
    """Raised at the first out-of-bounds lane when tracing with ``on_oob="raise"``."""


class TraceFileError(TritonTraceError, ValueError):
    """A trace file that is damaged, of an unknown format version, or too large to load safely."""


class FindingsError(TritonTraceError, AssertionError):
    """``triton_trace.check()`` found problems; the message lists them (kernel, program, line, tensor).
    An AssertionError, so pytest shows it plainly."""

    def __init__(self, report):
        self.report = report
        super().__init__(report.summary())


class BatchFallback(Exception):
    """Internal, never reaches the user: a chunk of programs cannot run batched (programs branch
    differently, share memory they write, or use an op the batched mode lacks), so the executor undoes
    the chunk and runs its programs one at a time. The message is recorded in the launch as the reason."""


class ChunkRetry(BatchFallback):
    """Internal: a chunk wrote a storage whose earlier loads it kept only as ranges (nothing had written
    it yet), and the ranges overlap. The executor undoes the chunk and runs it batched again, now keeping
    those loads' lanes for the exact check."""
