"""Hints: what a source line's memory ops waste, and what fixing it would save, from the numbers the
analysis already has for each static op (metrics.static_ops). Not findings (nothing is wrong), advice:

- ``masked_lanes``: most lanes of an op are masked off, so the block is far larger than what it covers
  (a BLOCK rounded up past a short row, a tail program); the predicted saving is the lanes (and, per
  program, the work) a block that fits would not run.
- ``uncoalesced``: the op uses few of the bytes of the 32-byte sectors it fetches (strided or gathered
  lanes); the saving is the sectors a contiguous access of the same bytes would need.
- ``narrow_vector`` (vectorize.py): the op's data is contiguous and aligned in every program while the
  compiled kernel moves it in narrower vectors (an alignment the compiler could not prove); the saving is the
  instructions the wider vector would not issue.

- ``occupancy``, ``spills``, ``tail_wave`` (from the compiled kernel, ``resource_hints``): few programs
  fit on an SM (what limits them), registers spilled to local memory, a last wave of programs that
  leaves most SMs idle; the same facts Nsight Compute's occupancy, local-memory and wave rules report.

Each hint names the file and line, the op and tensor, the measured numbers and the predicted effect.
"""
from __future__ import annotations

from ..context import LaunchContext
from ..units import nbytes, percent, sig
from . import vectorize

MASKED_SHARE = 0.5           # hint when at least half of an op's lanes are masked off (rounding a block up to a power
                             # of two, as tl.arange needs, wastes less than that)
SECTOR_EFFICIENCY = 0.5      # hint when an op uses less than this share of the sector bytes it fetches
MIN_LANES = 256              # ops that run fewer lanes in the whole launch are not worth a hint
MAX_HINTS = 50


def hints(ctx: LaunchContext, ops: list) -> list:
    """Hints for one launch, the largest predicted saving first."""
    out = []
    shape_of = lambda op_index: tuple(int(s) for s in ctx.launch.ops["shape"][int(ctx.op_first_row[op_index])]
                                      [:int(ctx.launch.ops["ndim"][int(ctx.op_first_row[op_index])])])
    for k, op in enumerate(ops):
        if op.get("pattern") is None or op["lanes"] < MIN_LANES:       # compute ops, or too small to matter
            continue
        where = f"{op['kind']} of '{op['tensor']}' at line {op['line']}"
        masked = op["masked_lanes"] / op["lanes"] if op["lanes"] else 0.0
        if masked >= MASKED_SHARE and op["active_lanes"]:
            block = "x".join(str(s) for s in shape_of(k)) or "1"
            ratio = op["lanes"] / op["active_lanes"]
            out.append({"kind": "masked_lanes", "file": op["file"], "line": op["line"], "op": op["kind"],
                        "tensor": op["tensor"], "saving": masked,
                        "message": f"{percent(masked)} of the lanes of the {where} are masked off: its block "
                                   f"({block}) is {sig(ratio)}x the elements it covers",
                        "effect": f"a block that fits would run {op['masked_lanes']:,} fewer lanes "
                                  f"({percent(masked)} of this op's)"})
        eff = op.get("sector_efficiency")
        if eff is not None and eff < SECTOR_EFFICIENCY and op["sectors"]:
            why = (f"the fastest-varying offset strides by {op['stride']} elements" if op["pattern"] == "strided"
                   else "the lanes gather from scattered offsets" if op["pattern"] == "gather"
                   else f"its access pattern is {op['pattern']}")
            ideal = -(-op["used_bytes"] // 32)
            out.append({"kind": "uncoalesced", "file": op["file"], "line": op["line"], "op": op["kind"],
                        "tensor": op["tensor"], "saving": 1.0 - eff,
                        "message": f"line {op['line']}: the {where} uses {percent(eff)} of the bytes of the "
                                   f"sectors it fetches; {why}",
                        "effect": f"contiguous lanes would fetch about {ideal:,} sectors instead of "
                                  f"{op['sectors']:,} ({sig(op['sectors'] / max(ideal, 1))}x fewer)"})
    out += vectorize.hints(ctx, ops, MIN_LANES)
    out.sort(key=lambda h: -h["saving"])
    return out[:MAX_HINTS]


LOW_OCCUPANCY = 0.5          # hint below this share of the SM's warp slots
TAIL_FILL = 0.5              # hint when the last wave fills less than this share of the GPU


def resource_hints(ctx: LaunchContext, compiled: dict, sms: int) -> list:
    """Hints from the compiled kernel's resources (the report's "compiled" entry), tied to the kernel's
    ``def`` line."""
    occ = compiled.get("occupancy") or {}
    if not occ or compiled.get("layouts") != "compiler":
        return []
    lc, out = ctx.launch, []
    base = {"file": lc.source_file, "line": lc.source_line, "op": None, "tensor": None}
    per_sm = int(occ["programs_per_sm"])
    if occ["occupancy"] < LOW_OCCUPANCY:
        out.append({**base, "kind": "occupancy", "saving": 1.0 - occ["occupancy"],
                    "message": f"{percent(occ['occupancy'])} occupancy on {compiled['target']}: {per_sm} program(s) of "
                               f"{compiled['num_warps']} warps per SM, limited by {occ['limited_by']} "
                               f"({compiled['registers']} registers per thread, {nbytes(compiled['shared_bytes'])} shared)",
                    "effect": "fewer warps to hide memory latency; fewer registers or a smaller tile (or num_stages) "
                              "would fit more programs"})
    if compiled.get("spill_bytes"):
        out.append({**base, "kind": "spills", "saving": 0.0,
                    "message": f"{nbytes(compiled['spill_bytes'])} per thread of local memory (register spills) with "
                               f"{compiled['registers']} registers per thread",
                    "effect": "every spill is a load and store through L1/L2 the trace does not show; a smaller tile "
                              "or more warps would keep the accumulator in registers"})
    programs = lc.num_programs
    wave = per_sm * sms
    if per_sm and programs > wave and programs % wave and (programs % wave) / wave < TAIL_FILL:
        full, rest = divmod(programs, wave)
        out.append({**base, "kind": "tail_wave", "saving": 0.0,
                    "message": f"{programs:,} programs make {full} full wave(s) of {wave:,} ({per_sm} per SM x {sms} SMs) "
                               f"and a last one of {rest:,} ({percent(rest / wave)} of the GPU)",
                    "effect": f"the last wave may take up to {percent(1 / (full + 1))} of the runtime with most SMs idle"})
    return out
