"""CUDA extensions under the CUDA redirect: ``torch.utils.cpp_extension.load`` / ``load_inline`` of CUDA
sources raise ``RequiresGPU`` (installed by cudaapi.py). Building one is pointless (its kernels cannot run
on CPU tensors) and slow (nvcc), and on a machine without the toolkit it fails with an error that does not
say why; ``pytest --tt-cuda`` skips the test, or the test file that builds one when imported.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys

from ..errors import RequiresGPU
from ..record.patching import Scope

_EXTENSIONS = "torch.utils.cpp_extension"


def install(scope: Scope) -> None:
    """``torch.utils.cpp_extension.load`` / ``load_inline`` of CUDA sources raise RequiresGPU. The module
    imports setuptools, so it is patched when the suite imports it, not imported here."""
    module = sys.modules.get(_EXTENSIONS)
    if module is not None:
        _refuse_cuda_builds(scope, module)
        return
    finder = _OnImport(_EXTENSIONS, lambda m: _refuse_cuda_builds(scope, m))
    sys.meta_path.insert(0, finder)
    scope.on_restore(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)


def _refuse_cuda_builds(scope: Scope, module) -> None:
    for name, cuda in (("load", _cuda_sources), ("load_inline", _inline_cuda_sources)):
        original = getattr(module, name, None)
        if original is not None:
            scope.set_attr(module, name, _refusing(original, name, cuda))


def _refusing(original, name: str, cuda):
    signature = inspect.signature(original)

    def build(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs).arguments
        sources = cuda(bound)
        if sources:
            raise RequiresGPU(f"a CUDA extension (torch.utils.cpp_extension.{name} of {bound.get('name')!r} "
                              f"from {', '.join(sources)})")
        return original(*args, **kwargs)
    build.__name__, build.__doc__ = original.__name__, original.__doc__
    return build


def _cuda_sources(bound: dict) -> list:
    sources = bound.get("sources") or []
    sources = [sources] if isinstance(sources, str) else list(sources)
    out = [os.path.basename(str(s)) for s in sources if str(s).endswith((".cu", ".cuh"))]
    return out or (["with_cuda=True"] if bound.get("with_cuda") else [])


def _inline_cuda_sources(bound: dict) -> list:
    return ["cuda_sources"] if bound.get("cuda_sources") else ["with_cuda=True"] if bound.get("with_cuda") else []


class _OnImport:
    """A meta path finder that runs ``then(module)`` once ``name`` is imported (and executed)."""

    def __init__(self, name: str, then):
        self.name, self.then, self.busy = name, then, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self.busy:
            return None
        self.busy = True               # the real finders answer for it below
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        run = getattr(spec and spec.loader, "exec_module", None)
        if run is not None:            # (a loader made for this one import: wrapping it touches nothing else)
            def exec_module(module):
                run(module)
                self.then(module)
            spec.loader.exec_module = exec_module
        return spec
