"""A tensor's recorded values as a NumPy ``.npy`` file (``GET /api/launch/<i>/tensor/<t>/values.npy``).

The file has the tensor's view shape: each element holds the last value a lane of the selection (one op,
one program, or every program) recorded for it, NaN where none did (not touched, or values were not
recorded). It is the tensor view's "by value" colour as numbers, for ``np.load`` and a comparison with
torch. Float64 holds every recorded dtype's value exactly (float16/32, bfloat16, ints up to 2**53).
"""
from __future__ import annotations

import io

import numpy as np

from .lookup import TraceIndex
from .payload import ApiError
from .tensormap import invertible, view_index
from .tensorview import elements

MAX_NPY_ELEMENTS = 1 << 24      # 128 MiB of float64: a bigger tensor is downloaded from the trace file


def npy_values(ti: TraceIndex, i: int, t: int, rows: np.ndarray, cache_key) -> bytes:
    ix = ti.launch(i)
    info = ix.launch.tensors[t]
    n = int(np.prod(info.shape)) if info.shape else 1
    if n > MAX_NPY_ELEMENTS:
        raise ApiError(f"tensor '{info.name}' has {n:,} elements, more than the {MAX_NPY_ELEMENTS:,} a download "
                       f"holds; read it from the trace file instead (triton_trace.load(path).launches[{i}])", 413)
    if not invertible(info):
        raise ApiError(f"tensor '{info.name}' is a view whose elements share storage (strides "
                       f"{list(info.strides)}): its values have no one place each; download its base tensor", 400)
    build = lambda: elements(ix, rows, t)
    table = ti.cached(cache_key, build) if cache_key is not None else build()
    out = np.full(info.shape, np.nan, dtype=np.float64)
    keep = table.has_value
    idx, ok = view_index(info, table.offsets[keep])
    out[tuple(idx[ok].T)] = table.value[keep][ok]
    buf = io.BytesIO()
    np.save(buf, out, allow_pickle=False)
    return buf.getvalue()
