"""Bit-level comparison of a launch's outputs, GPU against trace, and the snapshots both sides start from.

Every float element pair is put in one of four classes: identical bits; both NaN with other bits (a NaN's
payload and sign are not arithmetic: the GPU makes the canonical 0x7fffffff, numpy 0xffc00000); one unit
in the last place apart (adjacent in the total order of the format's values, so -0.0 and +0.0 are one
apart, as are the largest finite value and Inf); further apart. Integers and booleans are identical or
not. The ulp distance is taken on the bits (no conversion to float64, which would round a 64-bit count).
"""
from __future__ import annotations

import dataclasses

import numpy as np

EXACT, NAN_BITS, ULP1, BEYOND = "exact", "nan_bits", "1ulp", "beyond"
RANK = {EXACT: 0, NAN_BITS: 1, ULP1: 2, BEYOND: 3}
MAX_EXAMPLES = 3


def _unsigned(bits: np.ndarray) -> np.ndarray:
    return bits.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[bits.dtype.itemsize])


def ordered(bits: np.ndarray) -> np.ndarray:
    """Map IEEE bit patterns to unsigned integers in the order of the values they encode: positive
    numbers get their sign bit set, negative ones are complemented (the usual radix-sort key)."""
    u = _unsigned(bits)
    sign = u.dtype.type(1) << u.dtype.type(8 * u.dtype.itemsize - 1)
    return np.where(u & sign, ~u, u | sign)


def ulp_distance(a_bits: np.ndarray, b_bits: np.ndarray) -> np.ndarray:
    """How many representable values apart two arrays of float bit patterns are (unsigned, exact)."""
    ka, kb = ordered(a_bits), ordered(b_bits)
    return np.where(ka >= kb, ka - kb, kb - ka)


def _is_nan(bits: np.ndarray, exp_bits: int, man_bits: int) -> np.ndarray:
    u = _unsigned(bits).astype(np.uint64)
    exp = (u >> np.uint64(man_bits)) & np.uint64((1 << exp_bits) - 1)
    man = u & np.uint64((1 << man_bits) - 1)
    return (exp == np.uint64((1 << exp_bits) - 1)) & (man != 0)


# (exponent bits, mantissa bits) of the float formats a launch can write, by torch dtype name; e4m3fn has
# no Inf and one NaN pattern per sign (all exponent and mantissa bits set), which the rule below keeps.
FORMATS = {"float64": (11, 52), "float32": (8, 23), "float16": (5, 10), "bfloat16": (8, 7),
           "float8_e5m2": (5, 2), "float8_e4m3fn": (4, 3), "float8_e4m3fnuz": (4, 3), "float8_e5m2fnuz": (5, 2)}


def nan_mask(bits: np.ndarray, dtype: str) -> np.ndarray:
    exp_bits, man_bits = FORMATS[dtype]
    if dtype == "float8_e4m3fn":
        return (_unsigned(bits) & np.uint8(0x7F)) == np.uint8(0x7F)
    if dtype.endswith("fnuz"):
        return _unsigned(bits) == np.uint8(0x80)
    return _is_nan(bits, exp_bits, man_bits)


@dataclasses.dataclass
class OutputDiff:
    """How one output tensor of a launch differs between the GPU and the trace."""
    name: str
    dtype: str
    elements: int
    status: str                  # EXACT | NAN_BITS | ULP1 | BEYOND
    differing: int               # elements whose bits differ
    beyond: int                  # of them, further apart than NAN_BITS / ULP1 allow
    max_ulp: int                 # floats: the largest distance among non-NaN pairs (0 for integers)
    examples: list               # [{"index", "ref", "trace", "ref_bits", "trace_bits", "ulp"}]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _bits_view(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def compare_bits(name: str, dtype: str, ref_bits: np.ndarray, trace_bits: np.ndarray,
                 ref_values=None, trace_values=None) -> OutputDiff:
    """Classify element by element two arrays of raw bits of the same shape (``dtype``: the torch dtype's
    name, which says whether and how the bits are a float). ``*_values`` (same shape, any numeric type)
    only feed the examples' readable values."""
    g, t = _bits_view(ref_bits).reshape(-1), _bits_view(trace_bits).reshape(-1)
    diff = np.flatnonzero(g != t)
    if diff.size == 0:
        return OutputDiff(name, dtype, int(g.size), EXACT, 0, 0, 0, [])
    gd, td = g[diff], t[diff]
    if dtype in FORMATS:
        both_nan = nan_mask(gd, dtype) & nan_mask(td, dtype)
        either_nan = nan_mask(gd, dtype) | nan_mask(td, dtype)
        dist = ulp_distance(gd, td)
        ok1 = (~either_nan) & (dist <= 1)
        bad = ~(both_nan | ok1)
        finite = ~either_nan
        max_ulp = int(dist[finite].max()) if finite.any() else 0
        status = BEYOND if bad.any() else ULP1 if ok1.any() else NAN_BITS
    else:
        dist = np.zeros(diff.size, np.uint64)
        bad = np.ones(diff.size, bool)
        max_ulp, status = 0, BEYOND
    # the examples: the worst elements first (beyond before 1 ulp before NaN bits), then in index order
    order = np.lexsort((diff, ~bad))[:MAX_EXAMPLES]
    shape = ref_bits.shape
    examples = []
    for k in order.tolist():
        flat = int(diff[k])
        idx = [int(i) for i in np.unravel_index(flat, shape)] if shape else []
        ex = {"index": idx, "ref_bits": hex(int(gd[k])), "trace_bits": hex(int(td[k])), "ulp": int(dist[k])}
        if ref_values is not None:
            ex["ref"] = _plain(np.asarray(ref_values).reshape(-1)[flat])
            ex["trace"] = _plain(np.asarray(trace_values).reshape(-1)[flat])
        examples.append(ex)
    return OutputDiff(name, dtype, int(g.size), status, int(diff.size), int(bad.sum()), max_ulp, examples)


def _plain(v):
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and not np.isfinite(v):
        return repr(v)
    return v


def worst(statuses) -> str:
    return max(statuses, key=RANK.__getitem__, default=EXACT)


# ------------------------------------------------------------------------------------------------------------
# torch side: snapshots that keep aliasing, and the raw bits of a view
# ------------------------------------------------------------------------------------------------------------
def tensor_of(x):
    """The tensor an argument reads and writes: itself, a host tensor descriptor's base, or the base of
    Triton's ``TensorWrapper`` (``triton.reinterpret``: a tensor read as another dtype, uint32, fp8)."""
    import torch
    if torch.is_tensor(x):
        return x
    base = getattr(x, "base", None)
    return base if torch.is_tensor(base) else None


def _rewrap(x, view):
    """``x`` (a tensor or a wrapper of one) over ``view`` instead of its own tensor."""
    import copy
    if x is tensor_of(x):
        return view
    if dataclasses.is_dataclass(x):
        return dataclasses.replace(x, base=view)
    y = copy.copy(x)
    y.base, y.data, y.device, y.shape = view, view.data, view.device, view.shape
    return y


def flatten(values: dict) -> dict:
    """name -> argument, with tuples of arguments (a tuple of tensors, Triton's tuple arguments) spread
    out as ``name[i]``, so each tensor in them is snapshotted and compared."""
    out = {}
    for name, v in values.items():
        if isinstance(v, (tuple, list)):
            for i, item in enumerate(v):
                out.update(flatten({f"{name}[{i}]": item}))
        else:
            out[name] = v
    return out


def snapshot(values: dict) -> dict:
    """CPU copies of the tensor arguments of a launch (name -> value), every storage copied once, so two
    arguments that share memory on the device share it in the copy too (an in-place ``kernel(x, x)``);
    other arguments are passed through, tuples rebuilt around their copied items. A wrapped tensor (a
    descriptor, a reinterpreted tensor) gets the same wrapper over a copy of its base."""
    import torch
    storages = {}

    def copy_of(v):
        if isinstance(v, (tuple, list)):
            items = [copy_of(item) for item in v]
            return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
        t = tensor_of(v)
        if t is None:
            return v
        s = t.untyped_storage()
        key = (s.device.type, s.device.index, s.data_ptr(), s.nbytes())
        if key not in storages:
            raw = torch.empty(0, dtype=torch.uint8, device=s.device).set_(s, 0, (s.nbytes(),), (1,))
            storages[key] = raw.to("cpu", copy=True).untyped_storage()
        view = torch.empty(0, dtype=t.dtype).set_(storages[key], t.storage_offset(), t.shape, t.stride())
        return _rewrap(v, view)

    return {name: copy_of(v) for name, v in values.items()}


def bits_of(t) -> np.ndarray:
    """The raw bits of a CPU tensor view, as unsigned integers of its element width, in its shape."""
    import torch
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    c = t.detach().contiguous()
    return _bits_view(c.view(width).numpy() if c.dtype != torch.bool else c.view(torch.uint8).numpy())


def values_of(t) -> np.ndarray:
    """Readable values for the examples: floats of any width as float64, integers as they are."""
    import torch
    c = t.detach().contiguous()
    return (c.double() if c.dtype.is_floating_point else c.to(torch.int64)).numpy()


def dtype_name(x) -> str:
    """The dtype an argument's bits are read as: a wrapper's own (uint32, float8e5) else its tensor's."""
    return str(x.dtype).replace("torch.", "")
