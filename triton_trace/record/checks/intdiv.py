"""Integer division and remainder with no defined result: a zero divisor, or ``INT_MIN // -1`` (whose
quotient does not fit its type). LLVM leaves both undefined and a GPU returns garbage (or, with
``INT_MIN // -1``, may trap); numpy quietly gives 0 or wraps, so the interpreted kernel looks fine.

The hooks wrap the builder's signed and unsigned ``//`` and ``%``: a result with an undefined lane carries
checks/overflow_ops.py's tag with ``kind: "intdiv"``, which follows it like a wrapped value's (and into
comparisons), and is reported (``Launch.meta["intdiv"]``) when it reaches memory in an active lane, as an
address or a stored value, or decides control flow: a load's or store's mask, a ``tl.where`` condition
whose result reaches memory, a scalar ``if``. A division by zero in a lane the mask leaves out (``other=0``
loaded as a divisor) is not a finding, nor is one a guard discards (``m & (q > 0)`` where ``m`` is False,
``tl.where(d != 0, a // d, 0)``).
"""
from __future__ import annotations

import numpy as np

from ..frames import where
from ..gpu.lowp import inner_method
from .overflow_ops import _tag_new

# builder method -> (the operator a finding shows, whether the operands are signed)
OPS = {"create_sdiv": ("//", True), "create_udiv": ("//", False), "create_srem": ("%", True),
       "create_urem": ("%", False)}


def install(scope, builder, rec) -> None:
    for name, (symbol, signed) in OPS.items():
        if hasattr(builder, name):
            scope.set_attr(builder, name, _checked(inner_method(builder, name), rec, symbol, signed))


def undefined(lhs: np.ndarray, rhs: np.ndarray, signed: bool, shape: tuple):
    """(lanes with a zero divisor, lanes computing INT_MIN // -1), broadcast to ``shape``; None when the
    operands do not broadcast to it."""
    try:
        zero = np.broadcast_to(rhs == 0, shape)
        if not signed or lhs.dtype.kind != "i":
            return zero, np.zeros(shape, bool)
        lowest = np.iinfo(lhs.dtype).min
        return zero, np.broadcast_to((lhs == lowest) & (rhs == -1), shape)
    except ValueError:
        return None


def _checked(inner, rec, symbol, signed):
    def run(lhs, rhs, *args, **kwargs):
        out = inner(lhs, rhs, *args, **kwargs)
        data = getattr(out, "data", None)
        if data is None or not rec.recording:
            return out
        l, r = np.asarray(lhs.data), np.asarray(rhs.data)
        if r.dtype.kind not in "iu":
            return out
        found = undefined(l, r, signed, np.shape(data))
        if found is None or not (found[0].any() or found[1].any()):
            return out
        zero, lowest = found
        name = getattr(getattr(lhs.dtype, "scalar", lhs.dtype), "name", str(l.dtype))
        what = "by zero" if zero.any() else f"of the lowest {name} by -1 (the quotient does not fit)"
        file, line = where()
        _tag_new(out, zero | lowest, {"kind": "intdiv", "op": f"{name} {symbol} {what}", "file": file,
                                      "line": int(line or 0)}, [l, r], data, rec.active_programs())
        return out
    return run
