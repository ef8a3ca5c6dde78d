"""A launch as a standalone reproducer: a folder with ``launch.py`` (the kernel module, every argument
rebuilt, the grid, a check of the outputs) and ``launch_data.npz`` (the storages' bytes before the launch and,
when known, after it). ``Launch.reproducer(path)`` and ``triton-trace repro`` write it.

Inputs are exact when the trace kept them (``trace(inputs=True)``, up to its size budget); otherwise, or
with ``data="stats"``, every storage is filled with random values of the recorded dtype, mean, standard
deviation, range and NaN/Inf counts, and the script says the outputs cannot be compared.
"""
from __future__ import annotations

import os

import numpy as np

from ..compiled.source import SAFE_PACKAGES, kernel_module
from ..errors import TraceUsageError
from .script import render
from .stats import stand_in_storages

DATA_FILE = "launch_data.npz"
SCRIPT_FILE = "launch.py"


def _storage_bytes(launch) -> tuple:
    """(input bytes per storage, final bytes per written storage index) from the kept inputs."""
    desc = launch.module.inputs
    inputs, finals, pos, fpos = [], {}, 0, 0
    for k, (n, w) in enumerate(zip(desc.storages, desc.written)):
        inputs.append(launch.inputs[pos:pos + n])
        pos += n
        if w:
            finals[k] = launch.finals[fpos:fpos + n]
            fpos += n
    return inputs, finals


def _tensors(launch, params: dict) -> dict:
    """Parameter name -> how to rebuild its tensor (``params``: name -> model.Param); refuses arguments a
    script cannot rebuild."""
    out, refused = {}, []
    by_name = {t.name: t for t in launch.tensors}
    for name, p in params.items():
        if p.kind in ("tensor", "descriptor"):
            t = by_name.get(name)
            if t is None or t.storage < 0:
                refused.append(f"'{name}' (its storage is unknown)")
                continue
            out[name] = {"storage": t.storage, "dtype": t.dtype, "shape": list(t.shape), "strides": list(t.strides),
                         "offset": t.storage_offset}
        elif p.kind != "value":
            refused.append(f"'{name}' (a {p.type or p.kind})")
    if refused:
        raise TraceUsageError(f"launch of '{launch.kernel_name}': a reproducer cannot rebuild the arguments "
                              f"{', '.join(refused)}; it rebuilds tensors, tensor descriptors and constants")
    return out


def findings_of(launch) -> list:
    """The launch's findings, one per kind, tensor and line (counts summed): the script says which it
    reproduces, and refuses to run one that accesses memory out of bounds untraced."""
    from ..analysis import analyze
    from ..model import Trace
    merged: dict = {}
    for f in analyze(Trace((launch,)), layouts="model", what_if=False).findings:
        key = (f.kind, f.tensor, int(f.line or 0))
        merged[key] = merged.get(key, 0) + int(f.count or 0)
    return [{"kind": k, "tensor": t, "line": line, "count": n} for (k, t, line), n in merged.items()]


def write_reproducer(launch, path, data: str = "auto", index: int = 0, seed: int = 0) -> str:
    """Write the reproducer of ``launch`` into folder ``path``; returns the script's path."""
    if data not in ("auto", "exact", "stats"):
        raise TraceUsageError(f"reproducer(data=...) is 'auto', 'exact' or 'stats', not {data!r}")
    # a launch from a file this user did not record or sign: its module may import only Triton, torch, numpy
    # and math, its bodies must pass the Triton-language allowlist, and the script refuses to run until
    # told --trust
    foreign = (launch.origin or "a trace file") if launch.provenance in ("untrusted", "trusted") else None
    module = kernel_module(launch, SAFE_PACKAGES if foreign else None, strict=foreign is not None)
    params = launch.module.params
    tensors = _tensors(launch, params)
    described = launch.module.inputs
    kept = launch.inputs is not None and described is not None and described.kept
    why = described.note if described is not None else None     # over the size budget
    if data == "exact" and not kept:
        why = why or "it was traced without trace(inputs=True)"
        raise TraceUsageError(f"launch of '{launch.kernel_name}': no exact inputs to write ({why}); "
                              f"use data='stats' for random inputs with the recorded statistics")
    exact = kept and data != "stats"
    arrays = {}
    if exact:
        inputs, finals = _storage_bytes(launch)
        note = "exact: the bytes of every storage as the traced launch found them"
    else:
        inputs, finals = stand_in_storages(launch, tensors, seed), {}
        note = ("statistical stand-ins: random values with each tensor's recorded dtype, mean, std, range and "
                "NaN/Inf counts (" + ("asked for" if kept else why or
                                      "the launch was traced without trace(inputs=True)") + ")")
    for k, b in enumerate(inputs):
        arrays[f"input_{k}"] = np.asarray(b, np.uint8)
    for k, b in finals.items():
        arrays[f"final_{k}"] = np.asarray(b, np.uint8)
    if launch.completed is False:
        note += f"; the traced launch did not complete ({launch.error})"
    os.makedirs(path, exist_ok=True)
    np.savez_compressed(os.path.join(path, DATA_FILE), **arrays)
    script = render(launch, module, tensors, params, exact=exact, note=note, index=index,
                    storages=len(inputs), finals=sorted(finals), foreign=foreign, findings=findings_of(launch))
    out = os.path.join(path, SCRIPT_FILE)
    with open(out, "w", encoding="utf-8") as f:
        f.write(script)
    return out
