"""fp16 and bf16 sums that lost precision: a hint where a stored sum, accumulated in its low-precision type,
is more than ``ULPS`` units in the last place away from the same sum done in float64.

The recorder followed every fp16/bf16 addition's result with a float64 shadow and, where one was stored,
counted its elements by how many ulps (of the accumulator's type, at the float64 value) they are off, in a
histogram by powers of two (record/checks/accumulation.py): bucket 0 holds errors of at most 1 ulp, bucket
``b`` those in (2^(b-1), 2^b]. So the elements over any power-of-two threshold are counted exactly here.

``ULPS = 8``: one fp16/bf16 rounding is at most 0.5 ulp, and a sum kept in float32 and rounded once at the
end is within about 1; a short chain of additions (an ``x + y + z``) stays within a few. 8 ulps means the low
3 bits of the result are wrong (of fp16's 11, of bf16's 8): more than any single rounding explains, the mark
of an accumulation that rounds at every step, which a float32 accumulator (``tl.zeros(..., tl.float32)``,
cast once when stored) avoids. A hint, not a finding: the GPU computes the same (the trace is right), and a
kernel may accept the loss, but it is the kind a test at a small K never sees.
"""
from __future__ import annotations

import math

from ..context import LaunchContext

ULPS = 8                 # a power of two: the histogram's buckets end at powers of two
_NAMES = {"fp16": "float16", "bf16": "bfloat16"}


def over(hist: list, ulps: int = ULPS) -> int:
    """Elements of a histogram more than ``ulps`` (a power of two) ulps off."""
    return int(sum(hist[int(math.log2(ulps)) + 1:]))


def hints(ctx: LaunchContext) -> list:
    out = []
    for r in (ctx.launch.meta or {}).get("lowp_accumulation") or []:
        n = over(r.get("hist") or [])
        if not n:
            continue
        name = _NAMES.get(r.get("type"), r.get("type"))
        out.append({
            "kind": "lowp_accumulation", "file": r.get("file"), "line": r.get("line"), "op": "store",
            "tensor": r.get("tensor"), "saving": 0.0,
            "message": (f"the {name} sum stored to '{r.get('tensor')}' at {r.get('file')}:{r.get('line')} in kernel "
                        f"'{ctx.launch.kernel_name}' was accumulated in {name} (last added at "
                        f"{r.get('add_file')}:{r.get('add_line')}, up to {r.get('adds')} additions in a chain): "
                        f"{n} of the {r.get('checked')} stored element(s) are more than {ULPS} ulps from the same "
                        f"sum in float64, by up to {r.get('max_ulps'):.4g} ulps ({r.get('max_abs'):.4g} absolute; "
                        f"in program {tuple(r.get('program') or ())} it stored {r.get('value'):.6g} where float64 "
                        f"gives {r.get('exact'):.6g})"),
            "effect": (f"a float32 accumulator (tl.zeros(..., dtype=tl.float32), cast to {name} once when stored; "
                       f"tl.dot's default out_dtype) keeps the sum within about 1 ulp")})
    return out
