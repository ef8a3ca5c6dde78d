"""The integer hooks behind record/checks/overflow.py: wrapped int32 arithmetic and out-of-range float-to-int
conversions tag their result; the tag follows the value lane by lane; memory operations report tagged
addresses and stored values in active lanes, each with the lanes it reached.

An undefined division's tag (checks/intdiv.py) also follows comparisons into booleans, where ``&`` and
``|`` keep only the lanes the bad operand decides (``m & (q > 0)`` is False wherever ``m`` is), and is
reported where such a boolean is a load's or store's mask or a scalar ``if``'s condition; as a
``tl.where`` condition it tags the where's result (of any type: ``via`` names the where), which is reported
where it reaches memory."""
from __future__ import annotations

import numpy as np

import triton.language as tl

from ...errors import BatchFallback
from ..frames import where
from ..batch.described import core
from ..gpu.lowp import floats, inner_method
from ..patching import carried
from . import OVERFLOW_TAG
from .outermost import hook_outermost

TAG = OVERFLOW_TAG          # (cause dict, bool lanes of the handle's data that hold a bad value)
_ARITH = {np.add: "+", np.subtract: "-", np.multiply: "*"}
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
# operations whose integer or pointer result carries its operands' bad lanes
_CARRY = ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims", "create_reshape",
          "create_trans", "create_cat", "create_join", "create_bitcast")
_AND, _OR = (np.bitwise_and, np.logical_and), (np.bitwise_or, np.logical_or)
_DECIDED = "_tt_decided"    # a condition already reported as deciding a branch
# memory operations: (position of the pointer operand, of the stored value, of the mask) in their arguments
_MEMORY = {"create_load": (0, None, None), "create_masked_load": (0, None, 1), "create_store": (0, 1, None),
           "create_masked_store": (0, 1, 2), "create_atomic_rmw": (1, 2, 3), "create_atomic_cas": (0, 2, None)}


def install(scope, builder, rec) -> None:
    if hasattr(builder, "binary_op"):
        scope.set_attr(builder, "binary_op", _binary(inner_method(builder, "binary_op"), rec))
    if hasattr(builder, "cast_impl"):
        scope.set_attr(builder, "cast_impl", _cast(inner_method(builder, "cast_impl"), rec))
    if hasattr(builder, "ternary_op"):
        scope.set_attr(builder, "ternary_op", _ternary(inner_method(builder, "ternary_op"), rec))
    # an if (or while) on one value per program: Python's truth of it. After the batched chunk's own
    # __bool__ (record/interp/hooks.py): a chunk that splits undoes the report. (A batched chunk whose
    # programs disagree in short runs runs both sides masked, divergence/branches.py, and never asks.)
    scope.set_attr(tl.tensor, "__bool__", _branch(tl.tensor.__bool__, rec))
    # an if whose running programs disagree in short runs runs both sides masked and never asks the truth:
    # divergence/branches.py and exits.py hand its condition over through this (no import of the check there)
    scope.set_attr(tl.tensor, DECIDES, lambda self: _decides(rec, self))
    for name in _CARRY:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _carry(inner_method(builder, name)))
    def before(name, args, kwargs):
        if rec.recording:        # before the access, which a bad address may make fail
            kind = "load" if "load" in name else "store" if "store" in name else "atomic"
            _reached(rec, args, kind, *_MEMORY[name])
    hook_outermost(scope, builder, tuple(_MEMORY), before)


def _follows(out, cause: dict) -> bool:
    """Whether ``out`` carries ``cause``'s tag: integers and pointers always; booleans an undefined
    division's (it may decide a mask or a branch); any value one a ``tl.where`` condition passed on."""
    data = getattr(out, "data", None)
    if data is None:
        return False
    k = np.asarray(data).dtype.kind
    return k in "iu" or "via" in cause or (k == "b" and cause.get("kind") == "intdiv")


def _tag(obj):
    return carried(obj, TAG)


def _lanes_of(handle, shape):
    """The bad lanes a handle carries, broadcast to ``shape`` (all lanes when the shapes disagree)."""
    tag = _tag(handle)
    if tag is None:
        return None, None
    try:
        return tag[0], np.broadcast_to(tag[1], shape)
    except ValueError:
        return tag[0], np.ones(shape, bool)


def _carried(out, args) -> None:
    """Give ``out`` the union of its operands' bad lanes (the first operand's cause) whose cause it follows."""
    if all(_tag(a) is None for a in args):
        return                  # (and a lazy pointer block's lanes stay unread)
    shape = np.shape(out.data)
    cause, lanes = None, None
    for a in args:
        c, m = _lanes_of(a, shape)
        if c is not None and _follows(out, c):
            cause = cause or c
            lanes = m if lanes is None else (lanes | m)
    if cause is not None:
        setattr(out, TAG, (cause, lanes))


def _keep_earlier(out, args, batched: bool) -> None:
    """``out`` wrapped anew where an operand already held bad lanes: one tag holds one cause, so in a
    program that held them the operand's (the earlier) keeps the lanes of both, as one program at a time
    records it. A batched chunk where that is the cause of some programs and the new one of others
    (``pid * BIG + lane``: the product wraps in later programs, the sum in the last lanes of an earlier one)
    runs one program at a time."""
    new = _tag(out)
    shape = np.shape(out.data)
    for a in args:
        c, m = _lanes_of(a, shape)
        if c is None or not _follows(out, c):
            continue
        if batched and m.ndim and m.shape[0] > 1:
            held, wrapped = (x.reshape(x.shape[0], -1).any(axis=1) for x in (m, new[1]))
            if held.any() and (wrapped & ~held).any():
                raise BatchFallback("integers wrapped differently in programs of one op (one tag holds one cause)")
        setattr(out, TAG, (c, m | new[1]))
        return


def _decided(out, lhs, rhs, op) -> None:
    """A boolean ``&`` / ``|``: a lane is bad where a bad operand decides it (False & bad is False)."""
    if _tag(lhs) is None and _tag(rhs) is None:
        return
    shape = np.shape(out.data)
    (lc, lb), (rc, rb) = _lanes_of(lhs, shape), _lanes_of(rhs, shape)
    keep_l, keep_r = lc is not None and _follows(out, lc), rc is not None and _follows(out, rc)
    if not (keep_l or keep_r):
        return
    cause = lc if keep_l else rc
    lb, rb = (lb if keep_l else np.zeros(shape, bool)), (rb if keep_r else np.zeros(shape, bool))
    lv, rv = (np.broadcast_to(np.asarray(h.data, bool), shape) for h in (lhs, rhs))
    if op in _AND:
        bad = (lb | rb) & (lv | lb) & (rv | rb)
    else:
        bad = (lb | rb) & (~lv | lb) & (~rv | rb)
    if bad.any():
        setattr(out, TAG, (cause, bad))


def _value(v):
    v = np.asarray(v).item()
    return v if not isinstance(v, float) or np.isfinite(v) else repr(v)


def _tag_new(out, bad: np.ndarray, cause: dict, operands: list, exact, active=None) -> bool:
    """Tag ``out`` with the lanes ``bad`` and the cause, with the first bad lane's operands; False when no
    lane of a program that runs the op is bad (``active``: a masked loop's programs)."""
    if active is not None and bad.ndim and bad.shape[0] == len(active):
        bad = bad & active.reshape((-1,) + (1,) * (bad.ndim - 1))     # programs sitting out a masked trip
        if not bad.any():
            return False
    first = tuple(int(i) for i in np.argwhere(bad)[0])

    def at(a):
        a = np.asarray(a)
        try:
            return _value(np.broadcast_to(a, bad.shape)[first])
        except (ValueError, IndexError):
            return _value(a.reshape(-1)[0])
    cause = dict(cause, operands=[at(o) for o in operands], exact=at(exact), result=at(out.data))
    setattr(out, TAG, (cause, bad))
    return True


def _binary(inner, rec):
    def run(lhs, rhs, op, *args, **kwargs):
        out = inner(lhs, rhs, op, *args, **kwargs)
        data = getattr(out, "data", None)
        if data is None or not rec.recording:
            return out
        data = np.asarray(data)
        if data.dtype == np.int32 and op in _ARITH and _may_wrap(lhs.data, rhs.data, op):
            exact = op(np.asarray(lhs.data, np.int64), np.asarray(rhs.data, np.int64))
            bad = (exact != data) if exact.shape == data.shape else None
            if bad is not None and bad.any():
                file, line = where()
                if _tag_new(out, bad, {"op": f"int32 {_ARITH[op]}", "file": file, "line": int(line or 0)},
                            [lhs.data, rhs.data], exact, rec.active_programs()):
                    _keep_earlier(out, (lhs, rhs), rec.batched)
                    return out
        if data.dtype == np.bool_ and lhs.data.dtype == np.bool_ and (op in _AND or op in _OR):
            _decided(out, lhs, rhs, op)
        else:
            _carried(out, (lhs, rhs))
        return out
    return run


def _ternary(inner, rec):
    """``tl.where(c, x, y)``: x's bad lanes where c picks x, y's where it picks y, and every lane of a bad
    condition (then the result follows the condition's cause, whatever its type)."""
    def run(cond, lhs, rhs, op, *args, **kwargs):
        out = inner(cond, lhs, rhs, op, *args, **kwargs)
        if not rec.recording or not hasattr(out, "data") or all(_tag(a) is None for a in (cond, lhs, rhs)):
            return out
        if op is not np.where:
            _carried(out, (cond, lhs, rhs))
            return out
        shape = np.shape(out.data)
        pick = np.broadcast_to(np.asarray(cond.data, bool), shape)
        cause, bad = None, np.zeros(shape, bool)
        for h, lanes in ((lhs, pick), (rhs, ~pick)):
            c, m = _lanes_of(h, shape)
            if c is not None and _follows(out, c) and (m & lanes).any():
                cause, bad = cause or c, bad | (m & lanes)
        c, m = _lanes_of(cond, shape)
        if c is not None and m.any():
            file, line = where()
            cause, bad = dict(c, via="tl.where", via_file=file, via_line=int(line or 0)), bad | m
        if cause is not None:
            setattr(out, TAG, (cause, bad))
        return out
    return run


DECIDES = "_tt_decides"        # tl.tensor's method a masked if or exit calls with its condition


def _decides(rec, value) -> None:
    """Report a scalar condition an undefined division decided, once per value (a while loop's or an if's
    truth may be asked more than once)."""
    handle = getattr(value, "handle", None)
    tag = _tag(handle)
    if tag is None or not rec.recording or tag[0].get("kind") != "intdiv" or carried(handle, _DECIDED):
        return
    setattr(handle, _DECIDED, True)
    lanes = np.asarray(tag[1])
    active = rec.active_programs()
    if active is not None and lanes.ndim and lanes.shape[0] == len(active):
        lanes = lanes & active.reshape((-1,) + (1,) * (lanes.ndim - 1))
    file, line = where()
    rec.overflow.reached(tag[0], lanes, "branch", "if", -1, file, line)


def _branch(original, rec):
    def __bool__(self):
        _decides(rec, self)
        return original(self)
    return __bool__


def _may_wrap(lhs, rhs, op) -> bool:
    """Whether the exact result may leave int32 somewhere, from the extremes of the operands' unbroadcast
    cores (interval arithmetic in Python ints: a row plus a column costs a row and a column, and a block
    never widens to int64 here). A bound, not the answer: only when it reaches past int32 are the lanes
    compared one by one, and the int32 result wraps exactly where the int64 one leaves the range."""
    lc, rc = core(np.asarray(lhs)), core(np.asarray(rhs))
    if not lc.size or not rc.size:
        return False
    a, b, c, d = int(lc.min()), int(lc.max()), int(rc.min()), int(rc.max())
    if op is np.add:
        lo, hi = a + c, b + d
    elif op is np.subtract:
        lo, hi = a - d, b - c
    else:
        products = (a * c, a * d, b * c, b * d)
        lo, hi = min(products), max(products)
    return lo < _I32_MIN or hi > _I32_MAX


def _cast(inner, rec):
    def run(src, dst_type, *args, **kwargs):
        out = inner(src, dst_type, *args, **kwargs)
        data, sdata = getattr(out, "data", None), getattr(src, "data", None)
        if data is None or sdata is None or not rec.recording:
            return out
        data, sdata = np.asarray(data), floats(src)
        # by the types, not numpy's: a bfloat16 handle holds its bit patterns as uint16, and a conversion to
        # bfloat16 compared as one to uint16 reported every negative or large value (-2.1 "became 49159")
        if sdata is not None and _is_int_type(dst_type) and data.dtype != np.bool_:
            info = np.iinfo(data.dtype)
            with np.errstate(invalid="ignore"):
                bad = ~(np.isfinite(sdata) & (sdata >= info.min) & (sdata < float(info.max) + 1))
            if bad.shape == data.shape and bad.any():
                file, line = where()
                name = getattr(getattr(dst_type, "scalar", dst_type), "name", str(data.dtype))
                if _tag_new(out, bad, {"op": f"conversion to {name} out of range", "file": file,
                                       "line": int(line or 0)}, [sdata], sdata, rec.active_programs()):
                    return out
        _carried(out, (src,))
        return out
    return run


def _is_int_type(dst_type) -> bool:
    return bool(getattr(getattr(dst_type, "scalar", dst_type), "is_int", lambda: False)())


def _carry(inner):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        if any(_tag(a) is not None for a in args) and hasattr(out, "data"):
            _carried(out, args)
        return out
    return run


def _reached(rec, args, kind, ptr_at, value_at, mask_at) -> None:
    """Report a tagged address or stored value in the op's active lanes, and a mask an undefined division
    decided (in every lane it decided: whether the lane is accessed is what it decides)."""
    mask = args[mask_at] if mask_at is not None and len(args) > mask_at and hasattr(args[mask_at], "data") else None
    for at, how in ((ptr_at, "address"), (value_at, "value"), (mask_at, "mask")):
        handle = args[at] if at is not None and len(args) > at else None
        if _tag(handle) is None:
            continue
        shape = np.shape(args[ptr_at].data)
        if mask is not None:
            try:
                shape = np.broadcast_shapes(shape, np.shape(mask.data))
            except ValueError:
                mask = None
        cause, lanes = _lanes_of(handle, shape)
        if mask is not None and how != "mask":
            lanes = lanes & np.broadcast_to(np.asarray(mask.data, bool), shape)
        file, line = where()
        rec.overflow.reached(cause, np.asarray(lanes), how, kind, rec.origin if rec.origin is not None else -1,
                             file, line, rec.events)
