"""``triton_trace.compare``: one launch compiled on the GPU and traced on the CPU, same inputs, outputs compared.

The GPU and the trace start from the same bytes: every tensor argument is copied to each side with its
exact layout (padded rows, strided views, storage offset), and the outputs (arguments the kernel writes
and never reads; ``outputs=`` names them, else a first traced run finds them) are poisoned on both sides
(NaN, or a sentinel for integers), so an element one side wrote and the other did not shows up. Each
output is compared within a tolerance chosen from the ops the trace recorded: bit-exact for data movement
and integers, a few ulp for elementwise math (the GPU contracts to FMA, its exp/div/sqrt approximate),
log2(n) ulp more for reductions of n terms, sqrt(K) for ``tl.dot`` over K. Every element out of tolerance
comes with the program, op and source line that stored it in the trace. The user's tensors are not touched.
"""
from __future__ import annotations

import dataclasses

import inspect
import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .errors import TraceUsageError

POISON_INT = -1234567891
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class Tolerance:
    """How close the GPU's output must be to the trace's, and why that much."""
    kind: str              # "exact" | "elementwise" | "reduction" | "dot" | "stated"
    n: int = 1             # reduction: terms summed per element; dot: K
    rtol: float = 0.0      # "stated": the caller's (rtol, atol)
    atol: float = 0.0

    def ulps(self) -> float:
        return {"elementwise": 8.0, "reduction": 2.0 * math.ceil(math.log2(max(self.n, 2))) + 8.0,
                "dot": 4.0 * math.sqrt(max(self.n, 1)) + 8.0}.get(self.kind, 0.0)

    def describe(self) -> str:
        if self.kind == "exact":
            return "bit-exact"
        if self.kind == "stated":
            return f"|gpu - trace| <= {self.rtol:g}*|trace| + {self.atol:g}"
        what = {"elementwise": "elementwise math", "reduction": f"sums of up to {self.n} terms",
                "dot": f"tl.dot over K = {self.n}"}[self.kind]
        return f"|gpu - trace| <= {self.ulps():g} eps (|trace| + max|trace|) ({what})"


def tolerance_for(launch, dtype_is_float: bool) -> Tolerance:
    """The tolerance the ops of a traced launch call for (see the module docstring)."""
    if not dtype_is_float:
        return Tolerance("exact")
    from .model import KIND_CODE
    o = launch.ops
    kinds = set(np.unique(o["kind"]).tolist())
    if KIND_CODE["dot"] in kinds:
        rows = o["kind"] == KIND_CODE["dot"]
        return Tolerance("dot", int(o["aux"][rows][:, 2].max()))
    reduce_rows = np.isin(o["kind"], [KIND_CODE["reduce"], KIND_CODE["scan"]])
    if reduce_rows.any():
        aux = o["aux"][reduce_rows].astype(np.int64)
        return Tolerance("reduction", int(np.max(aux[:, 0] // np.maximum(aux[:, 1], 1))))
    if KIND_CODE["math"] in kinds:
        return Tolerance("elementwise")
    return Tolerance("exact")


# --------------------------------------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------------------------------------
def _descriptor(x) -> bool:
    """A host-side TensorDescriptor (triton.tools.tensor_descriptor): a tensor plus a block shape."""
    import torch
    return hasattr(x, "block_shape") and torch.is_tensor(getattr(x, "base", None))


def _tensor(x):
    """The tensor an argument reads and writes: itself, or a descriptor's base."""
    return x.base if _descriptor(x) else x


def to_device(x, device: str):
    """A copy of ``x`` on ``device`` with the same storage contents, size, strides and storage offset (a
    tensor descriptor: the same descriptor over such a copy of its base)."""
    import torch
    if _descriptor(x):
        return dataclasses.replace(x, base=to_device(x.base, device))
    if not torch.is_tensor(x):
        return x
    flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(
        x.untyped_storage(), 0, (x.untyped_storage().nbytes() // x.element_size(),), (1,))
    return flat.to(device, copy=True).as_strided(x.shape, x.stride(), x.storage_offset())   # a copy, always


def poison_(t):
    import torch
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype in (torch.int32, torch.int64):
        t.fill_(POISON_INT)
    elif t.dtype in (torch.int8, torch.uint8, torch.int16):
        t.fill_(0x5A)
    return t


def unwritten(t):
    import torch
    if t.dtype.is_floating_point:
        return torch.isnan(t)
    if t.dtype in (torch.int32, torch.int64):
        return t == POISON_INT
    return torch.zeros_like(t, dtype=torch.bool)


def _bits(t):
    """Floats as integers of their width, so NaN payloads and -0.0 compare bit for bit."""
    import torch
    if not t.dtype.is_floating_point:
        return t
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def differing(gpu, trace, tol: Tolerance):
    """Boolean mask of the elements of two CPU tensors that ``tol`` does not accept: out of tolerance, or
    written on one side only (poison on the other)."""
    poisoned = unwritten(gpu) ^ unwritten(trace)
    if tol.kind == "exact" or not gpu.dtype.is_floating_point:
        both_unwritten = unwritten(gpu) & unwritten(trace)
        return ((_bits(gpu) != _bits(trace)) & ~both_unwritten) | poisoned
    g, t = gpu.double(), trace.double()
    written = ~unwritten(trace)
    if tol.kind == "stated":
        bound = tol.rtol * t.abs() + tol.atol
    else:
        import torch
        scale = float(t[written].abs().max()) if written.any() else 0.0
        bound = tol.ulps() * torch.finfo(gpu.dtype).eps * (t.abs() + scale)
    close = ((g - t).abs() <= bound) | (unwritten(gpu) & unwritten(trace)) | (g == t)
    return ~close | poisoned


# --------------------------------------------------------------------------------------------------------
# the result
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputComparison:
    name: str
    tolerance: str               # Tolerance.describe()
    elements: int
    differing: int
    unwritten_gpu: int
    unwritten_trace: int
    max_abs_diff: float
    examples: tuple              # {"index", "gpu", "trace", "program", "op", "line", "file"} (None: no writer)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Comparison:
    kernel: str
    outputs: tuple               # OutputComparison
    trace: object                # the Trace of the CPU run (one launch)

    @property
    def ok(self) -> bool:
        return all(o.differing == 0 for o in self.outputs)

    def summary(self) -> str:
        lines = [f"{self.kernel}: GPU and trace " + ("agree" if self.ok else "differ")]
        for o in self.outputs:
            state = "agree" if not o.differing else f"{o.differing} of {o.elements} element(s) differ"
            lines.append(f"  {o.name}: {state} ({o.tolerance}; max |diff| {o.max_abs_diff:.3g})")
            for e in o.examples[:5]:
                who = (f"stored by program {tuple(e['program'])} op {e['op']} at {e['file']}:{e['line']}"
                       if e.get("program") is not None else "written by no program of the trace")
                lines.append(f"    {o.name}{list(e['index'])}: gpu {e['gpu']}, trace {e['trace']}; {who}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "ok": self.ok, "outputs": [o.to_dict() for o in self.outputs]}


def _writers(launch, t: int, offsets: np.ndarray) -> dict:
    """storage offset -> the op row that stored it last (execution order)."""
    from .analysis.diff import final_writes
    w = final_writes(launch, t)
    pos = np.searchsorted(w.offsets, offsets)
    found = {}
    for off, p in zip(offsets.tolist(), pos.tolist()):
        if p < len(w.offsets) and w.offsets[p] == off:
            found[off] = int(w.rows[p])
    return found


def _plain(v):
    v = float(v)
    return v if math.isfinite(v) else repr(v)


def compare_output(name: str, launch, t: int, gpu, trace, tol: Tolerance) -> OutputComparison:
    g, tr = gpu.detach().cpu(), trace.detach().cpu()
    bad = differing(g, tr, tol)
    flat = np.flatnonzero(bad.reshape(-1).numpy())
    idx = np.stack(np.unravel_index(flat[:MAX_EXAMPLES], tuple(g.shape)), axis=1) if g.dim() else \
        np.zeros((min(len(flat), MAX_EXAMPLES), 0), np.int64)
    offsets = tr.storage_offset() + (idx * np.asarray(tr.stride(), np.int64)).sum(axis=1) if len(idx) else np.zeros(0, np.int64)
    who = _writers(launch, t, offsets.astype(np.int64))
    o = launch.ops
    examples = []
    for k, off in zip(idx.tolist(), offsets.tolist()):
        row = who.get(off)
        where = {"program": None, "op": None, "line": None, "file": None} if row is None else {
            "program": [int(v) for v in o["program"][row]], "op": int(o["seq"][row]), "line": int(o["line"][row]),
            "file": launch.files[int(o["file"][row])] if 0 <= int(o["file"][row]) < len(launch.files) else None}
        examples.append({"index": k, "gpu": _plain(g[tuple(k)]), "trace": _plain(tr[tuple(k)]), **where})
    diff = (g.double() - tr.double()).abs().nan_to_num(0) if g.numel() else g.double()
    return OutputComparison(name, tol.describe(), int(g.numel()), int(bad.sum()), int(unwritten(g).sum()),
                            int(unwritten(tr).sum()), float(diff.max()) if g.numel() else 0.0, tuple(examples))


# --------------------------------------------------------------------------------------------------------
# running both sides
# --------------------------------------------------------------------------------------------------------
def _names(kernel) -> list:
    from .record.interp import hooks
    return list(inspect.signature(hooks.python_fn(kernel)).parameters)


def _bound(kernel, args, kwargs) -> dict:
    names = _names(kernel)
    if len(args) > len(names):
        raise TraceUsageError(f"compare(): {len(args)} positional arguments for a kernel of {len(names)} parameters")
    return {**dict(zip(names, args)), **kwargs}


def _launch(kernel, grid, bound: dict, traced: bool, **trace_opts):
    """Run ``kernel`` (Triton's own ``run``) or traced; returns the launches it recorded."""
    from .record.session import current_trace, trace
    own = kernel.__dict__.pop("run", None)
    try:
        if not traced:
            try:
                kernel[grid](**bound)
            except RuntimeError as e:
                # device-side tensor descriptors need scratch memory from an allocator the caller may not
                # have set; give Triton torch's, as its own tests do, and launch again
                if "no allocator was set" not in str(e):
                    raise
                import torch
                import triton
                triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
                kernel[grid](**bound)
            return ()
        before = len(current_trace().launches)
        trace(**trace_opts)(kernel)[grid](**bound)
        return tuple(current_trace().launches[before:])
    finally:
        kernel.__dict__.pop("run", None)
        if own is not None:
            kernel.run = own


def _written(launch) -> tuple:
    """(names of the tensors the launch writes, those of them it never reads)."""
    from .model import KIND_CODE, READ_KINDS, WRITE_KINDS
    o = launch.ops
    reads, writes = {KIND_CODE[k] for k in READ_KINDS}, {KIND_CODE[k] for k in WRITE_KINDS}
    written, only = [], []
    for t, info in enumerate(launch.tensors):
        kinds = set(o["kind"][o["tensor"] == t].tolist())
        if kinds & writes:
            written.append(info.name)
            if not kinds & reads:
                only.append(info.name)
    return written, only


def compare(kernel, grid, *args, outputs=None, rtol: Optional[float] = None, atol: Optional[float] = None,
            **kwargs) -> Comparison:
    """Launch ``kernel[grid](*args, **kwargs)`` compiled on the GPU and traced on the CPU from the same
    inputs, and compare what it wrote (see the module docstring). ``outputs``: names of the arguments to
    compare (default: every tensor the trace sees written); ``rtol`` / ``atol``: a tolerance of your own
    instead of the one the ops call for. Needs a CUDA GPU; the arguments may live on any device and are not
    modified. Arguments the kernel writes without reading are poisoned on both sides first."""
    import torch
    if not torch.cuda.is_available():
        raise TraceUsageError("triton_trace.compare() runs the kernel on a GPU, and torch.cuda.is_available() is "
                              "False here: trace it on the CPU with @triton_trace.trace instead")
    bound = _bound(kernel, args, kwargs)
    tensors = [k for k, v in bound.items() if torch.is_tensor(_tensor(v))]
    # a first traced run, on copies, tells what the kernel writes and what it only writes (safe to poison)
    (scout,) = _launch(kernel, grid, {k: to_device(v, "cpu") for k, v in bound.items()}, traced=True, values=False)
    written, write_only = _written(scout)
    outputs = written if outputs is None else [outputs] if isinstance(outputs, str) else list(outputs)
    missing = [n for n in outputs if n not in tensors]
    if missing:
        raise TraceUsageError(f"compare(outputs=...): {missing} are not tensor arguments of "
                              f"{scout.kernel_name}; they are {tensors}")
    on_gpu = {k: to_device(v, "cuda") for k, v in bound.items()}
    on_cpu = {k: to_device(v, "cpu") for k, v in bound.items()}
    for name in write_only:
        poison_(_tensor(on_gpu[name]))
        poison_(_tensor(on_cpu[name]))
    _launch(kernel, grid, on_gpu, traced=False)
    torch.cuda.synchronize()
    (launch,) = _launch(kernel, grid, on_cpu, traced=True, outputs=tuple(write_only))
    from .model import Trace
    results = []
    for name in outputs:
        tol = Tolerance("stated", rtol=rtol or 0.0, atol=atol or 0.0) if rtol is not None or atol is not None \
            else tolerance_for(launch, _tensor(on_cpu[name]).dtype.is_floating_point)
        results.append(compare_output(name, launch, launch.tensor_index(name), _tensor(on_gpu[name]),
                                      _tensor(on_cpu[name]), tol))
    return Comparison(launch.kernel_name, tuple(results), Trace((launch,)))


@contextmanager
def compare_all(kernels=None):
    """Inside the block, every kernel launched on CUDA tensors is first compared (``compare``, on copies),
    then runs as it would have. Yields the list the Comparisons go to, in launch order; ``kernels`` limits
    it to kernels of these (Python function) names. ``triton-trace diff --gpu script.py`` is this around a
    script."""
    import torch
    from .record.interp import hooks
    from .record.session import _on_gpu
    if not torch.cuda.is_available():
        raise TraceUsageError("compare_all() runs kernels on a GPU, and torch.cuda.is_available() is False here")
    names = None if kernels is None else ({kernels} if isinstance(kernels, str) else set(kernels))
    results: list = []
    busy = threading.local()

    def handler(kernel_obj, original_run, *args, grid, warmup=False, **kwargs):
        wanted = names is None or hooks.python_fn(kernel_obj).__name__ in names
        if warmup or getattr(busy, "on", False) or not wanted or not _on_gpu(args, kwargs):
            return original_run(kernel_obj, *args, grid=grid, warmup=warmup, **kwargs)
        busy.on = True           # the launches compare() makes go straight to Triton
        try:
            results.append(compare(kernel_obj, grid, *args, **kwargs))
        finally:
            busy.on = False
        return original_run(kernel_obj, *args, grid=grid, warmup=warmup, **kwargs)

    with hooks.kernel_runs_routed(handler):
        yield results
