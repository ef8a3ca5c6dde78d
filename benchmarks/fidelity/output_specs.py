"""Inputs, launch and tolerances for every kernel of the test suite (tests/kernels) and of examples/.

A ``Spec`` draws fresh random CPU inputs (never zeros), launches through a device-agnostic launcher with
one kernel per slot, and says how close each output of the GPU run must be to the traced run's. Kernels
of tests/kernels are found by their ``make_<name>`` factory, named in a spec's ``slots`` (or ``covers``);
kernels of examples/ by ``EXAMPLES``. output_compare.py enumerates both and reports any kernel without a spec.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import triton

import kernels as K
from output_check import ELEMENTWISE, EXACT, dot, reduction, stated


@dataclass(frozen=True)
class Spec:
    name: str
    slots: dict                         # slot -> name of the tests/kernels factory that fills it by default
    inputs: Callable                    # (torch.Generator) -> tuple of CPU inputs
    call: Callable                      # (kernels by slot, inputs on the device) -> output tensor(s)
    tols: tuple                         # one Tol per output
    reference: Optional[Callable] = None    # (CPU inputs) -> float64 references, for "dot" outputs
    requires: Optional[Callable] = None     # () -> reason to skip, or None
    covers: tuple = field(default=())   # further factories this spec exercises (make_triton_op_add)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g)


def _triton_before_39() -> Optional[str]:
    v = tuple(int(p) for p in triton.__version__.split("+")[0].split(".")[:2])
    return "Triton >= 3.9 removed block pointers (tl.make_block_ptr raises)" if v >= (3, 9) else None


def _tma() -> Optional[str]:
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9:
        return "tensor descriptors need TMA (compute capability 9.0 or newer)"
    return None


def _ln_stats(x: torch.Tensor):
    xd = x.double()
    mean = xd.mean(dim=1)
    rstd = 1 / torch.sqrt(((xd - mean[:, None]) ** 2).mean(dim=1) + 1e-5)
    return mean.float(), rstd.float()


def _ln_bwd_inputs(g):
    M, N = 256, 1000
    x, dy = _randn(g, M, N), _randn(g, M, N)
    w = torch.rand(N, generator=g) + 0.5
    mean, rstd = _ln_stats(x)
    return dy, x, w, mean, rstd


def _segments(g):
    cuts = torch.sort(torch.randint(1, 1000, (47,), generator=g)).values
    return _randn(g, 1000), torch.cat([torch.tensor([0]), cuts, torch.tensor([1000])]).to(torch.int32)


def stencil(x, kernel, block=128):
    """y[i] = x[i-1] + x[i] + x[i+1], the launch of examples/out_of_bounds.py, on any device."""
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


def _padded(g):
    # The buggy stencil reads x[-1] and x[n]: with x an interior view of a larger buffer those reads land
    # on defined neighbours on both sides (on the GPU an unpadded x could fault the context).
    return (_randn(g, 1002)[1:1001],)


def _op_add(ks, x, y):
    return K.make_triton_op_add(ks["kernel"])(x, y)


SPECS = {s.name: s for s in [
    Spec("add", {"kernel": "make_add"}, lambda g: (_randn(g, 100_003), _randn(g, 100_003)),
         lambda ks, x, y: K.add(x, y, kernel=ks["kernel"], block=1024), (EXACT,)),
    Spec("mul", {"kernel": None}, lambda g: (_randn(g, 100_003), _randn(g, 100_003)),
         lambda ks, x, y: K.add(x, y, kernel=ks["kernel"], block=128), (EXACT,)),
    Spec("scale_bias", {"kernel": "make_bias"}, lambda g: (_randn(g, 50_001), _randn(g, 50_001)),
         lambda ks, x, b: (K.scale_bias(x, b, 3.0, kernel=ks["kernel"]), K.scale_bias(x, None, 3.0, kernel=ks["kernel"])),
         (ELEMENTWISE, EXACT)),
    Spec("softmax", {"kernel": "make_softmax"}, lambda g: (_randn(g, 300, 1100)[:, :1000],),
         lambda ks, x: K.softmax(x, kernel=ks["kernel"]), (reduction(1000),)),
    Spec("layer_norm_fwd", {"kernel": "make_layer_norm_fwd"},
         lambda g: (_randn(g, 300, 1100)[:, :1000], torch.rand(1000, generator=g) + 0.5, _randn(g, 1000)),
         lambda ks, x, w, b: K.layer_norm_fwd(x, w, b, kernel=ks["kernel"], block=256), (reduction(1000),) * 3),
    Spec("layer_norm_bwd", {"dx_kernel": "make_layer_norm_bwd_dx", "dwdb_kernel": "make_layer_norm_bwd_dwdb"},
         _ln_bwd_inputs,
         lambda ks, dy, x, w, mean, rstd: K.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=8,
                                                           dx_kernel=ks["dx_kernel"], dwdb_kernel=ks["dwdb_kernel"],
                                                           block_m=32, block_n=128),
         (reduction(1000), reduction(256), reduction(256), reduction(32), reduction(32), EXACT)),
    Spec("matmul", {"kernel": "make_matmul"}, lambda g: (_randn(g, 200, 300), _randn(g, 300, 150)),
         lambda ks, a, b: K.matmul(a, b, kernel=ks["kernel"], block_m=32, block_n=32, block_k=32, group_m=4),
         (dot(300),), reference=lambda a, b: (a.double() @ b.double(),)),
    Spec("transpose", {"kernel": "make_transpose"}, lambda g: (_randn(g, 300, 500).t(),),
         lambda ks, x: K.transpose(x, kernel=ks["kernel"], block_m=16, block_n=32), (EXACT,)),
    Spec("block_ptr", {"kernel": "make_block_ptr"}, lambda g: (_randn(g, 100, 70),),
         lambda ks, x: K.block_ptr_scale(x, kernel=ks["kernel"]), (EXACT,), requires=_triton_before_39),
    Spec("tensor_desc", {"kernel": "make_tensor_desc"}, lambda g: (_randn(g, 64, 96),),
         lambda ks, x: K.tensor_desc_add_one(x, kernel=ks["kernel"]), (EXACT,), requires=_tma),
    Spec("host_desc", {"kernel": "make_host_desc"}, lambda g: (_randn(g, 64, 96),),
         lambda ks, x: K.host_desc_scale(x, kernel=ks["kernel"]), (EXACT,), requires=_tma),
    Spec("histogram", {"kernel": "make_histogram"},
         lambda g: (torch.randint(0, 37, (5000,), generator=g, dtype=torch.int32),),
         lambda ks, x: K.histogram(x, 37, kernel=ks["kernel"], block=128), (EXACT, EXACT)),
    Spec("cumsum", {"kernel": "make_cumsum"}, lambda g: (_randn(g, 100, 80)[:, :70],),
         lambda ks, x: K.cumsum(x, kernel=ks["kernel"]), (reduction(70),)),
    Spec("scale", {"kernel": "make_autotuned"}, lambda g: (_randn(g, 10_000),),
         lambda ks, x: K.scale(x, 0.7, kernel=ks["kernel"]), (EXACT,)),
    Spec("square", {"kernel": "make_heuristics"}, lambda g: (_randn(g, 4096), _randn(g, 4001)),
         lambda ks, a, b: (K.square(a, kernel=ks["kernel"], block=64), K.square(b, kernel=ks["kernel"], block=64)),
         (EXACT, EXACT)),
    Spec("triton_op_add", {"kernel": "make_add"}, lambda g: (_randn(g, 5000), _randn(g, 5000)), _op_add,
         (EXACT,), covers=("make_triton_op_add",)),
    Spec("poly", {"kernel": "make_nested"}, lambda g: (_randn(g, 7777),),
         lambda ks, x: K.poly(x, kernel=ks["kernel"]), (ELEMENTWISE,)),
    Spec("sub3d", {"kernel": "make_grid3d"}, lambda g: (_randn(g, 3, 37, 45), _randn(g, 3, 37, 45)),
         lambda ks, x, y: K.sub3d(x, y, kernel=ks["kernel"]), (EXACT,)),
    Spec("segment_sum", {"kernel": "make_segment_sum"}, _segments,
         lambda ks, x, starts: K.segment_sum(x, starts, kernel=ks["kernel"]), (reduction(1000),)),
    Spec("stencil", {"kernel": None}, lambda g: (_randn(g, 1000),),
         lambda ks, x: stencil(x, ks["kernel"]), (EXACT,)),
    Spec("stencil_padded_input", {"kernel": None}, _padded, lambda ks, x: stencil(x, ks["kernel"]), (EXACT,)),
]}

# --------------------------------------------------------------------------------------------------------
# tests/kernels/library.py registers its kernels in LIBRARY: name -> (make, launcher, reference,
# inputs(device) -> args, tolerance against the reference: None for bit-exact, else (rtol, atol)).
# Its inputs are seeded; here each tensor is redrawn fresh with the same shape, dtype and spread.
# --------------------------------------------------------------------------------------------------------
def _fresh_like(g, t):
    if not torch.is_tensor(t):
        return t
    if t.dtype.is_floating_point:
        f = t.float()
        return (torch.randn(t.shape, generator=g) * f.std().clamp_min(1e-3) + f.mean()).to(t.dtype)
    info = torch.iinfo(t.dtype)
    return torch.randint(info.min, info.max, t.shape, generator=g, dtype=torch.int64).to(t.dtype)


def _library_spec(name: str, entry) -> Spec:
    make, launcher, _reference, inputs, tol = entry
    example = _as_tuple_out(launcher(*inputs("cpu"), kernel=_Shape()))     # the outputs' count and dtypes
    tols = tuple(EXACT if not d.is_floating_point else (stated(*tol) if tol else ELEMENTWISE) for d in example)
    return Spec(f"library:{name}", {"kernel": make.__name__},
                lambda g: tuple(_fresh_like(g, t) for t in inputs("cpu")),
                lambda ks, *args: launcher(*args, kernel=ks["kernel"]), tols)


class _Shape:
    """A kernel stand-in that launches nothing, to learn what a launcher returns."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def _as_tuple_out(out) -> tuple:
    return tuple(o.dtype for o in (out if isinstance(out, (tuple, list)) else (out,)))


for _name, _entry in sorted(getattr(K, "LIBRARY", {}).items()):
    SPECS[f"library:{_name}"] = _library_spec(_name, _entry)

# examples/<module>.py kernel -> (spec, slot). The examples' own launchers allocate on the CPU, so their
# kernels run through the test suite's launchers, which take the kernel and work on any device.
EXAMPLES = {
    "vector_add:add_kernel": ("add", "kernel"),
    "fused_softmax:softmax_kernel": ("softmax", "kernel"),
    "layer_norm:layer_norm_fwd": ("layer_norm_fwd", "kernel"),
    "layer_norm:layer_norm_bwd_dx": ("layer_norm_bwd", "dx_kernel"),
    "layer_norm:layer_norm_bwd_dwdb": ("layer_norm_bwd", "dwdb_kernel"),
    "matmul_grouped:matmul_kernel": ("matmul", "kernel"),
    "out_of_bounds:stencil_kernel": ("stencil_padded_input", "kernel"),
    "out_of_bounds:stencil_fixed": ("stencil", "kernel"),
    "torch_custom_op:mul_kernel": ("mul", "kernel"),
    "autotune:scale_kernel": ("scale", "kernel"),
    "autotune:scale_kernel_pinned": ("scale", "kernel"),
}

# Kernels deliberately left out, with the reason (reported in every run).
EXCLUDED = {
    "tests/kernels/broken.py": "deliberately broken kernels (out-of-bounds, races, uninitialised reads, "
                               "double writes): their GPU output is undefined by design and an "
                               "out-of-bounds access can fault the CUDA context for every later check",
}
