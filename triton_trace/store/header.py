"""The trace file's JSON header, checked field by field before anything is built from it.

A header is data from a file: every field's type, every integer's range and every key is checked here, so
a damaged or crafted header is refused at ``load()`` with one line naming the field, instead of crashing the
analysis, the summary or a view later. ``check_header`` raises ``HeaderError`` (store/tracefile.py turns it into a
TraceFileError naming the file).
"""
from __future__ import annotations

import json

from ..model.kernelmodule import KernelModule

TOP_KEYS = {"format", "version", "kinds", "launches", "signature"}
LAUNCH_KEYS = {"kernel_name", "source", "source_file", "source_line", "grid", "args", "tensors", "files",
               "value_dtypes", "config", "outputs", "recorded_programs", "skipped_programs", "values_truncated",
               "completed", "error", "meta", "lanes", "arrays"}
OPTIONAL_LAUNCH_KEYS = {"meta", "lanes"}        # version 1 files have no lane count; older ones no meta
TENSOR_KEYS = {"name": str, "dtype": str, "shape": "ints", "strides": "ints", "storage_offset": int,
               "storage_size": int, "elem_bytes": int, "device": str, "storage": int,
               "buffer": int}
BLOCK_KEYS = {"dtype": str, "shape": "ints", "offset": int, "nbytes": int, "raw_nbytes": int}
CONFIG_INTS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "index")
MAX_INT = 1 << 62
MAX_DIGITS = 20
# A fixed budget, not one derived from the header's own contents: its bytes, and the JSON values it may
# hold (each costs up to ~40 bytes once parsed: 4M empty lists take 144 MB, measured), so the parse stays
# within a few hundred MB whatever the file says. Real headers take a few kB and about a thousand values
# per launch.
MAX_HEADER_BYTES = 64 << 20
MAX_JSON_VALUES = 4_000_000


class HeaderError(ValueError):
    """A header field of the wrong type or range; the message names the field."""


def parse(raw: bytes) -> dict:
    """The header's JSON. Refuses, before parsing, a header over the fixed budget above, and integers too
    long to be a size or an offset."""
    if len(raw) > MAX_HEADER_BYTES:
        raise HeaderError(f"the header takes {len(raw)} bytes, more than the {MAX_HEADER_BYTES >> 20} MiB a "
                          f"trace file's header may take")
    # an upper bound on the values: every one but the first follows a ',' or a ':' or opens a container
    values = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{")
    if values > MAX_JSON_VALUES:
        raise HeaderError(f"the header holds up to {values} JSON values, more than the {MAX_JSON_VALUES} a trace "
                          f"file's header may hold")
    try:
        header = json.loads(raw.decode("utf-8"), parse_int=_parse_int, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:   # JSONDecodeError is a ValueError
        raise HeaderError(f"header is not valid JSON: {type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(header, dict):
        raise HeaderError("the header is not a JSON object")
    return header


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise HeaderError(f"an integer of {len(text)} digits ({text[:20]}...) is not a size or an offset")
    return int(text)


def _no_constant(name: str):
    raise HeaderError(f"{name} is not valid JSON")


def check_header(header: dict, version: int) -> None:
    unknown = set(header) - TOP_KEYS
    if unknown:
        raise HeaderError(f"unknown top-level header keys {sorted(unknown)[:5]}")
    if header.get("format") != "triton_trace" or not isinstance(header.get("launches"), list):
        raise HeaderError("header is not a triton_trace header")
    if "kinds" in header:
        _list_of(header["kinds"], str, "kinds")
    if "signature" in header:
        _typed(header["signature"], str, "signature")
    for i, lc in enumerate(header["launches"]):
        _check_launch(lc, version, f"launches[{i}]")


def _check_launch(lc, version: int, where: str) -> None:
    if not isinstance(lc, dict):
        raise HeaderError(f"{where} is not an object")
    unknown = set(lc) - LAUNCH_KEYS
    missing = LAUNCH_KEYS - OPTIONAL_LAUNCH_KEYS - set(lc)
    if version >= 2 and "lanes" not in lc:
        missing.add("lanes")
    if unknown or missing:
        raise HeaderError(f"{where} has unknown keys {sorted(unknown)[:5]} or lacks {sorted(missing)[:5]}")
    for key in ("kernel_name", "source", "source_file"):
        _typed(lc[key], str, f"{where}.{key}")
    for key in ("source_line", "recorded_programs", "skipped_programs") + (("lanes",) if "lanes" in lc else ()):
        _int(lc[key], f"{where}.{key}", lo=0)
    for key in ("values_truncated", "completed"):
        _typed(lc[key], bool, f"{where}.{key}")
    if lc["error"] is not None:
        _typed(lc["error"], str, f"{where}.error")
    _ints(lc["grid"], f"{where}.grid", length=3)
    _typed(lc["args"], dict, f"{where}.args")
    _list_of(lc["files"], str, f"{where}.files")
    _list_of(lc["value_dtypes"], str, f"{where}.value_dtypes")
    _list_of(lc["outputs"], str, f"{where}.outputs")
    _list_of(lc["tensors"], dict, f"{where}.tensors")
    for j, t in enumerate(lc["tensors"]):
        _fields(t, TENSOR_KEYS, f"{where}.tensors[{j}]", optional={"device", "storage", "buffer"})
    _check_config(lc["config"], f"{where}.config")
    _check_meta(lc.get("meta"), f"{where}.meta")
    _typed(lc["arrays"], dict, f"{where}.arrays")
    for name, block in lc["arrays"].items():
        _fields(block, BLOCK_KEYS, f"{where}.arrays[{name!r}]")


def _check_config(cfg, where: str) -> None:
    if cfg is None:
        return
    _typed(cfg, dict, where)
    for key in CONFIG_INTS:
        if cfg.get(key) is not None:
            _int(cfg[key], f"{where}.{key}", lo=-1)
    for key in ("kwargs", "heuristics"):
        if key in cfg:
            _typed(cfg[key], dict, f"{where}.{key}")
    if "chosen_by" in cfg:
        _typed(cfg["chosen_by"], str, f"{where}.chosen_by")


# The runtime checks' records (meta["nonfinite"], ["overflow"], ...) are declared, each with its schema, by
# the recorder's table of monitors, which checks them: loaded by name on first use, as model/actions.py loads
# later stages (the table imports no hook, Triton interpreter or torch). A check added there is checked here.
CHECK_RECORDS = ("triton_trace.record.checks.table", "check_records")


def _check_records(meta: dict, where: str) -> set:
    """Check each check record ``meta`` holds against its schema; the names of every declared record."""
    import importlib
    module, name = CHECK_RECORDS
    return getattr(importlib.import_module(module), name)(meta, where)


def _check_meta(meta, where: str) -> None:
    if meta is None:
        return
    _typed(meta, dict, where)
    # (poisoned: arguments from a poisoned torch.empty, record/memory/poison.py; the sanitizer reads them;
    # numerics: "compiled" when the launch computed as the GPU does, record/gpu/ascompiled.py;
    # inline_asm_approx: approximate PTX instructions its inline asm ran, record/gpu/inlineasm.py;
    # reduction_order: source line -> why a reduction kept numpy's order, record/gpu/reduceorder.py)
    unknown = (set(meta) - {"execution", "assert_failed", "module", "poisoned", "numerics", "inline_asm_approx",
                            "reduction_order"}
               - _check_records(meta, where))
    if unknown:
        raise HeaderError(f"{where} has unknown keys {sorted(unknown)[:5]}")
    if "poisoned" in meta:
        _list_of(meta["poisoned"], str, f"{where}.poisoned")
    if "inline_asm_approx" in meta:
        _list_of(meta["inline_asm_approx"], str, f"{where}.inline_asm_approx")
        if len(meta["inline_asm_approx"]) > 64 or any(len(x) > 64 for x in meta["inline_asm_approx"]):
            raise HeaderError(f"{where}.inline_asm_approx is longer than 64 names of 64 characters")
    if "reduction_order" in meta:
        notes = meta["reduction_order"]
        _typed(notes, dict, f"{where}.reduction_order")
        if len(notes) > 64 or any(not isinstance(k, str) or not isinstance(v, str) or len(k) > 200 or len(v) > 400
                                  for k, v in notes.items()):
            raise HeaderError(f"{where}.reduction_order must map at most 64 source places to notes (strings)")
    if "numerics" in meta and meta["numerics"] not in ("interpreter", "compiled"):
        raise HeaderError(f"{where}.numerics is {str(meta['numerics'])[:40]!r}, not 'interpreter' or 'compiled'")
    ex = meta.get("execution")
    if ex is not None:
        _typed(ex, dict, f"{where}.execution")
        unknown = set(ex) - {"batched_programs", "diverged_chunks", "memory_limit", "limit_notes", "fallbacks",
                             "workers"}
        if unknown:
            raise HeaderError(f"{where}.execution has unknown keys {sorted(unknown)[:5]}")
        for key in ("batched_programs", "diverged_chunks"):
            if key in ex:
                _int(ex[key], f"{where}.execution.{key}", lo=0)
        if ex.get("memory_limit") is not None:
            _int(ex["memory_limit"], f"{where}.execution.memory_limit", lo=0)
        _list_of(ex.get("limit_notes", []), str, f"{where}.execution.limit_notes")
        _list_of(ex.get("fallbacks", []), dict, f"{where}.execution.fallbacks")
        for k, fb in enumerate(ex.get("fallbacks", [])):
            _fields(fb, {"first": int, "programs": int, "reason": str}, f"{where}.execution.fallbacks[{k}]")
        if "workers" in ex:         # processes the launch ran in (record/parallel/): asked, used, why not more
            w = ex["workers"]
            _fields(w, {"asked": int, "used": int}, f"{where}.execution.workers", extra={"reason"})
            if w.get("reason") is not None:
                _typed(w["reason"], str, f"{where}.execution.workers.reason")
    if meta.get("module") is not None:
        _check_module(meta["module"], f"{where}.module")
    fail = meta.get("assert_failed")
    if fail is not None:
        w = f"{where}.assert_failed"
        _fields(fail, {"message": str, "expression": str, "line": int, "count": int, "program": "ints"}, w,
                extra={"file", "lanes", "values"})
        if fail.get("file") is not None:
            _typed(fail["file"], str, f"{w}.file")
        _list_of(fail.get("lanes", []), list, f"{w}.lanes")
        for lane in fail.get("lanes", []):
            _ints(lane, f"{w}.lanes")
        _typed(fail.get("values", {}), dict, f"{w}.values")
        for name, vals in fail.get("values", {}).items():
            _list_of(vals, (int, float, list), f"{w}.values[{name!r}]")


def _check_module(mod, where: str) -> None:
    """What a reproducer or a compile rebuilds the kernel from: model/kernelmodule.py reads it field by field
    (types, lengths, keys). The texts are written into a generated script or imported only after
    compiled/source.py checks them again as Python."""
    try:
        KernelModule.from_dict(mod, where)
    except ValueError as e:
        raise HeaderError(str(e)) from None


# -- primitives ------------------------------------------------------------------------------------------------
def _typed(value, kind, where: str) -> None:
    if kind is int:
        return _int(value, where)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool) and kind in (int, float)):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise HeaderError(f"{where} is {type(value).__name__}, not {name}")


def _int(value, where: str, lo: int = -MAX_INT) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= MAX_INT:
        raise HeaderError(f"{where} is {value!r:.40}, not an integer in {lo}..2**62")


def _ints(value, where: str, length=None) -> None:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise HeaderError(f"{where} is not a list of {length or 'some'} integers")
    for v in value:
        _int(v, where)


def _list_of(value, kind, where: str) -> None:
    if not isinstance(value, list):
        raise HeaderError(f"{where} is {type(value).__name__}, not a list")
    for v in value:
        _typed(v, kind, f"{where}[]")


def _fields(obj, spec: dict, where: str, optional=frozenset(), extra=frozenset()) -> None:
    if not isinstance(obj, dict):
        raise HeaderError(f"{where} is {type(obj).__name__}, not an object")
    unknown = set(obj) - set(spec) - set(extra)
    missing = set(spec) - set(optional) - set(obj)
    if unknown or missing:
        raise HeaderError(f"{where} has unknown keys {sorted(unknown)[:5]} or lacks {sorted(missing)[:5]}")
    for key, kind in spec.items():
        if key in obj:
            if kind == "ints":
                _ints(obj[key], f"{where}.{key}")
            else:
                _typed(obj[key], kind, f"{where}.{key}")
