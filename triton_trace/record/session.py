"""The ``@trace`` decorator and the session that collects launches into the current Trace."""
from __future__ import annotations

import dataclasses
import inspect
import signal
import threading
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterable, Optional, Union

from .interp import seams as _seams

# A Triton outside the supported range, or one that moved a private name, fails here with a message
# naming what moved, before any module that reaches those names loads.
_seams.check_version()
_seams.require_seams()

from ..errors import TraceUsageError, TritonTraceError, program_error  # noqa: E402
from ..model import KeptInputs, Launch, Trace  # noqa: E402
from ..native import arena  # noqa: E402
from . import autotune, frames, gcwindow, kernelmodule  # noqa: E402
from .kernelmodule import json_arg  # noqa: E402
from .memory import poison  # noqa: E402
from . import executor as _grid  # noqa: E402
from .interp import activedriver, hooks  # noqa: E402
from .collector import Collector  # noqa: E402
from .checks.shadow import shadowing  # noqa: E402
from .gpu import asbuilt  # noqa: E402
from .memory.space import HostMemory  # noqa: E402
from .options import TraceOptions, untraced_options  # noqa: E402
from .interpreted import InterpretedKernel  # noqa: E402


class _Session:
    """Launches recorded since the last reset. A lock keeps launches from two threads apart."""

    def __init__(self):
        self.launches: list = []
        self.lock = threading.RLock()
        self.progress: Optional[Callable] = None   # progress(done, total, kernel) while a launch runs
        self.inputs = 0        # trace_all(inputs=...): kept for every launch in the block, decorated or not
        self.keepers: list = []     # every_launch() lists: each gets every launch, whatever reset() forgets

    def add(self, launch: Launch) -> None:
        with self.lock:
            self.launches.append(launch)
            for kept in self.keepers:
                kept.append(launch)


_SESSION = _Session()


def current_trace() -> Trace:
    """Every launch traced since the last ``reset()``, as a frozen Trace."""
    with _SESSION.lock:
        return Trace(tuple(_SESSION.launches))


def reset() -> None:
    """Start a new trace: forget the launches recorded so far."""
    with _SESSION.lock:
        _SESSION.launches.clear()


@contextmanager
def every_launch():
    """A list that gets every launch traced inside the block, those a ``reset()`` in the block forgets
    included: ``triton-trace run`` saves them all, whatever the script it runs resets."""
    kept: list = []
    with _SESSION.lock:
        _SESSION.keepers.append(kept)
    try:
        yield kept
    finally:
        with _SESSION.lock:
            _SESSION.keepers = [k for k in _SESSION.keepers if k is not kept]


def set_progress(callback: Optional[Callable]) -> None:
    """Install ``callback(done, total, kernel_name)``, called after every program of a traced launch."""
    _SESSION.progress = callback


# --------------------------------------------------------------------------------------------------------
# running one launch
# --------------------------------------------------------------------------------------------------------
def _normalize_grid(grid, meta: dict, kernel: str) -> tuple:
    if callable(grid):
        grid = grid(meta)
    if isinstance(grid, int):
        grid = (grid,)
    try:
        g = tuple(int(v) for v in grid)
    except (TypeError, ValueError):
        raise TraceUsageError(f"kernel '{kernel}': the grid must be a tuple of 1 to 3 ints or a "
                              f"lambda meta: tuple; got {grid!r}") from None
    if not 1 <= len(g) <= 3 or any(v < 0 for v in g):
        raise TraceUsageError(f"kernel '{kernel}': the grid must have 1 to 3 non-negative sizes; got {g}")
    return g + (1,) * (3 - len(g))


def _bind(fn, args, kwargs) -> dict:
    # Launch options Triton accepts for the GPU (num_warps, ...) are not kernel parameters.
    params = inspect.signature(fn).parameters
    try:
        return inspect.getcallargs(fn, *args, **{k: v for k, v in kwargs.items() if k in params})
    except TypeError as e:
        raise TraceUsageError(f"kernel '{fn.__name__}': {e}; pass every parameter of the kernel") from None


def _failure_error(name: str, f: "_grid.ProgramFailure", cause: BaseException) -> BaseException:
    if isinstance(cause, TritonTraceError):      # e.g. OutOfBoundsAccess: already names kernel and program
        return cause
    return program_error(name, f.pid, f.file, f.line, cause, op=hooks.unsupported_op(cause),
                         front_end=hooks.raised_by_front_end(cause))


def run_traced(kernel_obj, args: tuple, kwargs: dict, grid, opts: TraceOptions, config: Optional[dict] = None,
               debug: bool = False):
    fn = hooks.python_fn(kernel_obj)
    name = fn.__name__
    bound = _bind(fn, args, kwargs)
    missing = [o for o in opts.outputs if o not in bound]
    if missing:
        raise TraceUsageError(f"trace(outputs=...) names {missing}, which are not arguments of kernel '{name}' "
                              f"(its arguments: {list(bound)})")
    g = _normalize_grid(grid, dict(bound), name)
    poisoned = tuple(n for n in poison.unwritten_arguments(bound) if n not in opts.outputs)
    keep_inputs = max(opts.inputs, _SESSION.inputs)
    memory = HostMemory(in_place=not keep_inputs)   # kept inputs need the caller's bytes untouched until the end
    with shadowing(opts.shadow) if opts.shadow else nullcontext():     # the monitors are made per launch
        rec = Collector(name, memory, opts.values_cap, opts.filter, opts.on_oob, opts.memory_limit,
                        opts.outputs + poisoned)
    if poisoned:        # undefined at launch like declared outputs, for the uninitialised-read check alone
        rec.meta_extra["poisoned"] = list(poisoned)
    if opts.numerics != "interpreter":
        rec.meta_extra["numerics"] = opts.numerics
    hooks.rewritten(fn, kernel=True)  # cached; reads the source once, for the interpreter and for the trace
    source, file, def_line = frames.kernel_source(fn)
    scalars = {k: json_arg(v) for k, v in bound.items() if not hasattr(v, "data_ptr")}
    total, done = g[0] * g[1] * g[2], [0]
    progress = _SESSION.progress

    def on_end(n):
        done[0] += n
        if progress is not None:
            progress(done[0], total, name)

    meta = dict(kernel_name=name, source=source, source_file=file, source_line=def_line, grid=g, args=scalars,
                config=config, outputs=opts.outputs)
    # (an option a trace file could not carry, a list, is not a GPU launch's to reproduce either)
    no_spec, no_align = hooks.unspecialized(kernel_obj)
    module = dataclasses.replace(kernelmodule.capture(fn), params=kernelmodule.argument_expressions(bound, set(bound)),
                                 launch_options={k: v for k, v in (config or {}).items() if k in LAUNCH_OPTIONS
                                                 and (v is None or isinstance(v, (bool, int, str)))},
                                 no_specialize=no_spec, no_specialize_alignment=no_align)

    def finished(completed: bool = True, **extra):
        kept, inputs = {}, None
        if keep_inputs:
            kept["inputs"], kept["finals"], described = memory.snapshot(keep_inputs, completed)
            inputs = KeptInputs(tuple(described["storages"]), tuple(described["written"]), described["kept"],
                                described.get("note"))
        return rec.finish(**meta, **kept, completed=completed, module=dataclasses.replace(module, inputs=inputs),
                          **extra)

    for hook in hooks.pre_run_hooks(kernel_obj):
        hook(*args, **{k: v for k, v in kwargs.items() if k in bound})
    # large temporaries reuse pages the launch already touched (native/arena.py); the values are the same;
    # the tracer's own buffers are never poisoned (record/memory/poison.py)
    # numerics="compiled" asks the compiled kernel for its reduction layouts and dot instructions: compiled
    # now, before the interpreter's hooks patch the language (record/gpu/asbuilt.py)
    as_built = asbuilt.launching(kernel_obj, bound, config or {}) if opts.numerics == "compiled" else nullcontext()
    with arena.active(), poison.suspended(), as_built:
        try:
            _grid.run_grid(fn, bound, g, memory, rec, on_done=on_end, chunk=opts.chunk, debug=debug, grow=opts.grow,
                           numerics=opts.numerics, workers=opts.workers,
                           num_warps=int((config or {}).get("num_warps") or 4))
        except BaseException as e:
            # Keep what was recorded, and give the caller what the completed programs stored, as a GPU would.
            error = None
            if isinstance(e, _grid.ProgramFailure):
                cause = hooks.unwrap_interpreter_error(e.cause)
                error = _failure_error(name, e, cause)
                why = f"program {e.pid}: {type(cause).__name__}: {cause}"
                detail = hooks.assert_detail(cause)
                if detail is not None:
                    rec.meta_extra["assert_failed"] = {**detail, "program": list(e.pid)}
            elif isinstance(e, KeyboardInterrupt):
                why = f"interrupted after {done[0]} of {total} programs"
            else:
                why = f"{type(e).__name__}: {e}"
            with _interrupts_deferred():
                if opts.keep:
                    _SESSION.add(finished(False, error=why))
                memory.copy_back()
            if error is not None:
                raise error from cause
            if isinstance(e, KeyboardInterrupt):
                # where inside the interpreter the Ctrl-C landed says nothing to the user, and a frame there may
                # have no line number (Python 3.11: an instruction without a location), on which pytest's
                # report of the interrupt crashes: the traceback starts at the launch
                raise e.with_traceback(None)
            raise
        with _interrupts_deferred():          # a Ctrl-C now would lose the whole launch and its outputs
            launch = finished()
            if opts.keep:
                _SESSION.add(launch)
            memory.copy_back()
    return launch


@contextmanager
def _interrupts_deferred():
    """Hold Ctrl-C back while a finished launch is kept and its outputs are written back, then raise it.
    Only the main thread receives signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:          # no signals in this interpreter (e.g. a sub-interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:                  # deliver it as the handler we replaced would have
        if callable(previous):
            previous(signal.SIGINT, None)     # Python's default handler raises KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            raise KeyboardInterrupt


# GPU launch options: not kernel parameters (unless a kernel names one so); Launch.config and the module keep them
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                  "launch_pdl", "launch_metadata", "instrumentation_mode", "debug", "sanitize_overflow")


def run_chain(kernel_obj, args, kwargs, grid, opts: TraceOptions):
    """Apply autotune / heuristics wrappers the way Triton does (record/autotune.py), then run the jit
    function traced."""
    kwargs, config = autotune.resolve(kernel_obj, args, kwargs, opts)
    # GPU launch options are not kernel parameters; keep them (the analysis's warp model reads num_warps).
    # A kernel parameter of the same name (``num_stages: tl.constexpr``) is a parameter, as Triton binds it.
    params = inspect.signature(hooks.python_fn(kernel_obj)).parameters
    debug = hooks.debug_enabled(kernel_obj, {k: v for k, v in kwargs.items() if k not in params})
    launch_opts = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS if k in kwargs and k not in params}
    if launch_opts:
        config = {**(config or {}), **{k: json_arg(v) for k, v in launch_opts.items()}}
    with gcwindow.deferred():     # the launch's own objects die with it instead of filling the old generation
        return run_traced(kernel_obj, tuple(args), kwargs, grid, opts, config, debug)


# --------------------------------------------------------------------------------------------------------
# the decorator
# --------------------------------------------------------------------------------------------------------
def trace(kernel=None, *, programs=None, values: Union[bool, int] = True, outputs: Iterable[str] = (),
          on_oob: str = "skip", config=None, batch: Union[bool, int] = True, memory_limit=None, inputs=False,
          poison_empty: bool = False, numerics: str = "interpreter", workers: Union[int, str] = 1,
          shadow: Optional[str] = None):
    """Trace every launch of a Triton kernel through Triton's interpreter.

    Use bare (``@trace``) or with options, above ``@triton.jit``, ``@triton.autotune`` or
    ``@triton.heuristics``:

    - ``programs``: record only these programs (ids, a list of ids or a callable on ``(x, y, z)``); all of
      them still run, so outputs stay right, and the launch counts the ones left out.
    - ``values``: record loaded/stored values (default, capped per launch), ``False``, or a cap in elements.
    - ``outputs``: names of arguments whose contents are undefined at launch (``torch.empty`` results),
      for the uninitialised-read and coverage checks of the analysis.
    - ``on_oob``: ``"skip"`` records and skips out-of-bounds lanes; ``"raise"`` stops at the first one.
    - ``config``: for an autotuned kernel, the config to run (index or dict of its kwargs).
    - ``batch``: run chunks of programs in one numpy pass (default ``True``: 256 programs, up to 1024 once the
      first chunk shows small blocks; a number sets the programs per chunk, which bounds memory). Results
      are exactly those of one program at a time: a chunk whose
      programs branch differently or share memory they write is undone and re-run one by one, and the
      launch's ``meta["execution"]`` says which and why. ``False`` runs one program at a time.
    - ``memory_limit``: bytes (or "512MB", "2GiB") the recorded trace of a launch may hold. Values are
      dropped first, then later programs are no longer recorded (they still run); the launch says so.
    - ``inputs``: keep a copy of every argument's storage as the launch found it and of the written ones
      as it left them, for ``launch.reproducer()``; ``True`` keeps up to 1 GiB per launch, or give a size.
      A launch over the size keeps none and says so in ``launch.module.inputs.note``.
    - ``poison_empty``: from the decoration on, for the rest of the process (in the decorating thread),
      ``torch.empty`` & co. return memory filled with poison, and a launch reading such memory before
      writing it gets an ``uninitialized_read`` finding with no ``outputs=`` (``trace_all``'s, for a block).
    - ``numerics``: ``"interpreter"`` (default) computes as Triton's interpreter, correctly rounded;
      ``"compiled"`` as the compiled kernel does where that is deterministic: ``a * b + c`` as one FMA, fp32
      ``tl.dot`` inputs read as TF32 (record/gpu/ascompiled.py).
    - ``workers``: processes a launch's programs may run in (default 1: this process only; "auto": the cores
      this process may use, ``os.sched_getaffinity``, capped by the ``TRITON_TRACE_WORKERS`` environment
      variable, less those other processes keep busy when the launch starts). The recording,
      the findings and the outputs are those of one process bit for bit: ranges of programs run in forked
      workers only where a launch has enough work left after its first chunk to pay for them, and a worker's
      programs run again in the launch's process where they could have seen another's effects (atomics on
      shared memory, reading what an earlier program wrote) or raised; ``meta["execution"]["workers"]``
      says how many ran and why not more (record/parallel/).
    - ``shadow``: ``"float64"`` follows every floating value with a float64 shadow as the launch runs, so
      ``analyze()`` says per line where precision is lost without running it again (record/checks/shadow.py).

    The kernel object is returned with its ``run`` method replaced, so it still passes Triton's and
    PyTorch's type checks (``wrap_triton``, ``triton_op``).
    """
    opts = TraceOptions(programs, values, outputs, on_oob, config, batch, memory_limit, inputs, poison_empty,
                        numerics, workers, shadow)

    def decorate(k):
        if not hooks.is_kernel(k):
            raise TraceUsageError(f"@triton_trace.trace goes above @triton.jit (or @triton.autotune / "
                                  f"@triton.heuristics); {k!r} is not a Triton kernel")
        if opts.poison_empty:
            poison.from_now_on()

        def run(*args, grid, warmup=False, **kwargs):
            if warmup:
                return None
            return run_chain(k, args, kwargs, grid, opts)

        k.run = run
        k.__triton_trace_options__ = opts
        return k

    if kernel is not None:
        return decorate(kernel)
    return decorate


def _on_gpu(args, kwargs) -> bool:
    """Whether every tensor argument's memory is on a GPU: by its storage, so a CPU tensor that reports
    a CUDA device (triton_trace.suite's redirect) counts as the CPU tensor it is."""
    tensors = [v for v in list(args) + list(kwargs.values()) if hasattr(v, "data_ptr") and hasattr(v, "device")]
    return bool(tensors) and all(_memory_device(t) != "cpu" for t in tensors)


def _memory_device(t) -> str:
    storage = getattr(t, "untyped_storage", None)
    device = storage().device if callable(storage) else getattr(t, "device", None)
    return getattr(device, "type", "cpu")


@contextmanager
def trace_all(programs=None, values: Union[bool, int] = True, kernels: Union[None, str, Iterable[str]] = None,
              inputs=False, poison_empty: bool = False, numerics: str = "interpreter", workers: Union[int, str] = 1,
              shadow: Optional[str] = None):
    """Trace every Triton kernel launched inside the block, without decorating it.

    ``kernels`` limits tracing to kernels of these (Python function) names; others launch as usual.
    ``programs``, ``values``, ``inputs``, ``numerics``, ``workers`` and ``shadow`` are as for ``trace``. A kernel decorated with ``@trace`` keeps its own
    options. Launches land in ``current_trace()``. ``poison_empty``: tensors from ``torch.empty`` and its
    kin made inside the block are filled with a poison pattern (NaN for floats), and a launch that reads
    one before any program wrote it gets an ``uninitialized_read`` finding with no ``outputs=`` declared
    (record/memory/poison.py).
    """
    opts = TraceOptions(programs, values, inputs=inputs, poison_empty=poison_empty, numerics=numerics, workers=workers,
                        shadow=shadow)
    names = None if kernels is None else ({kernels} if isinstance(kernels, str) else set(kernels))

    untraced = untraced_options()

    def handler(kernel_obj, original_run, *args, grid, warmup=False, **kwargs):
        if names is not None and hooks.python_fn(kernel_obj).__name__ not in names:
            if _on_gpu(args, kwargs):
                return original_run(kernel_obj, *args, grid=grid, warmup=warmup, **kwargs)
            # CPU tensors cannot run a compiled kernel: run it through the interpreter, unrecorded
            return None if warmup else run_chain(kernel_obj, args, kwargs, grid, untraced)
        if warmup:
            return None
        before = len(_SESSION.launches)
        run_chain(kernel_obj, args, kwargs, grid, opts)
        launches = _SESSION.launches
        return InterpretedKernel(kernel_obj, args, kwargs, launches[-1] if len(launches) > before else None)

    saved = _SESSION.inputs
    _SESSION.inputs = max(saved, opts.inputs)
    try:
        with hooks.kernel_runs_routed(handler), poison.poisoning(opts.poison_empty):
            yield
    except Exception as e:
        if activedriver.inductor_without_driver(e):
            raise TraceUsageError(
                "torch.compile with torch._inductor.config.cpu_backend = 'triton' generates Triton kernels, and "
                "Inductor asks Triton's driver for the target while it writes them; on a machine without a GPU "
                "there is none ('0 active drivers'). Compile inside `with triton_trace.inductor_on_cpu():` "
                "instead (it runs Inductor's kernels through the interpreter, traced into current_trace())") from e
        raise
    finally:
        _SESSION.inputs = saved

