"""Run a kernel compiled for the GPU and traced on the CPU on the same inputs, and compare the outputs.

The pieces: moving inputs to a device with their exact layout (padded rows and strided views survive),
poisoning every output the launcher allocates (NaN, or a sentinel for integers, so an element no program
wrote shows up), the tolerance classes, and ``who_wrote``: for elements that differ, the program, op and
source line of the traced launch that stored them last.
"""
from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

# the layout-exact copies, the poison and its test are the product's (triton_trace.compare uses them)
from triton_trace.gpucheck import POISON_INT, _bits, poison_, to_device, unwritten  # noqa: F401

EPS = 2.0 ** -23                  # fp32 unit roundoff x 2: the spacing of floats in [1, 2)
WRITE_KINDS = ("store", "atomic_add", "atomic_max", "atomic_min", "atomic_or", "atomic_and", "atomic_xor",
               "atomic_xchg", "atomic_cas")


@dataclass(frozen=True)
class Tol:
    """How close the GPU's output must be to the trace's, and why that much."""
    kind: str          # "exact" | "elementwise" | "reduction" | "dot" | "stated"
    n: int = 1         # reduction: terms summed per element; dot: K
    why: str = ""
    rtol: float = 0.0  # "stated": the kernel's own tolerance against its reference, (rtol, atol)
    atol: float = 0.0

    def ulps(self) -> float:
        if self.kind == "elementwise":
            return 8.0
        if self.kind == "reduction":
            return 2.0 * math.ceil(math.log2(max(self.n, 2))) + 8.0
        return 0.0

    def describe(self) -> str:
        if self.kind == "exact":
            return "bit-exact"
        if self.kind == "dot":
            return f"‖out − ref64‖/‖ref64‖ ≤ {DOT_REL:g}, each side (K = {self.n})"
        if self.kind == "stated":
            return f"|Δ| ≤ 2·({self.rtol:g}·|x| + {self.atol:g})"
        return f"|Δ| ≤ {self.ulps():g}·eps·(|x| + max|x|)"


DOT_REL = 1e-5
EXACT = Tol("exact", why="integers, data movement, or one correctly rounded IEEE op per element "
                         "(+, -, x): IEEE 754 fixes every bit, on both sides")
ELEMENTWISE = Tol("elementwise", why="a short chain of fp32 ops: the GPU may contract a*b+c into one FMA "
                                     "(one rounding instead of two; the absolute term covers cancellation) "
                                     "and its exp/div/sqrt are approximations within 2 ulp")


def reduction(n: int) -> Tol:
    return Tol("reduction", n, why=f"sums of up to {n} terms in another order (GPU: a tree across lanes "
                                    f"and warps; interpreter: numpy's pairwise sum): each order's error "
                                    f"grows like log2(n)·eps, plus the elementwise ops around it")


def stated(rtol: float, atol: float) -> Tol:
    return Tol("stated", why=f"the kernel's own tolerance against its torch reference (rtol {rtol:g}, atol "
                             f"{atol:g}); both sides within it are within twice it of each other",
               rtol=rtol, atol=atol)


def dot(k: int) -> Tol:
    return Tol("dot", k, why=f"fp32 products accumulated over K = {k}: rounding grows like sqrt(K)·eps "
                             f"(about 1e-6 here); 1e-5 leaves 5x, tf32 would be about 1e-3")


# --------------------------------------------------------------------------------------------------------
# inputs and outputs
# --------------------------------------------------------------------------------------------------------
@contextmanager
def poisoned_allocations():
    """Every torch.empty / empty_like / empty_strided inside the block comes back poisoned."""
    originals = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}

    def wrap(alloc):
        def poisoned(*args, **kwargs):
            return poison_(alloc(*args, **kwargs))
        return poisoned

    for name, alloc in originals.items():
        setattr(torch, name, wrap(alloc))
    try:
        yield
    finally:
        for name, alloc in originals.items():
            setattr(torch, name, alloc)


@contextmanager
def recording_args(kernel, log: list):
    """Log the tensor arguments of every launch of a traced kernel (its instance ``run``), by name."""
    from triton_trace.record.interp import hooks
    inner = kernel.__dict__["run"]
    names = list(inspect.signature(hooks.python_fn(kernel)).parameters)

    def run(*args, grid, warmup=False, **kwargs):
        bound = {**dict(zip(names, args)), **kwargs}
        tensors = {}
        for k, v in bound.items():
            base = getattr(v, "base", None)          # a host TensorDescriptor holds its tensor as .base
            if torch.is_tensor(v):
                tensors[k] = v
            elif torch.is_tensor(base):
                tensors[k] = base
        log.append(tensors)
        return inner(*args, grid=grid, warmup=warmup, **kwargs)

    kernel.run = run
    try:
        yield
    finally:
        kernel.run = inner


@contextmanager
def untraced(kernel):
    """A kernel decorated with @triton_trace.trace, compiled as Triton would without the decorator."""
    own = kernel.__dict__.pop("run", None)
    try:
        yield kernel
    finally:
        if own is not None:
            kernel.run = own


# --------------------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------------------
def compare(gpu: torch.Tensor, tr: torch.Tensor, tol: Tol, ref: Optional[torch.Tensor] = None) -> dict:
    """Summary of one output pair, with ``bad``: the boolean mask of elements out of tolerance."""
    g = gpu.detach().cpu()
    out = {"tol": tol.kind, "bound": tol.describe(), "shape": list(g.shape), "dtype": str(g.dtype)[6:],
           "unwritten_gpu": int(unwritten(g).sum()), "unwritten_trace": int(unwritten(tr).sum())}
    if tuple(g.shape) != tuple(tr.shape) or g.dtype != tr.dtype:
        out["error"] = f"GPU output {tuple(g.shape)} {g.dtype}, trace output {tuple(tr.shape)} {tr.dtype}"
        out["bad"] = torch.ones(1, dtype=torch.bool)
        return out
    poisoned = unwritten(g) | unwritten(tr)
    if tol.kind == "exact" or not g.dtype.is_floating_point:
        bad = (_bits(g) != _bits(tr)) | poisoned
        out["max_abs_diff"] = float((g.double() - tr.double()).abs().nan_to_num(0).max()) if g.numel() else 0.0
    else:
        gd, td = g.double(), tr.double()
        diff = (gd - td).abs()
        scale = float(td[~poisoned].abs().max()) if (~poisoned).any() else 0.0
        if tol.kind == "stated":
            bound = 2 * (tol.rtol * td.abs() + tol.atol)
        else:
            k = tol.ulps() if tol.kind != "dot" else 4.0 * math.sqrt(tol.n) + 8.0
            bound = k * torch.finfo(g.dtype).eps * (td.abs() + scale)
        bad = ~(diff <= bound) | poisoned
        out["max_abs_diff"] = float(diff.nan_to_num(0).max()) if g.numel() else 0.0
        out["worst_over_bound"] = round(float((diff / bound.clamp_min(1e-300)).nan_to_num(0).max()), 4) \
            if g.numel() else 0.0
        if tol.kind == "dot":
            r = ref.double()
            norm = float(r.norm())
            out["rel_err_gpu"] = float((gd - r).norm()) / norm
            out["rel_err_trace"] = float((td - r).norm()) / norm
            out["rel_diff_gpu_trace"] = float((gd - td).norm()) / norm
            dot_ok = out["rel_err_gpu"] <= DOT_REL and out["rel_err_trace"] <= DOT_REL
            bad = poisoned | (torch.zeros_like(bad) if dot_ok else bad)
    out["bad_elements"] = int(bad.sum())
    out["bad"] = bad
    return out


def who_wrote(launches: list, arg_logs: list, out: torch.Tensor, flat: np.ndarray) -> list:
    """For flat indices of ``out`` (a CPU tensor the traced run returned): the launch, program, op and
    line that stored each element last, from the trace; one dict per index."""
    from triton_trace.model import KIND_CODE
    idx = np.unravel_index(flat, tuple(out.shape)) if out.dim() else (np.zeros(len(flat), dtype=np.int64),)
    offs = out.storage_offset() + sum(np.asarray(i, dtype=np.int64) * s for i, s in zip(idx, out.stride()))
    ptr = out.untyped_storage().data_ptr()
    codes = [KIND_CODE[k] for k in WRITE_KINDS if k in KIND_CODE]
    found: dict = {}
    for li in reversed(range(min(len(launches), len(arg_logs)))):
        lc = launches[li]
        for name, t in arg_logs[li].items():
            if t.untyped_storage().data_ptr() != ptr:
                continue
            ti = lc.tensor_index(name)
            rows = np.nonzero((lc.ops["tensor"] == ti) & np.isin(lc.ops["kind"], codes))[0]
            counts = lc.ops["lane_count"][rows].astype(np.int64)
            starts = lc.ops["lane_start"][rows].astype(np.int64)
            lane = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
            owner = np.repeat(rows, counts)
            keep = lc.mask[lane] & np.isin(lc.offsets[lane], offs)
            for off, row in zip(lc.offsets[lane][keep], owner[keep]):
                if int(off) not in found or found[int(off)][1] < row:    # the last writer in record order
                    found[int(off)] = (li, int(row))
        if found:
            break
    result = []
    for i, off in zip(flat, offs):
        if int(off) not in found:
            result.append({"index": int(i), "writer": None})
            continue
        li, row = found[int(off)]
        a = launches[li].access(row)
        result.append({"index": int(i), "launch": li, "kernel": launches[li].kernel_name,
                       "program": list(a.program), "op": a.kind, "tensor": a.tensor,
                       "line": f"{a.file}:{a.line}"})
    return result
