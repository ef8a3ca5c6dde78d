"""A pytest plugin that compares every Triton launch of a test suite, bit for bit, with its trace.

Loaded by ``launches.py`` (``-p launch_plugin``, this folder on PYTHONPATH) inside Triton's language tests.
Every launch of every kernel is routed through ``compare_launch``: the launch's tensor arguments are
copied to the CPU (each storage once, so aliasing is kept), the launch runs as the test made it (compiled
on the GPU, or in ``--lf-reference=interpreter`` Triton's plain CPU interpreter, which lets the whole
pipeline run on a machine without a GPU), its arguments are copied again, then the same launch is traced
with triton_trace on the first copies and every tensor argument is compared (``bitcompare``). The test
itself sees only its own launch's results. One JSON line per launch, and one per test cut by the
deadline, go to ``--lf-log`` (``.<xdist worker>`` appended).

For a library's own tests (``library_launches.py``): ``--lf-relaunch`` hands a library that keeps what
``kernel.run`` returned and launches it again later (FlagGems' LibEntry: ``compiled[grid](*args)``, which
would bypass the route) an object whose launches come back through it; ``--lf-cuda-on-cpu=GPU`` runs a
suite written for CUDA on a machine without one, under triton_trace's CUDA redirect (untraced: each launch
runs in the interpreter, the reference, and is traced only by ``compare_launch``). An autotuned kernel is
traced with the config the reference run chose.
"""
from __future__ import annotations

import inspect
import json
import linecache
import os
import random
import re
import textwrap
import threading
import time
import traceback
from contextlib import contextmanager

import numpy as np
import pytest

import bitcompare as bc

_busy = threading.local()


def pytest_addoption(parser):
    g = parser.getgroup("launch fidelity")
    g.addoption("--lf-log", default=None, help="write one JSON line per launch to PATH.<worker>")
    g.addoption("--lf-reference", choices=("gpu", "interpreter"), default="gpu",
                help="what the trace is compared with: the compiled kernel on the GPU, or Triton's interpreter")
    g.addoption("--lf-numerics", choices=("interpreter", "compiled"), default="interpreter",
                help="the trace's numerics (trace(numerics=...))")
    g.addoption("--lf-deadline", type=float, default=0.0,
                help="a time.time() after which the remaining tests are skipped (0: none)")
    g.addoption("--lf-shuffle", type=int, default=None,
                help="run the tests in an order shuffled with this seed, so a deadline cuts every family alike")
    g.addoption("--lf-relaunch", action="store_true", default=False,
                help="return a relaunchable kernel from each launch (a library that caches it launches it again)")
    g.addoption("--lf-cuda-on-cpu", default=None, metavar="GPU",
                help="run CUDA tests on the CPU under triton_trace's redirect, answering as GPU (interpreter reference)")


def pytest_load_initial_conftests(early_config, parser, args):
    gpu = getattr(early_config.known_args_namespace, "lf_cuda_on_cpu", None)
    if gpu:     # before the library's conftest imports the library, which looks for a GPU at import
        _redirect(early_config, gpu)


def _redirect(config, gpu: str) -> None:
    from contextlib import ExitStack
    from triton_trace.suite import cuda_on_cpu
    if getattr(config, "_lf_redirect", None) is None:
        stack = ExitStack()
        config._lf_redirect = stack.enter_context(cuda_on_cpu(gpu, trace=False))
        config.add_cleanup(stack.close)


def pytest_configure(config):
    if config.getoption("--lf-cuda-on-cpu"):        # an xdist worker: its early hook saw no options
        _redirect(config, config.getoption("--lf-cuda-on-cpu"))
    # helpers the release-3.6 tests import that later Triton releases dropped (as tt_suite_plugin does)
    import triton._internal_testing as testing
    for name, answer in {"is_hip_gfx11": False, "is_hip_gfx12": False, "is_hip_mi200": False,
                         "is_hip_mi300": False, "is_hip_mi350": False, "is_hip_cdna4": False, "get_arch": ""}.items():
        if not hasattr(testing, name):
            setattr(testing, name, lambda _answer=answer: _answer)


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("--lf-shuffle")
    if seed is not None:
        random.Random(seed).shuffle(items)     # the same order in every xdist worker: the same seed


def pytest_runtest_setup(item):
    deadline = item.config.getoption("--lf-deadline")
    if deadline and time.time() > deadline:
        _write(item.config, {"nodeid": item.nodeid, "cut": True})
        pytest.skip("launches.py: past the deadline")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    from triton_trace.record.interp import hooks
    reference = item.config.getoption("--lf-reference")

    def handler(kernel, original_run, *args, grid, warmup=False, **kwargs):
        if warmup or getattr(_busy, "on", False):
            return original_run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
        _busy.on = True       # launches made while comparing (the trace's own) go straight through
        try:
            return compare_launch(item, reference, kernel, original_run, args, grid, kwargs)
        finally:
            _busy.on = False

    with hooks.kernel_runs_routed(handler):
        yield


class Relaunch:
    """What a routed launch returns with ``--lf-relaunch``: the reference's own result (a CompiledKernel on the
    GPU, nothing in the interpreter) answers attribute reads, while ``relaunch[grid](*args)`` launches the jit
    function again through ``run``, so the route compares it too. ``args`` are all the jit function's
    parameters (FlagGems on Triton 3.3-3.6) or only its non-constexpr ones, the constexprs then those of the
    first launch, with the config its autotuner chose (``InterpretedKernel`` binds them)."""

    def __init__(self, kernel, args, kwargs, result):
        from triton_trace.record.interpreted import InterpretedKernel
        self._bind = InterpretedKernel(kernel, args, kwargs)
        self._result = result

    def __getitem__(self, grid):
        return self._bind[grid]

    def __getattr__(self, name):
        if name.startswith("_"):        # (copy and pickle probe for these before __init__ has run)
            raise AttributeError(name)
        return getattr(self._result, name)


def _family(nodeid: str) -> str:
    return nodeid.split("::")[-1].split("[")[0]


def compare_launch(item, reference, kernel, original_run, args, grid, kwargs):
    """Run one launch as the test made it, then traced on copies of its inputs; log the comparison."""
    import torch
    from triton_trace import gpucheck, reset
    from triton_trace.record.interp import hooks

    bound = {name: as_tensor(v) for name, v in gpucheck._bound(kernel, args, kwargs).items()}
    before = bc.snapshot(bound)
    result = original_run(kernel, *args, grid=grid, warmup=False, **kwargs)
    if reference == "gpu":
        torch.cuda.synchronize()
    after_ref = bc.snapshot(bound)
    changed = _changed_by(before, after_ref, bound)
    rec = {"nodeid": item.nodeid, "family": _family(item.nodeid), "kernel": hooks.python_fn(kernel).__name__,
           "grid": _grid_repr(grid, bound)}
    t0 = time.perf_counter()
    try:
        reset()
        with configs_chosen(kernel):
            gpucheck._launch(as_written(kernel), grid, before, traced=True, values=False,
                             numerics=item.config.getoption("--lf-numerics"))
        reset()
    except Exception as e:          # an op the tracer cannot run: counted, with its message, not hidden
        rec.update(status="trace_error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
                   where=traceback.format_exc().splitlines()[-3][:300])
        reset()
    else:
        rec["outputs"] = _compare_outputs(before, after_ref, bound, changed)
        rec["status"] = bc.worst(o["status"] for o in rec["outputs"])
    rec["trace_s"] = round(time.perf_counter() - t0, 4)
    _write(item.config, rec)
    if item.config.getoption("--lf-relaunch"):
        return Relaunch(kernel, args, kwargs, result)
    return result


@contextmanager
def configs_chosen(kernel):
    """Each autotuner above ``kernel`` offers only the config the reference run chose (``best_config``), so the
    trace, which never benchmarks, runs that one: a library's tuner keys its own cache its own way, and a
    first-config guess would tile a reduction differently from the GPU."""
    from triton_trace.record.interp import hooks
    saved = []
    try:
        for part in hooks.autotune_parts(kernel):
            best = getattr(part, "best_config", None)
            if hasattr(part, "configs") and best is not None:
                saved.append((part, part.configs, part.__dict__.get("cache", _NONE)))
                part.configs, part.cache = [best], {}
        yield
    finally:
        for part, configs, cache in saved:
            part.configs = configs
            if cache is _NONE:
                del part.cache
            else:
                part.cache = cache


_NONE = object()


def as_tensor(v):
    """A library's own tensor-like argument (an object with ``data_ptr()``, a torch ``dtype`` and
    ``untyped_storage()``, as compiled Triton accepts: FlagGems' StridedBuffer) as a torch view of the same
    memory, so that it is copied for the trace and compared like a tensor; the kernel sees the same pointer
    and dtype. A layout torch cannot view (negative strides) becomes the rest of the storage from the
    pointer, in one dimension. Tensors, wrappers bitcompare knows and other values are returned as they are."""
    import torch
    if isinstance(v, (tuple, list)) and not hasattr(v, "_fields"):
        return type(v)(as_tensor(x) for x in v)
    dtype = getattr(v, "dtype", None)
    if bc.tensor_of(v) is not None or not isinstance(dtype, torch.dtype) or not callable(getattr(v, "data_ptr", None)) \
            or not callable(getattr(v, "untyped_storage", None)):
        return v
    storage = v.untyped_storage()
    itemsize = torch.empty(0, dtype=dtype).element_size()
    first, rest = divmod(int(v.data_ptr()) - storage.data_ptr(), itemsize)
    if rest or not 0 <= first * itemsize <= storage.nbytes():
        return v
    view = torch.empty(0, dtype=dtype, device=storage.device)
    try:
        shape = tuple(int(n) for n in v.shape)
        return view.set_(storage, first, shape, tuple(int(d) for d in v.stride()))
    except (AttributeError, TypeError, RuntimeError):
        return view.set_(storage, first, (storage.nbytes() // itemsize - first,), (1,))


def as_written(kernel):
    """The kernel the GPU compiled, as a function the tracer can run. Triton's own tests make kernels from
    templates with ``JITFunction._unsafe_update_src`` (``patch_kernel``: ``GENERATE_TEST_HERE`` replaced by
    the op under test): the compiler reads ``.src``, while ``.fn``, which the tracer runs, is still the
    template. Such a kernel is rebuilt from ``.src`` in the template's globals and closure, its source
    registered with linecache so that the trace can show it; any other kernel is returned as it is."""
    from triton.runtime.jit import JITFunction
    if type(kernel) is not JITFunction:
        return kernel
    fn = kernel.fn
    try:
        own = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return kernel
    start = re.search(r"^def\s+\w+\s*\(", own, re.MULTILINE)
    if start is None or own[start.start():] == kernel.src:
        return kernel
    cached = _REBUILT.get(kernel.src)
    if cached is not None and cached.fn.__name__ == fn.__name__:
        return cached
    filename = f"<{fn.__name__} as patched, {len(_REBUILT)}>"
    linecache.cache[filename] = (len(kernel.src), None, kernel.src.splitlines(True), filename)
    namespace = dict(fn.__globals__)
    namespace.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
    exec(compile(kernel.src, filename, "exec"), namespace)
    rebuilt = JITFunction(namespace[fn.__name__], do_not_specialize=kernel.do_not_specialize,
                          noinline=kernel.noinline)
    _REBUILT[kernel.src] = rebuilt
    return rebuilt


_REBUILT: dict = {}     # patched source -> its rebuilt kernel, per test process


def _views(bound: dict):
    """(name, argument, tensor) of every distinct tensor view among the (flattened) arguments."""
    seen = set()
    for name, v in bc.flatten(bound).items():
        t = bc.tensor_of(v)
        if t is None:
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key not in seen:
            seen.add(key)
            yield name, v, t


def _changed_by(before: dict, after: dict, bound: dict) -> set:
    """Names of the arguments whose bits the reference run changed."""
    before, after = bc.flatten(before), bc.flatten(after)
    return {name for name, _, _ in _views(bound)
            if bool((bc.bits_of(bc.tensor_of(before[name])) != bc.bits_of(bc.tensor_of(after[name]))).any())}


def _compare_outputs(traced: dict, reference: dict, bound: dict, changed: set) -> list:
    """Every distinct tensor argument that either side changed, the trace's result (``traced``, copies the
    trace updated in place) against the reference run's (``reference``), bit for bit."""
    out = []
    traced, reference = bc.flatten(traced), bc.flatten(reference)
    for name, v, t in _views(bound):
        tr, rf = bc.tensor_of(traced[name]), bc.tensor_of(reference[name])
        rb, tb = bc.bits_of(rf), bc.bits_of(tr)
        same = np.array_equal(rb, tb)
        if same and name not in changed:
            continue             # an input neither side wrote
        readable = (None, None) if same else (bc.values_of(rf), bc.values_of(tr))
        out.append(bc.compare_bits(name, _dtype(v, t), rb, tb, *readable).to_dict())
    return out


def _dtype(arg, t) -> str:
    """The dtype the kernel reads the argument as; a reinterpreted tensor's float formats by torch's names
    (Triton's fp8e5 is torch's float8_e5m2), so the comparison knows their NaNs and ulps."""
    name = bc.dtype_name(arg if hasattr(arg, "dtype") else t)     # a host tensor descriptor has none of its own
    return {"fp8e5": "float8_e5m2", "fp8e4nv": "float8_e4m3fn", "fp16": "float16", "bf16": "bfloat16",
            "fp32": "float32", "fp64": "float64"}.get(name, name)


def _grid_repr(grid, bound):
    if callable(grid):
        try:
            return list(grid(bound))
        except Exception:            # a grid lambda over autotune meta-parameters the test does not pass
            return "callable"
    return list(grid) if isinstance(grid, (tuple, list)) else grid


def _write(config, rec: dict) -> None:
    path = config.getoption("--lf-log")
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}", "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")
