"""Every touch of Triton's compiler: a traced launch compiled for a GPU target on this machine, no GPU needed.

The specialization is the one Triton's launcher computes on a GPU (the binder JITFunction.run builds, fed
stand-ins with the launch's dtypes and device addresses: pointer alignment, integers divisible by 16,
integers equal to 1 as constants), so the IR is what that launch would run. Registers, spills and stack come
from the cubin (cuobjdump -res-usage, shipped with Triton), as the driver would report them.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import warnings

import triton

from ..errors import TraceUsageError

# GPU names and targets a user may pass; the number is the CUDA compute capability
ARCHS = {"A100": 80, "A10": 86, "L4": 89, "L40S": 89, "H100": 90, "H200": 90, "B200": 100, "RTX5090": 120}
STAGES = ("ttir", "ttgir", "llir", "ptx")
ALIGN = 256          # cudaMalloc's alignment: a storage's first byte is aligned to this on the GPU


def arch_of(target) -> int:
    """``"sm_90"``, ``"sm90"``, ``90``, ``"H200"`` -> 90."""
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    text = str(target).strip()
    if text in ARCHS:
        return ARCHS[text]
    m = re.fullmatch(r"(?:sm_?|cuda:)?(\d{2,3})a?", text.lower())
    if m:
        return int(m.group(1))
    raise TraceUsageError(f"target {target!r}: give a CUDA architecture ('sm_80', 'sm_90', 'sm_100') or a GPU "
                          f"name ({', '.join(ARCHS)})")


def triton_version() -> str:
    return triton.__version__


def import_module(text: str, folder: str):
    """Import a kernel module from ``text`` through a file of a fresh random name in ``folder`` (Triton's JIT
    reads a function's source from its file); returns (module, path). The file is made with O_EXCL (no
    name to predict, no symlink followed) and its code compiled from the text here: no bytecode is written
    or read, so nothing planted under ``__pycache__`` can stand in for it. The caller removes the file."""
    fd, path = tempfile.mkstemp(prefix="k", suffix=".py", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    name = "_triton_trace_kernel_" + os.path.basename(path)[:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # Triton resolves a jit function's module by name
    exec(compile(text, path, "exec", dont_inherit=True), module.__dict__)
    return module, path


class DeviceTensor:
    """A stand-in for a GPU tensor argument: its dtype and the address its first element would have."""

    def __init__(self, dtype, address: int):
        self.dtype = dtype
        self._address = address

    def data_ptr(self) -> int:
        return self._address


def compile_jit(jit, args: dict, options: dict, arch: int, no_specialize=(), no_specialize_alignment=()) -> dict:
    """Compile ``jit`` for ``sm_<arch>`` with ``args`` (parameter name -> value or DeviceTensor) and the
    launch ``options`` (num_warps, num_stages, ...), leaving the parameters the original kernel's
    ``do_not_specialize`` (``..._on_alignment``) named unspecialized, as its GPU launcher does (the module is
    rebuilt under a plain ``@triton.jit``). Returns the IR texts, the specialization, the compile metadata and
    the cubin's resource usage."""
    for p in jit.params:
        if p.name in no_specialize:
            p.do_not_specialize = True
        if p.name in no_specialize_alignment:
            p.do_not_specialize_on_alignment = True
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    # Triton's own cache keys a kernel by its source, not by the file and line it sits at: a kernel module
    # written at other line numbers would get IR whose locations point at the old lines
    always = triton.knobs.compilation.always_compile
    try:
        triton.knobs.compilation.always_compile = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # Triton 3.9's FP-fusion default notice, once per compile
            bound, specialization, opts = binder(**args, **options)
            opts, signature, constexprs, attrs = jit._pack_args(backend, opts, bound, specialization, opts)
            kernel = triton.compile(ASTSource(jit, signature, constexprs, attrs), target=target,
                                    options=opts.__dict__)
    finally:
        triton.knobs.compilation.always_compile = always
    meta = kernel.metadata
    out = {stage: kernel.asm.get(stage, "") for stage in STAGES}
    out["signature"] = {k: str(v) for k, v in signature.items()}
    out["divisible_by_16"] = sorted(jit.params[p[0]].name for p, a in attrs.items()
                                    if any(x[0] == "tt.divisibility" for x in a))
    out["num_warps"], out["num_stages"] = int(meta.num_warps), int(meta.num_stages)
    out["shared_bytes"] = int(getattr(meta, "shared", 0) or 0)
    out["resources"] = resource_usage(kernel.asm.get("cubin", b""), jit.fn.__name__)
    out["triton"] = triton.__version__
    return out


def _cuobjdump() -> str:
    import triton.backends.nvidia as nv
    return os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump")


def resource_usage(cubin: bytes, name: str) -> dict:
    """{"registers", "stack", "shared", "local"} of the kernel in ``cubin``, or {} where unknown."""
    tool = _cuobjdump()
    if not cubin or not os.path.exists(tool):
        return {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        try:
            text = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
    found = {}
    for key, field in (("registers", "REG"), ("stack", "STACK"), ("shared", "SHARED"), ("local", "LOCAL")):
        m = re.search(rf"\b{field}:(\d+)", text)
        if m:
            found[key] = int(m.group(1))
    return found
