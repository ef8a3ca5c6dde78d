"""``analyze(..., shadow="float64")``: a launch not recorded with the float64 shadow runs again with it, from
the inputs ``trace(inputs=True)`` kept.

The launch's kernel module is rebuilt as a reproducer rebuilds it (compiled/source.py: the kernel and its
helpers from the trace, through the same allowlist, refused for a file the user did not record, sign or
trust), every storage from its kept bytes, every tensor as a view of its storage with its recorded dtype,
shape, strides and offset (so aliasing is kept), and it is traced again, values off, with the shadow on and
the launch's numerics, grid, launch options and recorded programs. The rerun's records, which name lines of
the rebuilt module, are mapped back to the user's files and lines and added to a copy of the launch's
``meta`` (with ``shadow_rerun``: whether the rerun wrote exactly the bytes the trace kept). The analysis
then reads them as it reads records made at record time. Re-running is the one impure step of ``analyze``,
taken only when asked for.
"""
from __future__ import annotations

import ast
import dataclasses
import os
import shutil
import sys
import tempfile

import numpy as np

from ...errors import TraceUsageError

_RECORDS = ("shadow_run", "shadow_line", "shadow_store")


def with_shadow(launches: tuple, mode: str) -> tuple:
    """``launches``, each with its shadow records (re-run where it has none)."""
    from ...record.checks.shadow import MODES
    if mode not in MODES:
        raise TraceUsageError(f"analyze(shadow={mode!r}): the shadow is one of {', '.join(map(repr, MODES))}")
    return tuple(lc if (lc.meta or {}).get("shadow_run") else rerun(lc, i, mode) for i, lc in enumerate(launches))


def rerun(launch, index: int, mode: str = "float64"):
    """A copy of ``launch`` whose meta holds the shadow records of a rerun."""
    from ...compiled import require_trust
    from ...compiled.source import SAFE_PACKAGES, kernel_module
    from ...compiled.toolchain import import_module
    from ...record.checks.shadow import shadowing
    from ...record.options import TraceOptions
    from ...record.session import run_chain
    what = f"launch {index} of '{launch.kernel_name}'"
    kept = launch.module.inputs if launch.module is not None else None
    if launch.inputs is None or kept is None or not kept.kept:
        why = (kept.note if kept is not None and kept.note else "it was traced without them")
        raise TraceUsageError(
            f"analyze(shadow={mode!r}) runs {what} again from its inputs, and the trace has none ({why}): trace it "
            f"with trace(inputs=True) (or trace_all(inputs=True); a size such as inputs='4GB' for large ones), or "
            f"record it with the shadow on: `with triton_trace.record.checks.shadow.shadowing(): kernel[grid](...)`")
    require_trust(launch)
    foreign = launch.provenance in ("untrusted", "trusted")
    module = kernel_module(launch, SAFE_PACKAGES if foreign else None, strict=launch.provenance == "trusted")
    stores = _storages(launch)
    folder = tempfile.mkdtemp(prefix="triton_trace_shadow_")
    py = None
    try:
        py, path = import_module(module.text, folder)
        kwargs = {**_arguments(launch, stores), **launch.module.options()}
        programs = None
        if launch.skipped_programs and launch.recorded_ids is not None:
            programs = [tuple(int(v) for v in p) for p in launch.recorded_ids]
        numerics = (launch.meta or {}).get("numerics", "interpreter")
        opts = TraceOptions(programs=programs, values=False, numerics=numerics)
        opts.keep = False
        with shadowing(mode):
            again = run_chain(getattr(py, module.kernel), (), kwargs, tuple(int(g) for g in launch.grid), opts)
    finally:
        if py is not None:
            sys.modules.pop(py.__name__, None)
        shutil.rmtree(folder, ignore_errors=True)
    meta = {k: _mapped(k, v, path, module) for k, v in (again.meta or {}).items() if k in _RECORDS}
    meta["shadow_run"] = meta.get("shadow_run") or [{"mode": mode, "ops": 0}]
    meta["shadow_rerun"] = {"reproduced": _reproduced(launch, stores)}
    return dataclasses.replace(launch, meta={**(launch.meta or {}), **meta})


def _storages(launch) -> list:
    """One uint8 torch tensor per storage, holding its kept bytes before the launch."""
    import torch
    out, pos = [], 0
    for n in launch.module.inputs.storages:
        out.append(torch.from_numpy(np.array(launch.inputs[pos:pos + n], dtype=np.uint8)))
        pos += n
    return out


def _arguments(launch, stores: list) -> dict:
    import torch
    from ...compiled.source import constant_node
    tensors = {t.name: t for t in launch.tensors}
    out = {}
    for name, p in launch.module.params.items():
        t = tensors.get(name)
        if p.kind in ("tensor", "descriptor") and t is not None and 0 <= t.storage < len(stores):
            dtype = getattr(torch, t.dtype, None)
            if not isinstance(dtype, torch.dtype):
                raise TraceUsageError(f"launch of '{launch.kernel_name}': argument '{name}' has dtype {t.dtype!r}, "
                                      f"which is not a torch dtype")
            view = torch.empty(0, dtype=dtype).set_(stores[t.storage].untyped_storage(), t.storage_offset,
                                                    list(t.shape), list(t.strides))
            if p.kind == "descriptor":
                from triton.tools.tensor_descriptor import TensorDescriptor
                view = TensorDescriptor(view, list(p.shape), list(p.strides), list(p.block_shape))
            out[name] = view
        elif p.kind == "value":
            import triton.language as tl
            node = constant_node(p.expr, name)
            out[name] = eval(compile(ast.Expression(node), "<argument>", "eval"),   # a checked constant
                             {"__builtins__": {"float": float}, "tl": tl})
        else:
            raise TraceUsageError(f"launch of '{launch.kernel_name}': argument '{name}' ({p.type or p.kind}) cannot "
                                  f"be rebuilt to run the launch again with the shadow")
    return out


def _reproduced(launch, stores: list):
    """Whether the rerun left every written storage with the bytes the trace kept; None when none were kept."""
    kept = launch.module.inputs
    if launch.finals is None or not any(kept.written):
        return None
    pos = 0
    for k, (n, written) in enumerate(zip(kept.storages, kept.written)):
        if written:
            if not np.array_equal(stores[k].numpy(), np.asarray(launch.finals[pos:pos + n], np.uint8)):
                return False
            pos += n
    return True


def _mapped(name: str, entries, path: str, module):
    """The rerun's record ``name`` with the rebuilt module's lines as the user's files and lines."""
    def place(file, line):
        if file is not None and os.path.realpath(file) == os.path.realpath(path):
            found, at = module.original(int(line))
            if found is not None:
                return found, at
        return file, line
    out = []
    for e in entries:
        e = dict(e)
        if "file" in e:
            e["file"], e["line"] = place(e["file"], e["line"])
        if "part_files" in e:
            moved = [place(f or None, ln) for f, ln in zip(e["part_files"], e["part_lines"])]
            e["part_files"], e["part_lines"] = [f or "" for f, _ in moved], [int(ln) for _, ln in moved]
        out.append(e)
    return out
