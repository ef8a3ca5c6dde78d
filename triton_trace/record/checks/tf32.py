"""What a float32 ``tl.dot`` gives on the GPU with its default input precision.

``tl.dot`` of two float32 blocks defaults to ``input_precision="tf32"``: on sm_80 and later GPUs (A100,
H100, H200) the tensor cores read each input as TF32 (a 10-bit mantissa, as float16's, with float32's
range: the low 13 bits dropped, numerics/compiled.py) before multiplying, while the interpreter
multiplies in full float32 (unless ``numerics="compiled"``). The result on the GPU differs from the traced
one by an amount that depends on the data. The hook computes the dot a second time from inputs read as
TF32 and keeps, per source line, the largest absolute difference and the largest
|result| beside it (for a relative size). Only the first ``MAX_CHECKED`` dots of a line are recomputed: the
magnitude, not every tile, is what the hint needs, and a matmul's loop would otherwise pay twice. A
maximum does not change when a chunk runs again, so nothing is rolled back. Results go to
``Launch.meta["tf32_dot"]``; analysis/advice/predictions.py turns them into hints.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...numerics.compiled import tf32_truncated
from ..frames import where
from ..gpu.lowp import inner_method
from .monitor import Monitor

MAX_CHECKED = 16          # dots recomputed per source line


class TF32Dots(Monitor):
    def __init__(self, tensors=(), outputs=()):
        super().__init__(tensors, outputs)
        self.lines: dict = {}          # (file, line) -> {"checked", "max_abs", "max_result", "k"}

    def note(self, file, line, diff: float, largest: float, k: int) -> None:
        e = self.lines.setdefault((file, int(line or 0)), {"checked": 0, "max_abs": 0.0, "max_result": 0.0, "k": k})
        e["checked"] += 1
        e["max_abs"] = max(e["max_abs"], diff)
        e["max_result"] = max(e["max_result"], largest)

    def busy(self, file, line) -> bool:
        e = self.lines.get((file, int(line or 0)))
        return e is not None and e["checked"] >= MAX_CHECKED

    def fork_point(self):
        return {key: dict(e) for key, e in self.lines.items()}

    def since(self, point) -> dict:
        return {key: (point.get(key, {}).get("checked", 0), dict(e)) for key, e in self.lines.items()
                if e != point.get(key)}

    def mergeable(self, added) -> Optional[str]:
        # The first MAX_CHECKED dots of a line are checked: a worker's dots past what this process checked
        # count only if all of them would have been checked here too (a maximum of a subset is not known).
        for key, (before, e) in added.items():
            here = self.lines.get(key, {}).get("checked", 0)
            own = e["checked"] - before
            if own and here < MAX_CHECKED and here + own > MAX_CHECKED:
                return f"{key[0]}:{key[1]} had more tf32 dots checked in a worker than one process checks"
        return None

    def merge(self, added) -> None:
        for key, (before, e) in added.items():
            own = e["checked"] - before
            mine = self.lines.get(key)
            if mine is None:
                self.lines[key] = {**e, "checked": own}
            elif own and mine["checked"] < MAX_CHECKED:
                mine["checked"] += own
                mine["max_abs"] = max(mine["max_abs"], e["max_abs"])
                mine["max_result"] = max(mine["max_result"], e["max_result"])

    def records(self) -> dict:
        order = sorted(self.lines.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
        return {"tf32_dot": [{"file": f, "line": line, **e} for (f, line), e in order]}


def install(scope, builder, rec) -> None:
    if hasattr(builder, "create_dot"):
        scope.set_attr(builder, "create_dot", _checked(inner_method(builder, "create_dot"), rec))


def _is_default_tf32(precision) -> bool:
    return str(precision).split(".")[-1].upper() == "TF32"


def _checked(inner, rec):
    def run(a, b, d, precision, *args, **kwargs):
        out = inner(a, b, d, precision, *args, **kwargs)
        if not rec.recording or not _is_default_tf32(precision):
            return out
        ad, bd = np.asarray(a.data), np.asarray(b.data)
        if ad.dtype != np.float32 or bd.dtype != np.float32:
            return out
        file, line = where()
        if rec.tf32_dots.busy(file, line):
            return out
        res = np.asarray(out.data, dtype=np.float32)
        with np.errstate(all="ignore"):
            tf32 = np.matmul(tf32_truncated(ad), tf32_truncated(bd), dtype=np.float32) + np.asarray(d.data, np.float32)
            diff = np.abs(tf32 - res)
        try:
            diff, res = np.broadcast_to(diff, res.shape), res
        except ValueError:
            return out
        active = rec.active_programs()
        if active is not None and diff.ndim and diff.shape[0] == len(active):
            diff, res = diff[active], res[active]         # what programs sitting out a trip compute is unused
        ok = np.isfinite(diff)
        if not ok.any():
            return out
        rec.tf32_dots.note(file, line, float(diff[ok].max()), float(np.abs(res[np.isfinite(res)]).max(initial=0.0)),
                           int(ad.shape[-1]))
        return out
    return run
