"""Software pipelining as the compiled TTGIR shows it: with ``num_stages`` > 1 Triton turns a loop's loads into
asynchronous copies into shared memory (``cp.async``, or TMA on Hopper) issued ahead of the trip that uses them.
The TTGIR then holds, per pipelined load, copies before the loop (the prologue: the first num_stages - 1 trips'
tiles, issued before the loop starts), one inside it (the steady state: each trip issues the copy of a later
trip's tile, then waits for its own) and, where the compiler peels the last trips, copies after it (the
epilogue). Triton 3.6 to 3.9 peel nothing: the last trips' in-loop copies are masked off instead, and after the
loop an ``async_wait`` with ``num = 0`` drains what is still in flight; that wait is reported as the loop's drain.

Read from the text alone, as the compiler printed it: a region's lines are indented under the op that opens it,
and it closes with a ``}`` at that op's indentation.
"""
from __future__ import annotations

import re

ASYNC_LOADS = {"ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "ttng.async_tma_gather"}
_FOR = re.compile(r"^(?:%[\w#:]+\s*=\s*)?scf\.for\b")
_DRAIN = re.compile(r"\b(?:ttg\.async_wait|ttng\.wait_barrier)\b.*\{num = 0\b")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def loops(lines: list) -> list:
    """(first, last) 0-based line of every ``scf.for`` region: the op's line and the ``}`` that closes it."""
    found = []
    for i, line in enumerate(lines):
        if _FOR.match(line.strip()):
            d = _indent(line)
            end = next((j for j in range(i + 1, len(lines)) if _indent(lines[j]) == d and lines[j].lstrip().startswith("}")),
                       len(lines) - 1)
            found.append((i, end))
    return found


def _innermost(spans: list, n: int):
    """The index of the innermost loop whose body holds line ``n``, or None."""
    best = None
    for k, (a, b) in enumerate(spans):
        if a < n < b and (best is None or a > spans[best][0]):
            best = k
    return best


def pipelining(ttgir: str, ops: list, where) -> tuple:
    """(per op of ``ops`` (compiled/ir.py's memory ops, in order): "prologue", "steady" or "epilogue" for an
    async load of a pipelined loop, else None; one entry per pipelined loop: {ir_line, end_line, file, line,
    loads: [{file, line, prologue, steady, epilogue}], drain_line (the wait that drains the copies in flight
    after it, or None)}). ``where(i)``: the (file, line) of 0-based TTGIR line ``i``, or None."""
    lines = ttgir.splitlines()
    spans = loops(lines)
    parent = [_innermost(spans, a) for a, _ in spans]
    copies = [(k, o["ir_line"] - 1, (o["file"], o["line"])) for k, o in enumerate(ops) if o["op"] in ASYNC_LOADS]
    labels: list = [None] * len(ops)
    out = []
    for L, (a, b) in enumerate(spans):
        # the stretch of the enclosing region this loop owns: from the end of the sibling loop before it to the
        # start of the one after it (copies there belong to no other loop of that region)
        siblings = sorted(s for s, p in zip(spans, parent) if p == parent[L] and s != (a, b))
        lo = max([e for s, e in siblings if e < a] + [spans[parent[L]][0] if parent[L] is not None else -1])
        hi = min([s for s, e in siblings if s > b] + [spans[parent[L]][1] if parent[L] is not None else len(lines)])
        inside = [(k, loc) for k, n, loc in copies if _innermost(spans, n) == L]
        before = [(k, loc) for k, n, loc in copies if lo < n < a and _innermost(spans, n) == parent[L]]
        after = [(k, loc) for k, n, loc in copies if b < n < hi and _innermost(spans, n) == parent[L]]
        piped = sorted({loc for _, loc in inside} & {loc for _, loc in before + after}, key=lambda x: (str(x[0]), x[1]))
        if not piped:
            continue
        for group, label in ((before, "prologue"), (inside, "steady"), (after, "epilogue")):
            for k, loc in group:
                if loc in piped:
                    labels[k] = label
        drain = next((j for j in range(b + 1, hi) if _DRAIN.search(lines[j])), None)
        count = lambda group, loc: sum(1 for _, at in group if at == loc)
        file, line = where(a) or where(b) or (None, 0)        # (the op's location is printed after its region)
        out.append({"ir_line": a + 1, "end_line": b + 1, "file": file, "line": line,
                    "loads": [{"file": f, "line": ln, "prologue": count(before, (f, ln)), "steady": count(inside, (f, ln)),
                               "epilogue": count(after, (f, ln))} for f, ln in piped],
                    "drain_line": drain + 1 if drain is not None else None})
    return labels, out
