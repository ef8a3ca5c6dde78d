"""Autotune and heuristics as Triton's wrappers apply them, without benchmarking: ``resolve`` walks a kernel's
``@triton.autotune`` / ``@triton.heuristics`` layers, picks each autotuner's config (``choose_config``) and
evaluates each heuristic, and says which config ran and how it was chosen (``Launch.config``).

Timing the interpreter says nothing about the GPU, so a config is pinned, remembered or the first that
compiles for the GPU: a config that fails a ``tl.static_assert`` or needs more shared memory than the GPU
has is dropped, as Triton's autotuner drops it while benchmarking.
"""
from __future__ import annotations

import weakref
from typing import Optional

from ..errors import TraceUsageError
from .interp import access, kernels
from .kernelmodule import json_arg
from .options import TraceOptions


def resolve(kernel_obj, args: tuple, kwargs: dict, opts: TraceOptions) -> tuple:
    """(the keyword arguments with every config's and heuristic's values added, the ``Launch.config`` that
    says what was chosen and how, or None for a plain jit kernel)."""
    kwargs = dict(kwargs)
    config = None
    for part in kernels.autotune_parts(kernel_obj):
        if hasattr(part, "configs"):
            cfg, how = choose_config(part, args, kwargs, opts)
            part.best_config = cfg          # as Triton's autotuner leaves it (a library's wrapper reads it)
            kwargs.update(cfg.all_kwargs() if hasattr(cfg, "all_kwargs") else cfg.kwargs)
            if cfg.pre_hook is not None:
                cfg.pre_hook({**dict(zip(part.arg_names, args)), **kwargs})
            config = {**(config or {}), **_config_dict(cfg, how, list(part.configs))}
        else:   # Heuristics
            for k, heur in part.values.items():
                kwargs[k] = heur({**dict(zip(part.arg_names, args)), **kwargs})
            config = {**(config or {}), "heuristics": {k: json_arg(kwargs[k]) for k in part.values}}
    return kwargs, config


def choose_config(tuner, args, kwargs, opts: TraceOptions):
    """Pick the autotune config without benchmarking: timing the interpreter says nothing about the GPU.

    In order: the config the user pinned with ``trace(config=...)``, the one Triton's autotuner already
    chose for this key (e.g. after a GPU run in this process), else the first config left after the
    autotuner's own pruning that compiles for the GPU (_first_that_compiles).
    """
    configs = list(tuner.configs)
    if opts.config is not None:
        if isinstance(opts.config, int):
            if not 0 <= opts.config < len(configs):
                raise TraceUsageError(f"trace(config={opts.config}): the kernel has {len(configs)} configs")
            return configs[opts.config], "pinned"
        want = dict(opts.config)
        for c in configs:
            if all(c.kwargs.get(k) == v for k, v in want.items()):
                return c, "pinned"
        raise TraceUsageError(f"trace(config={want}) matches none of the configs {[c.kwargs for c in configs]}")
    nargs = dict(zip(tuner.arg_names, args))
    all_args = {**nargs, **kwargs}
    key = [all_args[k] for k in tuner.keys if k in all_args]
    key += [str(v.dtype) for k, v in all_args.items() if k in tuner.arg_names and hasattr(v, "dtype")]
    cached = getattr(tuner, "cache", {}).get(tuple(key))
    if cached is not None:
        return cached, "autotuner cache"
    if len(configs) > 1:
        tuner.nargs = nargs
        try:
            configs = tuner.prune_configs(kwargs)
        finally:
            tuner.nargs = None
    if len(configs) < 2:        # nothing to choose from: a config that cannot compile fails here as on the GPU
        return configs[0], "first config"
    return _first_that_compiles(tuner, configs, nargs, kwargs, tuple(key))


# Triton's autotuner compiles every config while it benchmarks them and drops one that fails a
# tl.static_assert (CompileTimeAssertionFailure) or needs more shared memory than the GPU has
# (OutOfResources); so does a library's tuner built on it. The interpreter would run any config, so the
# choice compiles them in order (to LLVM IR, far enough to know the shared memory; no ptxas) and takes the
# first that passes, once per autotune key as Triton benchmarks once per key: tuner -> {key: (config, how)}.
_COMPILED_CHOICE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _first_that_compiles(tuner, configs: list, nargs: dict, kwargs: dict, key: tuple):
    target, max_shared = gpu_target()
    memo_key = (key, target.arch, max_shared)
    try:
        memo = _COMPILED_CHOICE.setdefault(tuner, {})
        hash(memo_key)
    except TypeError:           # an unhashable key argument: compile again at each launch
        memo = {}
        memo_key = None
    if memo_key in memo:
        return memo[memo_key]
    dropped = []
    for index, cfg in enumerate(configs):
        why = _compile_failure(tuner, cfg, nargs, kwargs, target, max_shared)
        if why is None:
            break
        dropped.append(f"config {index} ({cfg}): {why}")
    else:   # every config fails: Triton's autotuner then launches the first, which fails to compile
        cfg = configs[0]
    how = "first config"
    if dropped:
        how = (f"first config that compiles for sm_{target.arch}; dropped as Triton's autotuner drops them: "
               + "; ".join(dropped)) if len(dropped) < len(configs) else \
            f"first config, though none compiles for sm_{target.arch}: " + "; ".join(dropped)
    memo[memo_key] = (cfg, how)
    return cfg, how


def gpu_target():
    """(GPUTarget, bytes of shared memory a program may use) of the GPU Triton's driver answers for: the CUDA
    redirect's chosen GPU, or a real one. Where no driver answers (a CPU-only machine outside the redirect),
    sm_90 and no shared-memory limit (only compile-time assertions are checked then)."""
    import triton
    from triton.backends.compiler import GPUTarget
    try:
        driver = triton.runtime.driver.active
        target = driver.get_current_target()
        props = driver.utils.get_device_properties(driver.get_current_device())
        return target, int(props["max_shared_mem"])
    except (RuntimeError, ImportError, AttributeError, KeyError):     # "0 active drivers" and kin
        return GPUTarget("cuda", 90, 32), None


def _compile_failure(tuner, cfg, nargs: dict, kwargs: dict, target, max_shared) -> Optional[str]:
    """Why ``cfg`` does not compile for ``target`` as Triton's autotuner would find out (a failed
    ``tl.static_assert``, too much shared memory), or None: it compiles, or it fails for another reason,
    which a GPU launch would raise too and the interpreter shows at its line."""
    from triton.compiler import ASTSource, make_backend
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.jit import create_function_from_signature
    parts = kernels.autotune_parts(tuner)
    values = {**nargs, **kwargs, **(cfg.all_kwargs() if hasattr(cfg, "all_kwargs") else cfg.kwargs)}
    for part in parts[1:]:
        if hasattr(part, "configs"):        # an autotuner below this one: its choice is made later
            return None
        for k, heur in part.values.items():
            values[k] = heur(values)
    jit = parts[-1].fn
    if not hasattr(jit, "params"):      # under TRITON_INTERPRET=1 triton.jit made an InterpretedFunction
        from triton.runtime.jit import JITFunction
        jit = JITFunction(jit.fn)
    names = {p.name for p in jit.params}
    try:
        backend = make_backend(target)
        known = set(backend.parse_options({}).__dict__)
        binder = create_function_from_signature(jit.signature, jit.params, backend)
        bound, spec, opts = binder(**{k: v for k, v in values.items() if k in names},
                                   **{k: v for k, v in values.items() if k in known and k not in names and v is not None})
        options, signature, constexprs, attrs = jit._pack_args(backend, opts, bound, spec, opts)
        src = ASTSource(jit, signature, constexprs, attrs)
        context = access.mlir_context(backend)
        module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                             backend.get_module_map(), context)
    except CompileTimeAssertionFailure as e:
        return _assertion_text(e)
    except Exception:               # noqa: BLE001 the binder and front end raise many kinds; not this check's
        return None
    if max_shared is None:
        return None
    stages, metadata = {}, {"hash": "0", "target": target, **options.__dict__}
    try:
        backend.add_stages(stages, options, src.language)
        for stage in ("ttir", "ttgir", "llir"):
            module = stages[stage](module, metadata)
    except Exception:               # noqa: BLE001 a lowering failure would fail on the GPU too: not a drop
        return None
    finally:
        del module, context         # free the MLIR objects now (else nanobind reports them leaked at exit)
    shared = int(metadata.get("shared") or 0)
    if shared > max_shared:
        return f"out of resource: shared memory, Required: {shared}, Hardware limit: {max_shared}"
    return None


def _assertion_text(err) -> str:
    """``tl.static_assert(...) failed[: message]`` from a CompileTimeAssertionFailure (its text shows the
    failing source line above a caret)."""
    lines = str(err).splitlines()
    code = next((lines[i - 1].strip() for i, ln in enumerate(lines) if i and ln.strip() == "^"), "tl.static_assert")
    message = (getattr(err, "error_message", None) or "").strip()
    return f"{code} failed" + (f": {message}" if message else "")


def _config_dict(cfg, how: str, configs: list) -> dict:
    index = next((i for i, c in enumerate(configs) if c is cfg), -1)
    d = {"kwargs": {k: json_arg(v) for k, v in cfg.kwargs.items()}, "chosen_by": how, "index": index}
    for attr in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        if getattr(cfg, attr, None) is not None:
            d[attr] = getattr(cfg, attr)
    return d

