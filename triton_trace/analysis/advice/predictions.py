"""What the GPU will do that the trace did not: int32 offsets that wrap at a larger size, and float32 dots
that run in TF32. Hints, not findings (the recorded launch is correct as traced).

int32 offsets: a prediction from one launch at a small size.

``x_ptr + offs`` with an int32 ``offs`` works until ``offs`` passes 2^31 - 1, where it wraps and the
access lands elsewhere (or faults). A test at a small size never sees it. The recorder keeps, per memory
op, the largest int32 offset its pointers were built from (record/checks/addresses.py); here that largest
offset is matched with the launch's integer arguments: the product of the arguments (one to three of them)
that, times a factor near 1, gives the largest offset + 1 is how the offsets grow (``rm * N + rn`` grows as
M*N; the factor absorbs a block's padding). Scaling those arguments evenly until the product passes
2^31 / factor gives the first size at which the offsets wrap. It is a prediction from one launch (a fit, not
a proof): a kernel whose offsets grow some other way gets no size, only its headroom.

``limits(launch)`` gives one entry per tensor whose offsets are int32 (the largest op); ``hints(ctx)`` turns
the ones within ``HINT_HEADROOM`` of wrapping into hints (a launch at a realistic size), since every kernel
indexed in int32 has a limit and a hint for each would drown the others.

TF32: a float32 ``tl.dot`` with the default input precision runs in TF32 on
sm_80+ GPUs (A100, H100, H200), while the trace computed it in float32. The recorder computed the first
dots of each line both ways (record/checks/tf32.py); a hint gives the largest difference it saw, absolute
and relative to the largest |result| of those dots, so the user can judge whether TF32 is accurate enough
or pass ``input_precision="ieee"`` (or ``"tf32x3"``, close to float32 at about three times the cost).
A hint, not a finding: TF32 is the default on purpose, and many kernels want it.
"""
from __future__ import annotations

import ast
import itertools
import math
from typing import Optional

from ..context import LaunchContext

LIMIT = 1 << 31                   # an int32 offset wraps past LIMIT - 1
MAX_ARGS = 3                      # products of up to this many arguments are tried
FACTOR = (0.5, 2.0)               # the largest offset + 1 over the product must lie in this range
HINT_HEADROOM = 1 << 10           # hint when the offsets are within this factor of wrapping


def limits(launch) -> list:
    """Per tensor addressed through int32 offsets: {"tensor", "file", "line", "op", "max", "headroom",
    "args": names the offsets grow with (empty: no fit), "factor", "wraps_at": {name: value}}."""
    per: dict = {}
    for r in (launch.meta or {}).get("int32_address") or []:
        t = r.get("tensor")
        if t not in per or r["max"] > per[t]["max"]:
            per[t] = r
    sizes = _size_args(launch)
    out = []
    for t, r in sorted(per.items(), key=lambda kv: (-kv[1]["max"], str(kv[0]))):
        top = int(r["max"]) + 1
        entry = {"tensor": t, "file": r.get("file"), "line": r.get("line"), "op": r.get("op"), "max": int(r["max"]),
                 "headroom": LIMIT / top, "args": [], "factor": None, "wraps_at": {}}
        fit = _fit(top, sizes)
        if fit is not None:
            names, factor = fit
            entry.update(args=list(names), factor=factor, wraps_at=_scaled({n: sizes[n] for n in names}, factor))
        out.append(entry)
    return out


def hints(ctx: LaunchContext) -> list:
    return _offset_hints(ctx) + _tf32_hints(ctx)


def _offset_hints(ctx: LaunchContext) -> list:
    out = []
    for e in limits(ctx.launch):
        if e["headroom"] > HINT_HEADROOM:
            continue
        out.append({"kind": "int32_offsets", "file": e["file"], "line": e["line"], "op": e["op"],
                    "tensor": e["tensor"], "saving": 0.0, "message": describe(e, ctx.launch.kernel_name),
                    "effect": "offsets computed in int64 (e.g. pid.to(tl.int64) * stride) do not wrap"})
    return out


def describe(e: dict, kernel: str) -> str:
    where = f"{e['op']} of '{e['tensor']}' at {e['file']}:{e['line']} in kernel '{kernel}'"
    head = f"the {where} is addressed through int32 offsets that reach {e['max']:,}"
    if not e["args"]:
        return (f"{head}: they wrap past 2^31 - 1 once they grow {e['headroom']:.3g}x (a prediction; the "
                f"arguments do not tell how they grow)")
    product = "*".join(e["args"])
    at = ", ".join(f"{k}={v}" for k, v in e["wraps_at"].items())
    return (f"{head}, growing as {product} (largest offset + 1 = {e['factor']:.4g} * {product}, fitted to this "
            f"launch's arguments): predicted to wrap when {product} > {LIMIT / e['factor']:.4g} (2^31 / "
            f"{e['factor']:.4g}), first at {at}; offsets computed in int64 (e.g. pid.to(tl.int64)) do not wrap")


def _size_args(launch) -> dict:
    """The integer arguments that may be sizes: not booleans, not constexprs (block sizes), larger than 1."""
    const = _constexprs(launch.source)
    return {k: int(v) for k, v in (launch.args or {}).items()
            if isinstance(v, int) and not isinstance(v, bool) and v > 1 and k not in const}


def _constexprs(source: str) -> set:
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError, RecursionError, MemoryError):     # (a trace file's text may be anything)
        return set()
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        return set()
    args = fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}


def _fit(top: int, sizes: dict) -> Optional[tuple]:
    """(argument names, factor) of the product closest to ``top`` within FACTOR; fewer arguments, then
    arguments not named as strides, win ties."""
    best = None
    names = list(sizes)
    for k in range(1, min(MAX_ARGS, len(names)) + 1):
        for combo in itertools.combinations(names, k):
            factor = top / math.prod(sizes[n] for n in combo)
            if not FACTOR[0] <= factor <= FACTOR[1]:
                continue
            score = (round(abs(math.log(factor)), 6), k, sum(n.lower().startswith("stride") for n in combo))
            if best is None or score < best[0]:
                best = (score, combo, factor)
    return None if best is None else (best[1], best[2])


def _scaled(args: dict, factor: float) -> dict:
    """The arguments scaled by one common ratio (a power of two when they are all powers of two) until the
    largest offset, ``factor`` times their product less one, passes LIMIT - 1: the last argument is then
    raised one by one to the first size that does."""
    need = LIMIT / factor / math.prod(args.values())
    ratio = need ** (1.0 / len(args))
    if all(v & (v - 1) == 0 for v in args.values()):
        ratio = 2.0 ** math.ceil(math.log2(need) / len(args) - 1e-9)
    out = {k: int(math.ceil(v * ratio)) for k, v in args.items()}
    last = list(out)[-1]
    while factor * math.prod(out.values()) <= LIMIT:      # the largest offset, product * factor - 1, fits
        out[last] += 1
    return out


def _tf32_hints(ctx: LaunchContext) -> list:
    out = []
    for r in (ctx.launch.meta or {}).get("tf32_dot") or []:
        diff, top = float(r.get("max_abs") or 0.0), float(r.get("max_result") or 0.0)
        if diff <= 0.0:
            continue
        rel = diff / top if top > 0 else float("inf")
        out.append({
            "kind": "tf32_dot", "file": r.get("file"), "line": r.get("line"), "op": "dot", "tensor": None,
            "saving": 0.0,
            "message": (f"tl.dot at {r.get('file')}:{r.get('line')} in kernel '{ctx.launch.kernel_name}' multiplies "
                        f"float32 blocks with the default input precision: on sm_80+ GPUs (A100, H100, H200) it "
                        f"runs in TF32 (inputs cut to a 10-bit mantissa); computed both ways over the first "
                        f"{r.get('checked')} dot(s) of this line (K = {r.get('k')}), the GPU's result differs from "
                        f"the traced one by up to {diff:.3g} ({rel:.2g} of the largest |result|, {top:.3g})"),
            "effect": "input_precision='ieee' computes in float32 as traced; 'tf32x3' comes close at about 3x the "
                      "tensor-core work"})
    return out
