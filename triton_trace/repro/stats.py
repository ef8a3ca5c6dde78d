"""Random storages with a launch's recorded statistics, for a reproducer without exact inputs (as
tritonparse's statistical mode): per tensor, its dtype, and the mean, standard deviation, minimum, maximum
and NaN / Inf counts of its elements (from the kept inputs) or, without them, of the values the traced
programs loaded from it."""
from __future__ import annotations

import numpy as np

from ..model.values import lane_values

_NP = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8, "int16": np.int16,
       "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
       "uint64": np.uint64, "bool": np.bool_}


def describe(values: np.ndarray) -> dict:
    """Statistics of float64 ``values`` (NaN and Inf counted, the rest summarised)."""
    finite = values[np.isfinite(values)]
    return {"count": int(len(values)), "nan": int(np.isnan(values).sum()), "posinf": int(np.isposinf(values).sum()),
            "neginf": int(np.isneginf(values).sum()),
            "mean": float(finite.mean()) if len(finite) else 0.0, "std": float(finite.std()) if len(finite) else 1.0,
            "min": float(finite.min()) if len(finite) else 0.0, "max": float(finite.max()) if len(finite) else 0.0}


@np.errstate(invalid="ignore")       # signalling NaNs in never-written outputs widen with a warning
def _kept_values(launch, name: str, t: dict) -> np.ndarray:
    from . import _storage_bytes
    raw = _storage_bytes(launch)[0][t["storage"]]
    dt = t["dtype"]
    if dt == "bfloat16":
        words = np.frombuffer(raw.tobytes()[:len(raw) // 2 * 2], np.uint16).astype(np.uint32) << 16
        flat = words.view(np.float32).astype(np.float64)
    elif dt in _NP:
        flat = np.frombuffer(raw.tobytes()[:len(raw) // np.dtype(_NP[dt]).itemsize * np.dtype(_NP[dt]).itemsize],
                             _NP[dt]).astype(np.float64)
    else:
        return np.zeros(0)
    idx = t["offset"] + sum(np.arange(n)[(...,) + (None,) * (len(t["shape"]) - 1 - d)] * s
                            for d, (n, s) in enumerate(zip(t["shape"], t["strides"])))
    idx = np.asarray(idx, np.int64).reshape(-1)
    return flat[idx[(idx >= 0) & (idx < len(flat))]]


def _loaded_values(launch, name: str) -> np.ndarray:
    rows = launch.rows(kind="load", tensor=name)
    if not len(rows):
        return np.zeros(0)
    _, values, has = lane_values(launch, rows)
    o = launch.ops
    _, mask = launch.lanes.gather(o["lane_start"][rows], o["lane_count"][rows].astype(np.int64))
    return values[has & mask]


def _random(st: dict, n: int, dtype: str, rng) -> np.ndarray:
    """``n`` values as float64 with the statistics ``st``."""
    if dtype == "bool":
        return (rng.random(n) < max(min(st["mean"], 1.0), 0.0)).astype(np.float64)
    lo, hi = st["min"], st["max"]
    if dtype.startswith(("int", "uint")):
        lo, hi = int(max(lo, -2 ** 63)), int(min(hi, 2 ** 63 - 2))      # numpy draws int64
        return rng.integers(lo, hi + 1, n).astype(np.float64) if hi >= lo else np.zeros(n)
    vals = np.clip(rng.normal(st["mean"], st["std"] or 1e-3, n), lo, hi) if hi > lo else np.full(n, lo)
    if st["count"]:
        special = [(np.nan, st["nan"]), (np.inf, st["posinf"]), (-np.inf, st["neginf"])]
        for value, count in special:
            k = min(n, int(round(count * n / st["count"])))
            if k:
                vals[rng.choice(n, k, replace=False)] = value
    return vals


def _encode(vals: np.ndarray, dtype: str) -> bytes:
    if dtype == "bfloat16":
        bits = vals.astype(np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
    return vals.astype(_NP.get(dtype, np.float32)).tobytes()


def stand_in_storages(launch, tensors: dict, seed: int = 0) -> list:
    """One uint8 array per storage of the launch, every argument's elements drawn from its statistics
    (storages no argument views, and the bytes between views, stay zero)."""
    rng = np.random.default_rng(seed)
    sizes = {t.storage: t.storage_size * t.elem_bytes for t in launch.tensors if t.storage >= 0}
    kept = launch.inputs is not None
    out = [np.zeros(sizes.get(k, 0), np.uint8) for k in range(max(sizes, default=-1) + 1)]
    for name, t in tensors.items():
        if t["dtype"] not in _NP and t["dtype"] != "bfloat16":
            continue                    # float8 and other types numpy cannot encode stay zero
        values = _kept_values(launch, name, t) if kept else _loaded_values(launch, name)
        st = describe(values)
        eb = np.dtype(_NP.get(t["dtype"], np.uint16)).itemsize
        # every element of the view, and only those: views of one storage (x and x[n:]) keep their own
        idx = t["offset"] + sum(np.arange(n)[(...,) + (None,) * (len(t["shape"]) - 1 - d)] * st_
                                for d, (n, st_) in enumerate(zip(t["shape"], t["strides"])))
        idx = np.unique(np.asarray(idx, np.int64).reshape(-1))
        buf = out[t["storage"]]
        idx = idx[(idx >= 0) & ((idx + 1) * eb <= len(buf))]
        if len(idx) and st["count"]:
            raw = np.frombuffer(_encode(_random(st, len(idx), t["dtype"], rng), t["dtype"]), np.uint8)
            view = buf[:len(buf) // eb * eb].view(np.dtype(f"u{eb}"))
            view[idx] = raw.view(np.dtype(f"u{eb}"))
    return out
