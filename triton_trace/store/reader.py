"""A Trace built from a trace file's checked header (store/header.py) and its array blocks: each block's
dtype is whitelisted, its offset and length checked against the file and its decompressed size against a
memory budget before it is read; then each launch's fields are checked against its arrays (op rows inside
the grid, the lanes and the value buffer; kept inputs the size the kernel module says), so a crafted file is
refused at ``load()`` instead of exhausting memory or crashing an analysis later.
"""
from __future__ import annotations

import zlib

import numpy as np

from ..errors import TraceFileError
from ..model import KINDS, MAX_RANK, MEMORY_KINDS, OP_COLUMNS, KernelModule, Launch, TensorInfo, Trace, lanes_from_ops
from ..model.lanes import Lanes
from ..model.lanes.encoding import ARRAYS as LANE_ARRAYS

_MAX_RATIO = 1100     # zlib cannot compress better than about 1032:1
_DTYPES = {"<i8", "<i4", "|u1", "|b1", "<f4", "<f8", "<f2", "<u2", "<u4", "<u8", "|i1", "<i2"}
LAUNCH_ARRAYS = ("values", "recorded_ids", "inputs", "finals")
# Real traces decompress to at most ~75x their file size (measured: an all-zero vector add); zlib's limit
# is ~1032x. Arrays beyond this, and beyond PLAUSIBLE_BASE, are a crafted file.
PLAUSIBLE_RATIO = 256
PLAUSIBLE_BASE = 256 << 20
_ALLOWED_ARRAYS = {
    1: {"ops." + n for n in OP_COLUMNS} | {"offsets", "mask"} | set(LAUNCH_ARRAYS),
    2: {"ops." + n for n in OP_COLUMNS} | {"lanes." + n for n in LANE_ARRAYS} | set(LAUNCH_ARRAYS),
}


def bad(path, why: str) -> TraceFileError:
    return TraceFileError(f"{path}: not a usable triton_trace file ({why})")


def build(path, header, f, data_start, size, max_bytes, version, max_ratio, provenance) -> Trace:
    if list(header.get("kinds", KINDS)) != list(KINDS)[:len(header.get("kinds", KINDS))]:
        raise bad(path, "it was written with a different op-kind table")
    total = 0
    for lc in header["launches"]:
        for name, d in lc["arrays"].items():
            if name not in _ALLOWED_ARRAYS[version]:
                raise bad(path, f"unknown array block {name[:40]!r}")
            total += _check_block(path, d, data_start, size)
    if total > max_bytes:
        raise TraceFileError(f"{path}: loading would need {total / 2**30:.1f} GiB, more than the limit of "
                             f"{max_bytes / 2**30:.1f} GiB; pass max_bytes= to load() to raise it")
    # every block counts, the kept inputs and finals too: the header's own sizes bound each of them, but a
    # crafted header declares whatever it likes
    plausible = max(PLAUSIBLE_BASE, (max_ratio or _MAX_RATIO) * size)
    if total > plausible:
        raise bad(path, f"its arrays declare {total} bytes, more than a {size}-byte file of real trace data "
                         f"holds (at most {max_ratio}x its size); if you made this file, load(path, "
                         f"max_ratio=None) reads it")
    launches = []
    for lc in header["launches"]:
        blocks = lc["arrays"]
        ops = _read_ops(path, f, data_start, blocks)
        _check_referenced(path, lc, blocks, ops)
        arrays = {name: _read(path, f, data_start, d) for name, d in blocks.items() if not name.startswith("ops.")}
        if not isinstance(arrays.get("values"), np.ndarray) or arrays["values"].dtype != np.uint8 or \
                arrays["values"].ndim != 1:
            raise bad(path, "the value buffer is missing or has the wrong dtype or rank")
        lane_kw = _lanes(path, lc, arrays, ops, version, max_bytes)
        meta = dict(lc.get("meta") or {})
        module = _module(path, meta.pop("module", None))
        launch = Launch(
            kernel_name=lc["kernel_name"], source=lc["source"], source_file=lc["source_file"],
            source_line=lc["source_line"], grid=tuple(lc["grid"]), args=dict(lc["args"]),
            tensors=tuple(TensorInfo.from_dict(t) for t in lc["tensors"]), files=tuple(lc["files"]),
            value_dtypes=tuple(lc["value_dtypes"]), ops=ops, **lane_kw,
            values=arrays["values"], config=lc["config"], outputs=tuple(lc["outputs"]),
            recorded_programs=lc["recorded_programs"], skipped_programs=lc["skipped_programs"],
            values_truncated=lc["values_truncated"], completed=lc["completed"], error=lc["error"],
            meta=meta, module=module, recorded_ids=arrays.get("recorded_ids"),
            inputs=arrays.get("inputs"), finals=arrays.get("finals"), provenance=provenance, origin=path)
        _validate_meta(path, launch, max_bytes)
        _validate(path, launch)
        launches.append(launch)
    return Trace(tuple(launches))


def _module(path, record):
    """The launch's kernel module from its ``meta.module`` record (None: recorded without one). The header
    check refused a malformed one already; this builds the typed fields."""
    if record is None:
        return None
    try:
        return KernelModule.from_dict(record, "meta.module")
    except ValueError as e:
        raise bad(path, str(e)) from None


def _read_ops(path, f, data_start, blocks: dict) -> dict:
    """The op table, after checking every column's declared dtype and shape: one row count for all."""
    rows = set()
    for name, (dt, shape) in OP_COLUMNS.items():
        d = blocks.get("ops." + name)
        if d is None or d["dtype"] != np.dtype(dt).str or tuple(d["shape"][1:]) != shape or len(d["shape"]) < 1:
            raise bad(path, f"op column {name} is missing or has the wrong dtype or shape")
        rows.add(d["shape"][0])
    if len(rows) != 1:
        raise bad(path, "op columns differ in length")
    return {name: _read(path, f, data_start, blocks["ops." + name]) for name in OP_COLUMNS}


def _check_referenced(path, lc: dict, blocks: dict, ops: dict) -> None:
    """The value buffer and the recorded ids may not be larger than what the op rows and the header use:
    a crafted file declaring gigabytes of zeros is refused before they are decompressed."""
    sizes = []
    for d in lc["value_dtypes"]:
        if d not in _DTYPES:
            raise bad(path, f"value dtype {d!r} is not allowed")
        sizes.append(np.dtype(d).itemsize)
    vd = ops["value_dtype"].astype(np.int64)
    used = 0
    if len(vd) and vd.max() >= 0:
        if vd.max() >= len(sizes):
            raise bad(path, "op rows reference unknown value dtypes")
        has = vd >= 0
        ends = ops["value_start"][has] + ops["lane_count"][has] * np.asarray(sizes, np.int64)[vd[has]]
        used = int(ends.max())
    declared = int(blocks.get("values", {}).get("raw_nbytes", 0))
    if declared > used:
        raise bad(path, f"the value buffer declares {declared} bytes; the op rows use {used}")
    ids = blocks.get("recorded_ids")
    if ids is not None:
        programs = lc["grid"][0] * lc["grid"][1] * lc["grid"][2]
        if int(ids["raw_nbytes"]) > 12 * min(programs, lc["recorded_programs"] + lc["skipped_programs"]):
            raise bad(path, "the recorded program ids are more than the programs the launch ran")
    desc = ((lc.get("meta") or {}).get("module") or {}).get("inputs") or {}
    sizes, written = desc.get("storages", []), desc.get("written", [])
    for name, bound in (("inputs", sum(sizes)), ("finals", sum(n for n, w in zip(sizes, written) if w))):
        if name in blocks and int(blocks[name]["raw_nbytes"]) != bound:
            raise bad(path, f"its kept {name} declare {blocks[name]['raw_nbytes']} bytes; the header describes {bound}")


def _lanes(path, lc: dict, arrays: dict, ops: dict, version: int, max_bytes: int) -> dict:
    """The Launch keyword arguments that carry the lanes: compact arrays (version 2) or flat ones (1)."""
    if version == 1:
        off, mask = arrays.get("offsets"), arrays.get("mask")
        if not isinstance(off, np.ndarray) or not isinstance(mask, np.ndarray):
            raise bad(path, "the lane buffers are missing")
        if off.dtype != np.int64 or mask.dtype != np.bool_ or off.ndim != 1 or mask.ndim != 1:
            raise bad(path, "the lane buffers have the wrong dtype or rank")
        if len(mask) != len(off):
            raise bad(path, "mask and offsets differ in length")
        return {"lanes": lanes_from_ops(ops, off, mask)}
    if any(k in arrays for k in ("offsets", "mask")):
        raise bad(path, "flat lane buffers in a version 2 file")
    parts = {k[len("lanes."):]: v for k, v in arrays.items() if k.startswith("lanes.")}
    n = lc["lanes"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise bad(path, f"the lane count {n!r} is not a non-negative integer")
    if n * 9 > max_bytes:     # compact lanes are small on disk, but views and analyses expand them
        raise TraceFileError(f"{path}: a launch of {n} lanes needs {n * 9 / 2**30:.1f} GiB once expanded, "
                             f"more than the limit of {max_bytes / 2**30:.1f} GiB; pass max_bytes= to load() "
                             f"to raise it")
    try:
        return {"lanes": Lanes.from_arrays(parts, n)}
    except ValueError as e:
        raise bad(path, f"the lane arrays are inconsistent: {e}") from None


def _check_block(path, d: dict, data_start: int, size: int) -> int:
    """Check one array block's description against the file; returns its decompressed size in bytes."""
    if d["dtype"] not in _DTYPES:
        raise bad(path, f"array dtype {d['dtype']!r} is not allowed")
    shape = [int(s) for s in d["shape"]]
    n = 1
    for s in shape:       # Python ints: a crafted shape cannot wrap around to a small size
        n *= s
    raw, comp, offset = int(d["raw_nbytes"]), int(d["nbytes"]), int(d["offset"])
    if any(s < 0 for s in shape) or n * np.dtype(d["dtype"]).itemsize != raw:
        raise bad(path, "an array's shape does not match its size")
    if offset < 0 or comp < 0 or data_start + offset + comp > size:
        raise bad(path, "an array block lies beyond the end of the file (truncated?)")
    if raw > _MAX_RATIO * comp + 64:
        raise bad(path, "an array block declares more data than its compressed size can hold")
    return raw


def _read(path, f, data_start, d) -> np.ndarray:
    """Decompress one block straight into its final array (no second copy of the data)."""
    f.seek(data_start + int(d["offset"]))
    left, raw_n = int(d["nbytes"]), int(d["raw_nbytes"])
    out = np.empty(raw_n, dtype=np.uint8)
    dec = zlib.decompressobj()
    pos = 0
    try:
        while left:
            buf = f.read(min(left, 1 << 20))
            if not buf:
                raise bad(path, "an array block lies beyond the end of the file (truncated?)")
            left -= len(buf)
            while buf:
                piece = dec.decompress(buf, 1 << 22)
                if pos + len(piece) > raw_n:
                    raise bad(path, "an array block decompresses to more than its declared size")
                out[pos:pos + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
                pos += len(piece)
                buf = dec.unconsumed_tail
                if not piece and buf:
                    break
        tail = dec.flush()
    except zlib.error as e:
        raise bad(path, f"an array block is corrupt ({e})") from None
    if tail or pos != raw_n or not dec.eof:
        raise bad(path, "an array block does not decompress to its declared size")
    return out.view(np.dtype(d["dtype"])).reshape([int(s) for s in d["shape"]])


_MAX_GRID = (2 ** 31 - 1, 65535, 65535)    # CUDA's grid limits; a larger grid was not recorded by us


def _validate_meta(path, lc: Launch, max_bytes: int) -> None:
    """The header fields that analyses and views index or size arrays by. A crafted grid or storage size
    would otherwise make the analysis allocate terabytes (it keeps a flag per storage element and lists
    the grid's programs), long after load() returned."""
    if len(lc.grid) != 3 or min(lc.grid) < 0 or any(g > m for g, m in zip(lc.grid, _MAX_GRID)):
        raise bad(path, f"launch grid {lc.grid} is not three sizes within CUDA's limits {_MAX_GRID}")
    if lc.grid[0] * lc.grid[1] * lc.grid[2] * 12 > max_bytes:
        raise TraceFileError(f"{path}: a launch grid of {lc.grid} programs needs more than the limit of "
                             f"{max_bytes / 2**30:.1f} GiB to analyse; pass max_bytes= to load() to raise it")
    if not (lc.config is None or isinstance(lc.config, dict)) or not isinstance(lc.args, dict):
        raise bad(path, "a launch's config or args is not a JSON object")
    for t in lc.tensors:
        if len(t.shape) != len(t.strides) or len(t.shape) > 16 or min(t.shape, default=0) < 0:
            raise bad(path, f"tensor '{t.name}' has a shape and strides that do not match")
        if t.elem_bytes not in (1, 2, 4, 8, 16) or not 0 <= t.storage_offset <= t.storage_size:
            raise bad(path, f"tensor '{t.name}' has an invalid element size or storage offset")
        if t.buffer < -1 or t.storage < -1:
            raise bad(path, f"tensor '{t.name}' has a negative storage or buffer index")
        if t.storage_size * 8 > max_bytes:
            raise TraceFileError(f"{path}: tensor '{t.name}' declares {t.storage_size} elements; analysing it "
                                 f"needs more than the limit of {max_bytes / 2**30:.1f} GiB; pass max_bytes= "
                                 f"to load() to raise it")


def _check_inputs(path, lc: Launch) -> None:
    """The kept storages must be exactly the bytes the module's ``inputs`` describes (a reproducer slices them)."""
    if lc.inputs is None and lc.finals is None:
        return
    desc = lc.module.inputs if lc.module is not None else None
    if desc is None or not desc.kept:
        raise bad(path, "it holds kept inputs that its header does not describe")
    for name, arr, want in (("inputs", lc.inputs, desc.input_bytes), ("finals", lc.finals, desc.final_bytes)):
        if arr is None or arr.dtype != np.uint8 or arr.ndim != 1 or len(arr) != want:
            raise bad(path, f"its kept {name} are not the {want} bytes its header describes")


def _validate(path, lc: Launch) -> None:
    _check_inputs(path, lc)
    o = lc.ops
    n = lc.num_ops
    if any(len(o[c]) != n for c in o):
        raise bad(path, "op columns differ in length")
    ids = lc.recorded_ids
    if ids is not None and (ids.dtype != np.int32 or ids.ndim != 2 or ids.shape[1] != 3 or
                            (len(ids) and (ids.min() < 0 or np.any(ids.max(axis=0) >= np.array(lc.grid))))):
        raise bad(path, "recorded program ids are malformed or outside the grid")
    if n == 0:
        return
    if o["program"].min() < 0 or np.any(o["program"].max(axis=0) >= np.array(lc.grid)):
        raise bad(path, "op rows name programs outside the launch grid")
    if o["shape"].min() < 0 or o["file"].min() < -1 or o["value_dtype"].min() < -1:
        raise bad(path, "op rows have negative shapes or indices")
    if o["kind"].max() >= len(KINDS) or o["tensor"].max() >= len(lc.tensors) or o["tensor"].min() < -1:
        raise bad(path, "op rows reference unknown kinds or tensors")
    if o["file"].max() >= len(lc.files) or o["value_dtype"].max() >= len(lc.value_dtypes):
        raise bad(path, "op rows reference unknown files or value dtypes")
    if o["ndim"].min() < 0 or o["ndim"].max() > MAX_RANK:
        raise bad(path, "op rows have an invalid rank")
    end = o["lane_start"] + o["lane_count"]
    if o["lane_start"].min() < 0 or o["lane_count"].min() < 0 or end.max() > lc.lanes.size:
        raise bad(path, "op rows point outside the lane buffers")
    shapes_n = np.where(np.arange(MAX_RANK)[None, :] < o["ndim"][:, None], o["shape"], 1).prod(axis=1)
    mem = o["kind"] < len(MEMORY_KINDS)
    too_big = o["shape"][mem] > np.maximum(o["lane_count"][mem], 1)[:, None]
    if np.any(shapes_n[mem] != o["lane_count"][mem]) or np.any(too_big):
        raise bad(path, "op shapes do not match their lane counts")
    vd = o["value_dtype"]
    has = vd >= 0
    for d in lc.value_dtypes:
        if d not in _DTYPES:
            raise bad(path, f"value dtype {d!r} is not allowed")
    if has.any():
        sizes = np.array([np.dtype(d).itemsize for d in lc.value_dtypes], dtype=np.int64)
        vend = o["value_start"][has] + o["lane_count"][has] * sizes[vd[has]]
        if o["value_start"][has].min() < 0 or vend.max() > len(lc.values):
            raise bad(path, "op rows point outside the value buffer")
