"""``torch.compile`` through the tracer: Inductor's Triton kernels run on the interpreter, each launch traced
under Inductor's kernel name with the generated source it was compiled from (issue 40, piece 3).

Two paths, both compiling in this process (``compile_threads=1``: a worker's kernels would never reach the
tracer's hooks):

- plain CPU tensors (``inductor_on_cpu()``): Inductor's ``cpu_backend="triton"``. A stock Triton has no
  CPU backend, so Inductor could neither hash one ("0 active drivers") nor compile for one; both steps are
  skipped and every launch runs on the interpreter.
- CUDA tensors under ``cuda_on_cpu()`` (``install``): Inductor compiles for the redirect's GPU (its SM count
  and capability: the kernels and configs that GPU would get), on fake CUDA tensors as torch does on a
  CPU-only build. Inference only: the backward of a compiled graph is traced by the autograd engine, which
  on a CPU-only torch has no CUDA device at all (``RequiresGPU``).

A launch runs ``CachingAutotuner.run`` as Inductor's own ``TRITON_INTERPRET`` mode does: ``fn[grid](...)``
with the first config, which is the JITFunction launch that ``trace_all`` intercepts. Autotuning and the
passes that benchmark on a GPU (shape padding, max-autotune, coordinate descent) are off: timing the
interpreter says nothing about the GPU. Constant folding of the joint graph is off under the redirect,
since it materializes real CUDA tensors.

Every private name of torch (and of c10, for the CUDA device guard) that is touched is listed in
``INTERNALS`` and looked up before anything is patched, so a torch release that moved one fails naming
it. Written against torch 2.13.0 (with Triton 3.6 and 3.9).
"""
from __future__ import annotations

import collections
import functools
import hashlib
import importlib
import sys
from contextlib import ExitStack, contextmanager
from typing import Optional

import torch

from ..errors import RequiresGPU, TritonTraceError
from ..record.patching import Scope
from ..record.memory.poison import PoisonEmpty
from ..record.session import trace_all
from . import tensors
from .cudaguard import guard_library as _guard_library, install_guard  # noqa: F401  (tests ask _guard_library)

WRITTEN_AGAINST = "2.13.0"

_TH = "torch._inductor.runtime.triton_heuristics"
INTERNALS = (
    (_TH, "CachingAutotuner.run"), (_TH, "CachingAutotuner.precompile"),
    (_TH, "CachingAutotuner._interpret_args_grid"),
    ("torch._inductor.runtime.triton_helpers", "set_driver_to_gpu"),
    ("torch._inductor.runtime.triton_helpers", "set_driver_to_cpu"),
    ("torch._inductor.runtime.triton_compat", "triton_key"),
    ("torch._inductor.runtime.hints", "DeviceProperties.create"),
    ("torch._inductor.compile_fx", "compile_fx"),
    ("torch.utils._triton", "triton_hash_with_backend"), ("torch.utils._triton", "has_triton.cache_clear"),
    ("torch._inductor.scheduler", "has_triton"),
    ("torch._dynamo.device_interface", "CudaInterface"),
    ("torch._dynamo.device_interface", "caching_worker_device_properties"),
    ("torch._dynamo.variables.torch_function", "SymbolicTorchFunctionState.__init__"),
    ("torch._dynamo.variables.ctx_manager", "CUDADeviceVariable._exchange_fn"),
    ("torch._subclasses.fake_tensor", "FakeTensorMode.avoid_device_init"),
    ("torch._C._dynamo.guards", "_empty_strided_cuda"),
)
# the Inductor switches set for the block: compiled in this process, nothing benchmarked
CONFIG = dict(compile_threads=1, max_autotune=False, max_autotune_pointwise=False, max_autotune_gemm=False,
              coordinate_descent_tuning=False, shape_padding=False)
CUDA_CONFIG = dict(joint_graph_constant_folding=False)
# what Inductor's CUDA wrapper code asks of torch.cuda through its device interface
LATE_BOUND = ("current_device", "set_device", "device_count", "stream", "current_stream", "set_stream",
              "synchronize", "get_device_properties", "memory_allocated", "is_bf16_supported")


def _lookup(module: str, path: str):
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise _moved(f"the module {module} ({e})") from e
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _moved(f"{module}.{path}") from None
    return obj


def _moved(what: str) -> TritonTraceError:
    return TritonTraceError(
        f"torch.compile through triton_trace: this torch ({torch.__version__}) has no {what}, which "
        f"triton_trace/suite/inductor.py hooks to run Inductor's Triton kernels on the interpreter (written "
        f"against torch {WRITTEN_AGAINST}). Use torch {WRITTEN_AGAINST}, or update that module's INTERNALS.")


def missing() -> Optional[TritonTraceError]:
    """The error naming the first internal this torch lacks, or None when all are there."""
    try:
        for module, path in INTERNALS:
            _lookup(module, path)
    except TritonTraceError as e:
        return e
    return None


def _mod(module: str):
    return importlib.import_module(module)


# --------------------------------------------------------------------------------------------------------
# launches: Inductor's kernels as JITFunction launches
# --------------------------------------------------------------------------------------------------------
def _launch(self, *args, stream=None, benchmark_run=False, **kwargs):
    """``CachingAutotuner.run`` as Inductor's TRITON_INTERPRET path runs it: the first config and its grid.
    The launcher's arguments are the kernel's parameters less its constexprs, in order; they are passed by
    name, with the constexprs a call site fixed (a user kernel's ``BLOCK_SIZE=4``: Inductor's constants)."""
    cfg = self.configs[0] if self.configs else self.compile_results[0].config
    args, grid = self._interpret_args_grid(args, cfg)
    params = self.fn.params
    names = [p.name for p in params if not p.is_constexpr]
    if len(names) != len(args):
        raise _moved(f"a launcher passing the non-constexpr parameters of kernel {self.fn.__name__} "
                     f"({names}; it passed {len(args)} arguments)")
    known = {p.name for p in params}
    constants = {k: v for k, v in self.triton_meta.get("constants", {}).items() if k in known}
    call = {**constants, **cfg.kwargs, **kwargs, **dict(zip(names, args))}
    return self.fn[grid](**call, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def _no_precompile(self, *args, **kwargs):
    # a kernel that is never compiled keeps its configs (``_launch`` reads them), and Triton, which has no
    # driver for the stub GPU or the CPU, is never asked for a binary
    return None


def _install_launches(scope: Scope, stack: ExitStack, cuda: bool) -> None:
    stack.enter_context(torch._inductor.config.patch({**CONFIG, **(CUDA_CONFIG if cuda else {})}))
    autotuner = _lookup(_TH, "CachingAutotuner")
    scope.set_attr(autotuner, "run", _launch)
    scope.set_attr(autotuner, "precompile", _no_precompile)
    # the generated module of every kernel selects Triton's driver first: the block's (or none) stays
    helpers = _mod("torch._inductor.runtime.triton_helpers")
    scope.set_attr(helpers, "set_driver_to_gpu", lambda: None)
    scope.set_attr(helpers, "set_driver_to_cpu", lambda: None)
    # Inductor keys its caches with the driver's backend hash, which would need a driver (and ptxas); a key
    # of its own keeps these kernels apart from ones compiled for a real GPU
    key = hashlib.sha256(f"{_lookup('torch._inductor.runtime.triton_compat', 'triton_key')()}-triton_trace-"
                         f"interpreter".encode()).hexdigest().upper()
    scope.set_attr(_mod("torch.utils._triton"), "triton_hash_with_backend", lambda: key)
    # "can Triton run here?", asked of the device (cached): yes, on the interpreter. Dynamo then captures a
    # user's @triton.jit kernel in the graph instead of tracing into its launch; Inductor codegens for it
    ut = _mod("torch.utils._triton")
    scope.on_restore(ut.has_triton.cache_clear)     # an answer cached inside the block is the block's
    scope.set_attr(ut, "has_triton", lambda: True)
    scope.set_attr(_mod("torch._inductor.scheduler"), "has_triton", lambda: True)


@contextmanager
def inductor_on_cpu(*, trace: bool = True, programs=None, values=True, inputs=False):
    """Compile with Inductor's Triton backend for the CPU inside the block and run every kernel it generates
    through the interpreter, traced into ``current_trace()`` (``trace=False``: untraced). ``programs``,
    ``values`` and ``inputs`` are as for ``trace_all``.

    Dynamo's guards do not depend on the CPU backend, so code compiled before the block would run its C++
    kernels in it, and the block's Triton kernels have no binary to run after it: ``torch.compiler.reset()``
    on entry and exit makes each side compile its own."""
    problem = missing()
    if problem is not None:
        raise problem
    scope, stack = Scope(), ExitStack()
    try:
        torch.compiler.reset()
        scope.on_restore(torch.compiler.reset)
        _install_launches(scope, stack, cuda=False)
        stack.enter_context(torch._inductor.config.patch(cpu_backend="triton"))
        stack.enter_context(trace_all(programs, values, inputs=inputs) if trace else trace_all(kernels=()))
        yield
    finally:
        try:
            stack.close()
        finally:
            scope.restore()


# --------------------------------------------------------------------------------------------------------
# CUDA codegen for the redirect's GPU
# --------------------------------------------------------------------------------------------------------
def install(scope: Scope, stack: ExitStack) -> None:
    """Put torch.compile on the redirect; called by ``cuda_on_cpu`` before anything else is patched.

    Dynamo reads torch's own functions (torch.cuda's among them) into its tables when it is imported, so it
    must not be imported while they answer as the GPU. Where it is not loaded yet, the first torch.compile
    of the block loads it (and the rest, 2 to 5 s) with torch's functions briefly put back; a block that
    never compiles pays nothing. Where this torch moved an internal, only torch.compile is refused."""
    if "torch._dynamo" in sys.modules:
        _install_cuda(scope, stack)
        return
    as_built = [(m, dict(vars(m))) for m in (torch, torch.cuda, torch.cuda.nvtx)]
    original, done = torch.compile, []

    @functools.wraps(original)
    def compile(*args, **kwargs):
        if done:
            return original(*args, **kwargs)
        done.append(True)
        with _put_back(as_built):
            missing()                   # imports what is there while torch's functions are torch's
        _install_cuda(scope, stack)
        return torch.compile(*args, **kwargs)       # this again, or the refusal naming a moved internal
    scope.set_attr(torch, "compile", compile)


@contextmanager
def _put_back(as_built: list):
    changed = [(m, name, m.__dict__.get(name), old) for m, before in as_built
               for name, old in before.items() if m.__dict__.get(name) is not old]
    for m, name, now, old in changed:
        setattr(m, name, old)
    try:
        yield
    finally:
        for m, name, now, old in changed:
            setattr(m, name, now)


def _install_cuda(scope: Scope, stack: ExitStack) -> None:
    problem = missing()
    if problem is not None:
        scope.set_attr(torch, "compile", functools.partial(_refuse, problem))
        return
    _install_launches(scope, stack, cuda=True)
    stack.enter_context(torch._functorch.config.patch(check_custom_op_aliasing=False))  # it refuses CudaTensors
    _device_interface(scope)
    refusal = _fake_cuda(scope)
    _wrapper_runtime(scope)
    _compile_sees_cuda(scope, refusal)
    _inference_only(scope)


def _refuse(error: Exception, *args, **kwargs):
    raise error


def _device_interface(scope: Scope) -> None:
    """Dynamo's CUDA device interface bound torch.cuda's functions when it was defined: it asks them again
    at each call, so it sees the redirect's answers (and Inductor codegens for that GPU)."""
    di = _mod("torch._dynamo.device_interface")
    for name in LATE_BOUND:
        late = staticmethod(lambda *a, _n=name, **k: getattr(torch.cuda, _n)(*a, **k))
        scope.set_attr(di.CudaInterface, name, late)
    scope.set_attr(di.CudaInterface, "get_raw_stream", staticmethod(lambda device=None: 0))
    cached = _lookup("torch._inductor.runtime.hints", "DeviceProperties.create")
    cached.cache_clear()                      # a GPU's properties read before the block
    scope.on_restore(cached.cache_clear)      # and the redirect's, after it
    scope.on_restore(di.caching_worker_device_properties.clear)


def _fake_cuda(scope: Scope) -> Optional[Exception]:
    """Fake CUDA tensors as torch makes them on a CPU-only build: ``avoid_device_init`` keeps
    ``torch.tensor(..., device="cuda")`` and constant propagation off the (absent) device; it reads
    ``torch.cuda.is_available()``, which the redirect answers True. A fake tensor that requires grad needs a
    CUDA device guard, which a CPU-only torch lacks: one is registered for the block (cudaguard.py)."""
    ft = _mod("torch._subclasses.fake_tensor")
    scope.set_attr(ft.FakeTensorMode, "avoid_device_init", property(lambda self: True))
    return install_guard(scope)


def _wrapper_runtime(scope: Scope) -> None:
    """What Inductor's generated CUDA wrapper calls that a CPU-only torch lacks: its buffers are CudaTensors
    (made with ``torch.empty_strided``, so a poisoning block poisons them too), its stream is 0."""
    def empty_strided_cuda(size, stride, dtype, *args):
        return tensors.as_cuda(torch.empty_strided(size, stride, dtype=dtype, device="cpu"))
    scope.set_attr(torch._C._dynamo.guards, "_empty_strided_cuda", empty_strided_cuda)
    scope.set_attr(torch._C, "_cuda_getCurrentRawStream", lambda device=None: 0)
    # torch.cuda._DeviceGuard, around every CUDA graph's call; one GPU, so nothing to exchange. Dynamo bound
    # the same functions when it was imported, for a ``with torch.cuda.device(i):`` it traces (fla's
    # input_guard wraps every op in one). Two functions, not one: dynamo keys a handler by each function
    # (built at the first compile, maybe inside the block) and refuses one function registered twice
    def exchange(device: int) -> int:
        return -1 if device < 0 else 0

    def maybe_exchange(device: int) -> int:
        return -1 if device < 0 else 0
    scope.set_attr(torch.cuda, "_exchange_device", exchange)
    scope.set_attr(torch.cuda, "_maybe_exchange_device", maybe_exchange)
    traced = _lookup("torch._dynamo.variables.ctx_manager", "CUDADeviceVariable")
    scope.set_attr(traced, "_exchange_fn", staticmethod(exchange))
    scope.set_attr(traced, "_maybe_exchange_fn", staticmethod(maybe_exchange))


def _compile_sees_cuda(scope: Scope, refusal: Optional[Exception]) -> None:
    """Dynamo traces the torch function modes on the stack: the redirect's would put its CPU factories into
    the graph (``device="cuda"`` becoming the CPU), so the compiler sees the stack without them; its guard
    still checks the whole stack, and the compiled code runs with the modes on, as eager code does. Every
    trace starts here, so ``refusal`` (a reason no trace can run) is raised here."""
    state = _mod("torch._dynamo.variables.torch_function").SymbolicTorchFunctionState
    original = state.__init__
    hidden_types = (tensors.CudaFactories, PoisonEmpty)

    def __init__(self, py_stack, *args, **kwargs):
        if refusal is not None:
            raise refusal
        py_stack = list(py_stack)
        original(self, py_stack, *args, **kwargs)
        hidden = {i for i, mode in enumerate(py_stack) if isinstance(mode, hidden_types)}
        if hidden:
            self.mode_stack = collections.deque(v for i, v in enumerate(self.mode_stack) if i not in hidden)
    scope.set_attr(state, "__init__", __init__)


def _inference_only(scope: Scope) -> None:
    """A graph whose inputs require grad is compiled with its backward, which the autograd engine traces;
    on a CPU-only torch that engine has no CUDA device ("Cannot access accelerator device"): say so first."""
    cfx = _mod("torch._inductor.compile_fx")
    original = cfx.compile_fx

    def compile_fx(model, example_inputs, *args, **kwargs):
        if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           and t.device.type == "cuda" for t in example_inputs):
            raise RequiresGPU("the backward of a torch.compile'd graph on CUDA tensors (on a CPU-only torch the "
                              "autograd engine has no CUDA device to trace it over); compile for inference "
                              "under torch.no_grad(), or on CPU tensors with triton_trace.suite.inductor_on_cpu()")
        return original(model, example_inputs, *args, **kwargs)
    scope.set_attr(cfx, "compile_fx", compile_fx)
