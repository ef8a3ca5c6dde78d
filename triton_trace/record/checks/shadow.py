"""Where precision is lost: every floating value of a launch followed by a float64 shadow, per source line.

Opt-in. ``with shadowing("float64"):`` around a traced launch (``analyze(..., shadow="float64")`` re-runs a
launch kept with ``trace(inputs=True)`` this way) makes this monitor active; otherwise its row installs no
hook, so a launch traced without it pays one ContextVar read.

What a value carries (``Shadow``, on the handle under ``TAG``; shadow_ops.py computes it):

- ``exact``: the value with every floating op of the kernel done in float64 on the shadows of its operands.
  A value no followed op produced (a load, a constant, the result of an op not followed) is its own shadow:
  the error the kernel's inputs already hold is not the kernel's.
- ``parts``: for each source line L whose rounding reached the value, ``value_L - exact``, where
  ``value_L`` is the value computed with every op exact except those of line L, which add the error the real
  op made on its real operands (``real(op(x)) - op64(x)``: the kernel's own rounding, libdevice's and the
  interpreter's included, not an idealised one). This is the counterfactual "line L alone rounds", run for
  every line at once and exactly (not linearised): the error a store gets from line L, amplification by
  later lines included. When the lines' errors interact the parts need not add up to the total error; the
  store records what they leave unexplained.
- ``path``: every line the value's computation passed through (a cancelling subtraction adds no rounding
  of its own, so it is in no part, but it is where the error grows).

Per source line and result type the monitor keeps (``shadow_line``), in ulps of the real result's type:
``local`` (real result vs the same op in float64 on the real operands: the line's own rounding, at most 0.5
for a correctly rounded op), ``error`` (real result vs its shadow: all the error accumulated so far) and
``gained`` (the error of the result beyond the largest error of its operands, both in the result type's
ulps: rounding plus amplification, where precision is lost: ``log(t)`` of a ``t`` rounded next to 1,
``a - b`` of nearly equal ``a`` and ``b``) and ``amplified`` (the result's error over its operands' largest,
at least half an ulp: at most about 2 where a line only rounds, 2 where it squares, far more where it
cancels). Per store line, tensor and type (``shadow_store``): the stored
value against its shadow, and each line's part of it (``part_*``: the largest and the summed ulps of
``|value_L - exact|``), lines on the path with no part listed at 0, and the largest error in ulps of the
largest value stored there (``normwise``: a softmax probability of 1e-35 that is 60 ulps off loses nothing
that matters, a variance that is does). ``analysis/advice/shadow.py`` turns these into the report's
per-line table and hints.

float64 values are their own shadow (the mode measures float32 and narrower); values lose their shadow
through a divergent loop's merge, a compacted chunk, a custom reduction or scan, inline asm, ``dot_scaled``
and atomics, and start afresh there. Counts weigh a program once whether it ran alone or in a batched chunk.
"""
from __future__ import annotations

import contextvars
import copy
from contextlib import contextmanager
import numpy as np

from ...errors import TraceUsageError
from .monitor import ProgramRows

MODES = ("float64",)
TAG = "_tt_shadow"
MAX_PARTS = 32             # lines a value (and a store's record) keeps parts for; past it they merge into OTHER
OTHER = ("", 0)            # the merged lines
# (significand bits after the leading one, smallest normal exponent) of each float type followed
TYPES = {"fp64": (52, -1022), "fp32": (23, -126), "fp16": (10, -14), "bf16": (7, -126), "fp8e5": (2, -14),
         "fp8e4nv": (3, -6)}

_MODE: contextvars.ContextVar = contextvars.ContextVar("triton_trace_shadow", default=None)


@contextmanager
def shadowing(mode: str = "float64"):
    """Launches traced inside the block follow every floating value with a ``mode`` shadow (their
    ``meta["shadow_line"]`` and ``meta["shadow_store"]``); the block's thread and context only."""
    if mode not in MODES:
        raise TraceUsageError(f"shadow={mode!r}: the shadow is one of {', '.join(map(repr, MODES))}")
    token = _MODE.set(mode)
    try:
        yield
    finally:
        _MODE.reset(token)


def ulp(exact: np.ndarray, type_name: str) -> np.ndarray:
    """The unit in the last place of ``type_name`` at ``exact`` (subnormal spacing below the smallest normal)."""
    bits, emin = TYPES[type_name]
    _, e = np.frexp(exact)
    exp = np.where(exact == 0, emin, np.maximum(e.astype(np.int64) - 1, emin))
    return np.ldexp(1.0, exp - bits)


def ulps(value: np.ndarray, exact: np.ndarray, type_name: str) -> np.ndarray:
    return np.abs(value - exact) / ulp(exact, type_name)


class Shadow:
    __slots__ = ("exact", "parts", "path")

    def __init__(self, exact: np.ndarray, parts: dict, path: frozenset):
        self.exact, self.parts, self.path = exact, parts, path


def capped(parts: dict) -> dict:
    """At most MAX_PARTS lines: the ones of least error merge into OTHER (their sum: a first-order merge)."""
    if len(parts) <= MAX_PARTS:
        return parts
    order = sorted(parts, key=lambda k: -float(np.max(np.abs(parts[k]), initial=0.0)))
    kept = {k: parts[k] for k in order[:MAX_PARTS - 1]}
    kept[OTHER] = sum(parts[k] for k in order[MAX_PARTS - 1:])
    return kept


def _entry(kind: str) -> dict:
    if kind == "line":
        return {"ops": set(), "executions": 0, "trips": 0, "elements": 0, "local_max": 0.0, "local_sum": 0.0,
                "error_max": 0.0, "error_sum": 0.0, "gained_max": -1.0, "gained_sum": 0.0, "amplified_max": 0.0,
                "amplified_sum": 0.0, "program": [0, 0, 0], "value": 0.0, "exact": 0.0, "operands": 0.0}
    return {"elements": 0, "error_max": -1.0, "error_sum": 0.0, "abs_max": 0.0, "scale": 0.0, "program": [0, 0, 0],
            "value": 0.0, "exact": 0.0, "unexplained_sum": 0.0, "parts": {}}


class Shadows(ProgramRows):
    lists = ()

    def __init__(self, tensors=(), outputs=()):
        super().__init__(tensors, outputs)
        self.mode = _MODE.get()
        self.lines: dict = {}      # (file, line, type) -> entry
        self.stores: dict = {}     # (file, line, tensor, type) -> entry
        self.ops = 0               # followed ops
        self._trips: dict = {}     # (line, op) -> its executions in the running chunk: a loop's trips

    def begin(self, pids, keep, batched) -> None:
        super().begin(pids, keep, batched)
        self._trips = {}

    def mark(self):
        return None if self.mode is None else copy.deepcopy((self.lines, self.stores, self.ops))

    def rollback(self, mark) -> None:
        if mark is not None:
            self.lines, self.stores, self.ops = mark

    def weights(self, shape: tuple) -> np.ndarray:
        """How many programs each element of a block stands for (the program axis first when batched): 0 for
        programs not recorded or sitting out a masked trip; a batched block of one row stands for all."""
        if not self.batched or not shape:
            return np.ones(())
        keep = np.ones(len(self._pids), bool)
        for sel in (self._keep, self._active):
            if sel is not None and len(sel) == len(keep):
                keep &= sel
        rows = shape[0]
        w = np.array([float(keep.sum())]) if rows == 1 else keep.astype(np.float64)
        if len(w) != rows:
            w = np.ones(rows)
        return w.reshape((-1,) + (1,) * (len(shape) - 1))

    def _pid(self, shape: tuple, flat: int) -> list:
        row = np.unravel_index(flat, shape)[0] if self.batched and shape else 0
        return [int(v) for v in self._pids[min(int(row), len(self._pids) - 1)]]

    def line(self, key: tuple, op: str, real, local_exact, exact, operands) -> None:
        """One execution of a followed op at line ``key`` = (file, line, type): its real result, the op in
        float64 on the real operands, the result's shadow, and its operands' largest error (ulps, broadcast)."""
        t = key[2]
        shape = np.shape(real)
        with np.errstate(all="ignore"):
            w = np.broadcast_to(self.weights(shape), shape)
            ok = np.isfinite(real) & np.isfinite(exact) & np.isfinite(local_exact) & (w > 0)
            if not ok.any():
                return
            operands = np.where(np.isnan(operands), 0.0, operands)      # an operand with no finite error
            local = np.where(ok, ulps(real, local_exact, t), 0.0)
            err = np.where(ok, ulps(real, exact, t), 0.0)
            gained = np.where(ok, np.maximum(err - operands, 0.0), -1.0)
            amplified = np.where(ok, err / np.maximum(operands, 0.5), 0.0)
        e = self.lines.get(key)
        if e is None:
            e = self.lines[key] = _entry("line")
        e["ops"].add(op)
        e["executions"] += int(w.reshape(shape[0], -1)[:, 0].sum()) if self.batched and shape else 1
        n = self._trips[key + (op,)] = self._trips.get(key + (op,), 0) + 1
        e["trips"] = max(e["trips"], n)
        e["elements"] += int(w[ok].sum())
        for name, a in (("local", local), ("error", err), ("amplified", amplified)):
            e[name + "_max"] = max(e[name + "_max"], float(a.max()))
            e[name + "_sum"] += float((a * w).sum())
        e["gained_sum"] += float((np.maximum(gained, 0.0) * w).sum())
        worst = int(np.argmax(gained))
        g = float(gained.flat[worst])
        if g > e["gained_max"]:
            at = lambda a: float(np.broadcast_to(a, shape).flat[worst])
            e.update(gained_max=g, program=self._pid(shape, worst), value=at(real), exact=at(exact),
                     operands=at(operands))

    def stored(self, key: tuple, real, exact, parts: dict, path: frozenset, lanes) -> None:
        """The active lanes ``lanes`` of a store at ``key`` = (file, line, tensor, type) of a value whose shadow
        is ``exact`` and whose lines' parts are ``parts``."""
        t = key[3]
        shape = np.shape(lanes)
        with np.errstate(all="ignore"):
            w = np.where(lanes, np.broadcast_to(self.weights(shape), shape), 0.0)
            real, exact = np.broadcast_to(real, shape), np.broadcast_to(exact, shape)
            ok = np.isfinite(real) & np.isfinite(exact) & (w > 0)
            if not ok.any():
                return
            w = np.where(ok, w, 0.0)
            unit = np.where(ok, ulp(np.where(ok, exact, 0.0), t), 1.0)
            diff = np.where(ok, real - exact, 0.0)
            err = np.abs(diff) / unit
            rest = diff.copy()
            share = {}
            for k, d in parts.items():
                d = np.where(ok, np.broadcast_to(d, shape), 0.0)
                rest -= d
                u = np.abs(d) / unit
                share[k] = (float(u.max()), float((u * w).sum()))
        e = self.stores.get(key)
        if e is None:
            e = self.stores[key] = _entry("store")
        e["elements"] += int(w.sum())
        e["error_sum"] += float((err * w).sum())
        e["abs_max"] = max(e["abs_max"], float(np.abs(diff).max()))
        e["scale"] = max(e["scale"], float(np.abs(np.where(ok, exact, 0.0)).max()))
        e["unexplained_sum"] += float((np.abs(rest) / unit * w).sum())
        worst = int(np.argmax(np.where(ok, err, -1.0)))
        if float(err.flat[worst]) > e["error_max"]:
            e.update(error_max=float(err.flat[worst]), program=self._pid(shape, worst), value=float(real.flat[worst]),
                     exact=float(exact.flat[worst]))
        for k in path:
            e["parts"].setdefault(k, [0.0, 0.0])
        for k, (mx, total) in share.items():
            p = e["parts"].setdefault(k, [0.0, 0.0])
            p[0], p[1] = max(p[0], mx), p[1] + total

    def _gained(self, k: tuple) -> float:
        return max((e["gained_max"] for (f, ln, _), e in self.lines.items() if (f, ln) == k), default=0.0)

    def records(self) -> dict:
        if self.mode is None:
            return {"shadow_run": [], "shadow_line": [], "shadow_store": []}
        lines = []
        for (f, ln, t), e in sorted(self.lines.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2])):
            lines.append({"file": f, "line": ln, "type": t, **e, "ops": ",".join(sorted(e["ops"])),
                          "gained_max": max(e["gained_max"], 0.0)})
        stores = []
        for (f, ln, tensor, t), e in sorted(self.stores.items(),
                                            key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2], kv[0][3])):
            # the lines with a part first (most error first), then those on the path (most gained first)
            order = sorted(e["parts"].items(),
                           key=lambda kv: (-kv[1][1], -self._gained(kv[0]), str(kv[0][0]), kv[0][1]))[:MAX_PARTS]
            stores.append({"file": f, "line": ln, "tensor": self.tensor_name(tensor), "type": t,
                           **{k: v for k, v in e.items() if k != "parts"}, "error_max": max(e["error_max"], 0.0),
                           "normwise": e["abs_max"] / float(ulp(np.float64(e["scale"]), t)),
                           "part_files": [str(k[0] or "") for k, _ in order],
                           "part_lines": [int(k[1]) for k, _ in order],
                           "part_max": [v[0] for _, v in order], "part_sum": [v[1] for _, v in order]})
        return {"shadow_run": [{"mode": self.mode, "ops": self.ops}], "shadow_line": lines, "shadow_store": stores}
