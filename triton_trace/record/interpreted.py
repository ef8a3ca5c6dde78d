"""What a routed ``kernel.run(...)`` returns in place of Triton's CompiledKernel (``trace_all``), so a library
that keeps the compiled kernel and launches it later launches the traced jit function again."""
from __future__ import annotations

import inspect

from . import autotune
from .interp import hooks


class InterpretedKernel:
    """What a routed ``kernel.run(...)`` returns in place of Triton's CompiledKernel. A library that caches
    that result and launches it later as ``compiled[grid](*args)`` (FlagGems' LibEntry) launches the jit
    function again, through whatever route is active then: ``args`` are all its parameters in order, or
    only the non-constexpr ones (the compiled launcher's), the constexprs then those of the first call."""

    def __init__(self, kernel_obj, args, kwargs, launch=None):
        self.launch = launch            # the traced launch, for ``asm``
        self._asm = None
        jit = kernel_obj
        while isinstance(jit, (hooks.Autotuner, hooks.Heuristics)):
            jit = jit.fn
        self.fn = jit
        params = list(inspect.signature(hooks.python_fn(jit)).parameters.values())
        self.names = [p.name for p in params]
        self.runtime = [p.name for p, jp in zip(params, getattr(jit, "params", params))
                        if not getattr(jp, "is_constexpr", False)]
        chosen = {}
        for part in hooks.autotune_parts(kernel_obj):
            cfg = getattr(part, "best_config", None)
            if cfg is not None:
                chosen.update(cfg.all_kwargs() if hasattr(cfg, "all_kwargs") else cfg.kwargs)
        self.first = {**dict(zip(self.names, args)), **kwargs, **chosen}
        self.metadata = None

    @property
    def asm(self) -> dict:
        """The launch's IR as the GPU Triton's driver answers for would compile it (``ttir``, ``ttgir``,
        ``llir``, ``ptx``), compiled on this machine on first use: tests that read ``kernel[grid](...).asm``
        (``"%smid" in h.asm["ptx"]``) read the compiler's."""
        if self._asm is None:
            if self.launch is None:
                raise AttributeError("asm: this launch was not recorded (trace_all's programs=/kernels= filter)")
            self._asm = dict(self.launch.compiled(target=autotune.gpu_target()[0].arch).ir)
        return self._asm

    def __getitem__(self, grid):
        def launch(*args, stream=None, **kwargs):
            names = self.names if len(args) == len(self.names) else self.runtime
            bound = {**self.first, **dict(zip(names, args)), **kwargs}
            return self.fn.run(grid=grid, warmup=False, **bound)
        return launch

    def __repr__(self) -> str:
        return f"<triton_trace InterpretedKernel of {hooks.python_fn(self.fn).__name__}>"
