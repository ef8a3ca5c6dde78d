"""A traced launch compiled for a GPU target on this machine (no GPU needed): the IR stages with the
source line of every IR line, the layout, instruction and vector width of every global memory op, shared
memory, registers and the occupancy they allow. ``Launch.compiled(target=)`` calls ``compile_launch``.

Compiles are cached on disk (``TRITON_TRACE_CACHE_DIR``, default ``~/.cache/triton_trace``, used only when it is
this user's alone: cachedir.py) by the kernel module's text, the specialization, the launch options, the target
and Triton's version; each entry carries an HMAC of its content under the local key, so an entry someone else
wrote is compiled again. A launch read from a file is compiled only when trusted (``require_trust``).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field

from ..cachedir import CacheUnusable, cache_dir, check_file, local_key, mac, private_dir, same_mac
from ..errors import CompileError, TraceUsageError, UntrustedTrace
from . import toolchain
from . import ir
from .pipeline import pipelining
from .occupancy import occupancy
from .source import constant_node, kernel_module

IR_STAGES = ("ttir", "ttgir", "llir", "ptx")

__all__ = ["Compiled", "compile_launch", "cache_dir", "require_trust", "stand_ins"]


@dataclass(frozen=True)
class Compiled:
    """One launch compiled for ``target``. ``lines[stage][i]`` is the (file, line) of the user's source that
    line ``i + 1`` of ``ir[stage]`` comes from, or None."""
    kernel: str
    target: str
    ir: dict
    lines: dict
    ops: tuple                 # global memory ops: instruction, layout, vector width, source place, and for an
                               # async load of a software-pipelined loop its "pipeline" part (prologue, steady, epilogue)
    num_warps: int
    num_stages: int
    shared_bytes: int
    registers: object          # int, or None where the cubin could not be read
    spill_bytes: object        # local memory per thread (spills and stack arrays), or None
    occupancy: dict
    signature: dict
    divisible_by_16: tuple
    triton: str
    missing: tuple = field(default=())  # model.Unresolved: names the kernel module could not carry over
    notes: tuple = field(default=())    # e.g. why the cache was not used
    # the software-pipelined loops (num_stages > 1), compiled/pipeline.py: their IR lines, source line, each
    # pipelined load's copies before, in and after the loop, and the wait that drains them
    pipelines: tuple = field(default=())

    def ir_lines(self, line: int, file: str = None, stage: str = "ttgir") -> list:
        """1-based IR line numbers of ``stage`` that come from source ``line`` (of ``file``, if given)."""
        return [i + 1 for i, loc in enumerate(self.lines[stage])
                if loc is not None and loc[1] == line and (file is None or loc[0] == file)]

    def ops_at(self, line: int, file: str = None) -> list:
        """The compiled memory ops of one source line."""
        return [o for o in self.ops if o["line"] == line and (file is None or o["file"] == file)]

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "shared_bytes": self.shared_bytes, "registers": self.registers,
                "spill_bytes": self.spill_bytes, "occupancy": self.occupancy, "signature": self.signature,
                "divisible_by_16": list(self.divisible_by_16), "triton": self.triton, "ops": list(self.ops),
                "missing": [m.to_dict() for m in self.missing], "notes": list(self.notes),
                "pipelines": list(self.pipelines)}

    def __repr__(self) -> str:
        return (f"<Compiled {self.kernel} for {self.target}: {self.num_warps} warps, {self.shared_bytes} B shared, "
                f"{self.registers} registers, {len(self.ops)} memory ops>")


def _value(expr: str, name: str):
    node = constant_node(expr, name)
    import triton.language as tl
    return eval(compile(ast.Expression(node), "<argument>", "eval"), {"__builtins__": {"float": float}, "tl": tl})


def stand_ins(launch) -> dict:
    """Parameter name -> the value a GPU launch would pass (tensors: a DeviceTensor at the address its first
    element would have, each storage at its own aligned allocation)."""
    import torch
    if launch.module is None:
        raise TraceUsageError(f"launch of '{launch.kernel_name}' was recorded without its module: its arguments "
                              f"cannot be rebuilt")
    tensors = {t.name: t for t in launch.tensors}
    out = {}
    for name, p in launch.module.params.items():
        if p.kind == "tensor" and name in tensors:
            t = tensors[name]
            if not isinstance(getattr(torch, t.dtype, None), torch.dtype):
                raise TraceUsageError(f"launch of '{launch.kernel_name}': argument '{name}' has dtype {t.dtype!r}, "
                                      f"which is not a torch dtype")
            base = (max(t.storage, 0) + 1) * (1 << 30)
            out[name] = toolchain.DeviceTensor(getattr(torch, t.dtype), base + t.storage_offset * t.elem_bytes)
        elif p.kind == "value":
            out[name] = _value(p.expr, name)
        else:
            raise TraceUsageError(f"launch of '{launch.kernel_name}': argument '{name}' is a {p.type or p.kind}"
                                  f", which triton_trace cannot pass to a compile yet")
    return out


def require_trust(launch) -> None:
    """Raise UntrustedTrace where ``launch`` came from a file this user neither recorded, signed nor trusted:
    its kernel source is data, and compiling it runs Triton's code generator over it."""
    if not getattr(launch, "trusted", True):
        raise UntrustedTrace(
            f"launch of '{launch.kernel_name}' comes from {launch.origin or 'a trace file'}, which this user did "
            f"not record or sign: its kernel is not compiled or run (the file is data); trust the file to do so: "
            f"triton_trace.load(path, trust=True), or --trust on the command line")


def compile_launch(launch, target="sm_90", cache: bool = True, allowed_imports=None, options=None) -> Compiled:
    """Compile ``launch``'s kernel for ``target`` ("sm_90", "H200", 100, ...) as its GPU launch would be;
    ``options`` (num_warps, num_stages, ...) override the launch's own. A launch from a file the user trusted
    by hand (not recorded or signed here) must also pass compiled/bodycheck.py's allowlist."""
    require_trust(launch)
    arch = toolchain.arch_of(target)
    module = kernel_module(launch, allowed_imports, strict=getattr(launch, "provenance", "recorded") == "trusted")
    args = stand_ins(launch)
    options = {**launch.module.options(), **(options or {})}
    spec = json.dumps([module.text, {k: repr(getattr(v, "dtype", v)) + str(getattr(v, "data_ptr", lambda: "")())
                                     for k, v in args.items()}, options, arch, toolchain.triton_version(),
                       list(launch.module.no_specialize), list(launch.module.no_specialize_alignment)],
                      sort_keys=True)
    key = hashlib.sha256(spec.encode()).hexdigest()[:32]
    notes = []
    raw = _cached(key, notes) if cache else None
    if raw is None:
        raw = _compile(launch, module, args, options, arch, notes)
        if cache:
            _keep(key, raw, notes)
    return _build(launch, module, raw, arch, tuple(notes))


def _compile(launch, module, args, options, arch, notes) -> dict:
    """Compile the module through a file in the private cache (a fresh private folder where the cache
    cannot be used), removed once Triton has read it."""
    try:
        folder, scratch = private_dir("modules"), None
    except CacheUnusable as e:
        folder = scratch = tempfile.mkdtemp(prefix="triton_trace_")
        notes.append(f"cache not used: {e}")
    path = None
    try:
        py, path = toolchain.import_module(module.text, folder)
        raw = toolchain.compile_jit(getattr(py, module.kernel), args, options, arch, launch.module.no_specialize,
                                    launch.module.no_specialize_alignment)
    except (TraceUsageError, CompileError):
        raise
    except Exception as e:          # the compiler's own errors have no common class
        first = str(e).strip().splitlines()[:6]
        raise CompileError(f"kernel '{launch.kernel_name}' did not compile for sm_{arch} (Triton "
                           f"{toolchain.triton_version()}): {type(e).__name__}: {' / '.join(first)}") from e
    finally:
        if path is not None and os.path.exists(path):
            os.unlink(path)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    raw["module_file"] = path
    return raw


def _cached(key: str, notes: list):
    """The cached compile of ``key``, if the cache is private and the entry carries this user's MAC of its
    content (anything else, a forged IR or num_warps among them, is compiled again)."""
    try:
        folder = private_dir("compiled")
        path = os.path.join(folder, key + ".json")
        if not os.path.lexists(path):
            return None
        check_file(path)
        secret = local_key()
        with open(path, encoding="utf-8") as f:
            entry = json.load(f)
    except CacheUnusable as e:
        notes.append(f"cache not used: {e}")
        return None
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("raw"), dict):
        return None
    body = json.dumps(entry["raw"], sort_keys=True).encode()
    return entry["raw"] if same_mac(entry.get("mac"), mac(secret, key.encode(), body)) else None


def _keep(key: str, raw: dict, notes: list) -> None:
    try:
        folder = private_dir("compiled")
        secret = local_key()
        body = json.dumps(raw, sort_keys=True).encode()
        fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=folder)      # processes may compile it at once
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"mac": mac(secret, key.encode(), body), "raw": raw}, f)
        os.replace(tmp, os.path.join(folder, key + ".json"))
    except OSError as e:            # CacheUnusable, a full disk: the compile stands, uncached
        if not any(n.startswith("cache not used") for n in notes):
            notes.append(f"cache not used: {e}")


def _build(launch, module, raw: dict, arch: int, notes: tuple = ()) -> Compiled:
    mod_file = raw["module_file"]

    def original(loc):
        if loc is None:
            return None
        file, line = loc
        return module.original(line) if os.path.basename(file) == os.path.basename(mod_file) else (file, line)

    lines = {"ttir": ir.mlir_lines(raw["ttir"]), "ttgir": ir.mlir_lines(raw["ttgir"]), "ptx": ir.ptx_lines(raw["ptx"]),
             "llir": [None] * len(raw["llir"].splitlines())}
    lines = {stage: [original(loc) for loc in locs] for stage, locs in lines.items()}
    ops = ir.memory_ops(raw["ttgir"], raw["ptx"], lambda loc: original(loc) or (None, 0))
    parts, pipelines = pipelining(raw["ttgir"], ops, lambda i: lines["ttgir"][i])
    ops = [dict(o, pipeline=part) for o, part in zip(ops, parts)]
    res = raw.get("resources", {})
    return Compiled(
        kernel=launch.kernel_name, target=f"sm_{arch}", ir={s: raw[s] for s in IR_STAGES}, lines=lines,
        ops=tuple(ops), num_warps=raw["num_warps"], num_stages=raw["num_stages"], shared_bytes=raw["shared_bytes"],
        # spilled registers live in the thread's stack frame (cuobjdump's STACK; LOCAL stays 0 for them)
        registers=res.get("registers"),
        spill_bytes=max(res.get("stack", 0), res.get("local", 0)) if "stack" in res or "local" in res else None,
        occupancy=occupancy(arch, raw["num_warps"], res.get("registers"), raw["shared_bytes"]),
        signature=raw["signature"], divisible_by_16=tuple(raw["divisible_by_16"]), triton=raw["triton"],
        missing=tuple(module.missing), notes=notes, pipelines=tuple(pipelines))
