"""``GET /api/launch/<i>/compiled?target=sm_90`` -> ``CompiledPayload``: the launch's kernel compiled for a GPU
target on the server's CPU (triton_trace.compiled, cached on disk), for the IR view.

    target, targets      the target compiled and the ones offered
    error                null, or why the kernel did not compile (the view shows it; the status is 200)
    resources            num_warps, num_stages, shared_bytes, registers, spill_bytes, occupancy, triton
    signature, divisible_by_16
    files                file names the ``src`` columns index
    source               per function (the kernel, then its jit helpers): file index, first line, lines
    stages               ttir / ttgir / ptx: ``lines`` (IR text, at most MAX_IR_LINES of MAX_LINE_CHARS, its locations
                         the kernel's own file and lines: view/places.py)
                         and ``src`` ([file index, line] or null per IR line), ``total`` lines, ``truncated``
    ops                  global memory ops: op, instruction (ld / st / atom / cp.async / tma), direction,
                         vector_bytes, layout (kind and fields), shape, element, file index, line, ir_line,
                         pipeline ("prologue" / "steady" / "epilogue" for an async load of a pipelined loop, else null)
    pipelines            per software-pipelined loop (compiled/pipeline.py): ir_line, end_line (its TTGIR lines),
                         file index, line (its source line), loads ([{file, line, prologue, steady, epilogue}]: the
                         async copies of each pipelined load before, inside and after it), drain_line (the TTGIR
                         wait that drains the copies in flight after the loop, or null)
    dots                 per source line with a tl.dot: file index, line, as ("wgmma" / "mma" / "fma" / null:
                         the PTX instructions of that line), count (how many)

A trace file may come from anyone: a launch from a file the user did not record or sign is not compiled at
all (``error`` says so and names --trust); otherwise the kernel module is rebuilt only from imports of
Triton, torch, numpy and math, constants and function definitions (compiled/source.py checks every
statement, compiled/bodycheck.py every body of a file trusted by hand), and all text goes to the page as
JSON strings that the view puts in with textContent.
"""
from __future__ import annotations

from .limits import MAX_LINE_CHARS, MAX_SOURCE_LINES, MAX_TEXT
from ..analysis.units import nbytes, place
from .lookup import TraceIndex
from .places import cell_name, readable_ir

MAX_IR_LINES = 20_000
TARGETS = ("sm_80", "sm_90", "sm_100")
ACCEPTED = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "A100", "H100", "H200", "B200"}
IR_SHOWN = ("ttir", "ttgir", "ptx")


def _clip(text: str, n: int = MAX_LINE_CHARS) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


# How a tl.dot was lowered, told by the PTX instructions of its source line (most specific first): Hopper's
# warpgroup MMA, the tensor cores' mma.sync, or plain FMAs (no tensor cores: e.g. fp32 with "ieee" precision).
DOT_FAMILIES = (("wgmma.", "wgmma"), ("mma.", "mma"), ("fma.", "fma"))


def dot_lowering(c) -> list:
    """[(file, line, family or None, how many PTX instructions of it)] per source line with a tt.dot."""
    locs = sorted({tuple(loc) for text, loc in zip(c.ir["ttir"].splitlines(), c.lines["ttir"])
                   if "tt.dot " in text and loc and loc[0]})
    ptx = [(text.strip().split(None, 1)[-1] if text.strip().startswith("@") else text.strip(), tuple(loc) if loc else None)
           for text, loc in zip(c.ir["ptx"].splitlines(), c.lines["ptx"])]
    out = []
    for loc in locs:
        ins = [text for text, at in ptx if at == loc]
        found = next(((fam, sum(t.startswith(prefix) for t in ins)) for prefix, fam in DOT_FAMILIES
                      if any(t.startswith(prefix) for t in ins)), (None, 0))
        out.append((loc[0], int(loc[1]), found[0], found[1]))
    return out


def ir_listing(lc, c, stage: str) -> list:
    """``triton-trace ir``'s lines: for "summary" the kernel's resources and one line per global memory op,
    for a stage each IR line after the source line it came from; locations in the kernel's own file."""
    from ..compiled.source import kernel_module
    where = lambda file, line: place(cell_name(file) or "?", line)
    if stage != "summary":
        module = kernel_module(lc, strict=getattr(lc, "provenance", "recorded") == "trusted")
        text = readable_ir(c.ir[stage], module.original, lc.source_file).splitlines()
        return [f"{where(*loc) if loc else '':>24}  {line}" for line, loc in zip(text, c.lines[stage])]
    out = [f"{c.kernel} ({where(lc.source_file, lc.source_line)}) compiled for {c.target} with Triton {c.triton}: "
           f"{c.num_warps} warps, {c.registers} registers per thread, {nbytes(c.shared_bytes)} shared, "
           f"{len(c.ops)} global memory op(s)"]
    for o in c.ops:
        lay = o["layout"] or {}
        out.append(f"  {where(o['file'], o['line'])} {o['op']} as {o['instruction']}, {o['vector_bytes'] or '?'} B per "
                   f"access, {lay.get('kind', '?')} sizePerThread={lay.get('sizePerThread')} "
                   f"threadsPerWarp={lay.get('threadsPerWarp')} warpsPerCTA={lay.get('warpsPerCTA')}")
    return out


def compiled_payload(ti: TraceIndex, i: int, target: str) -> dict:
    from ..compiled import compile_launch
    from ..compiled.source import SAFE_PACKAGES, kernel_module
    from ..errors import TritonTraceError
    lc = ti.trace.launches[i]
    out = {"launch": i, "kernel": _clip(lc.kernel_name, MAX_TEXT), "target": target, "targets": list(TARGETS),
           "error": None}
    try:
        c = compile_launch(lc, target, allowed_imports=SAFE_PACKAGES)
    except TritonTraceError as e:
        return {**out, "error": _clip(str(e), 4 * MAX_TEXT)}
    files: list = []

    def fid(name):
        if name is None:
            return None
        name = cell_name(name)
        if name not in files:
            files.append(name)
        return files.index(name)

    stages = {}
    module = kernel_module(lc, SAFE_PACKAGES, strict=getattr(lc, "provenance", "recorded") == "trusted")
    for stage in IR_SHOWN:
        text = readable_ir(c.ir[stage], module.original, lc.source_file).splitlines()
        shown = text[:MAX_IR_LINES]
        stages[stage] = {"lines": [_clip(t) for t in shown], "total": len(text), "truncated": len(text) > len(shown),
                         "src": [[fid(loc[0]), int(loc[1])] if loc and loc[0] else None
                                 for loc in c.lines[stage][:MAX_IR_LINES]]}
    source = []
    functions = [(lc.source_file, lc.source_line, lc.source)] + \
        [(h.file, h.line, h.source) for h in (lc.module.helpers if lc.module is not None else ())]
    from ..model.kernelmodule import source_from_def
    for file, line, text in functions:
        body, _ = source_from_def(text)
        lines = body.splitlines()[:MAX_SOURCE_LINES]
        source.append({"file": fid(file), "first_line": int(line), "lines": [_clip(t) for t in lines]})
    ops = [{"op": o["op"], "instruction": o["instruction"], "direction": o["direction"],
            "vector_bytes": o["vector_bytes"], "shape": o["shape"], "element": o["element"],
            "layout": o["layout"], "file": fid(o["file"]), "line": int(o["line"] or 0), "ir_line": o["ir_line"],
            "pipeline": o.get("pipeline")} for o in c.ops]
    pipelines = [{**p, "file": fid(p["file"]), "line": int(p["line"] or 0),
                  "loads": [{**x, "file": fid(x["file"]), "line": int(x["line"] or 0)} for x in p["loads"]]}
                 for p in c.pipelines]
    return {**out, "target": c.target,
            "resources": {"num_warps": c.num_warps, "num_stages": c.num_stages, "shared_bytes": c.shared_bytes,
                          "registers": c.registers, "spill_bytes": c.spill_bytes, "occupancy": c.occupancy,
                          "triton": c.triton},
            "signature": c.signature, "divisible_by_16": list(c.divisible_by_16),
            "dots": [{"file": fid(f), "line": ln, "as": fam, "count": n} for f, ln, fam, n in dot_lowering(c)],
            "files": [_clip(f, MAX_TEXT) for f in files], "source": source, "stages": stages, "ops": ops,
            "pipelines": pipelines}
