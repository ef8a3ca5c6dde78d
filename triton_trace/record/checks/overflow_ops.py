"""The integer hooks behind record/checks/overflow.py: wrapped int32 arithmetic and out-of-range float-to-int
conversions tag their result; the tag follows the value; memory operations report tagged addresses and
stored values in active lanes."""
from __future__ import annotations

import numpy as np

from ..frames import where
from ..batch.described import core
from ..gpu.lowp import floats, inner_method
from ..patching import carried
from . import OVERFLOW_TAG

TAG = OVERFLOW_TAG          # (cause dict, bool lanes of the handle's data that hold a bad value)
_ARITH = {np.add: "+", np.subtract: "-", np.multiply: "*"}
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
# operations whose integer or pointer result carries its operands' bad lanes
_CARRY = ("create_addptr", "create_splat", "create_broadcast", "create_expand_dims", "create_reshape",
          "create_trans", "create_cat", "create_join", "ternary_op", "create_bitcast")
# memory operations: (position of the pointer operand, of the stored value, of the mask) in their arguments
_MEMORY = {"create_load": (0, None, None), "create_masked_load": (0, None, 1), "create_store": (0, 1, None),
           "create_masked_store": (0, 1, 2), "create_atomic_rmw": (1, 2, 3), "create_atomic_cas": (0, 2, None)}


def install(scope, builder, rec) -> None:
    if hasattr(builder, "binary_op"):
        scope.set_attr(builder, "binary_op", _binary(inner_method(builder, "binary_op"), rec))
    if hasattr(builder, "cast_impl"):
        scope.set_attr(builder, "cast_impl", _cast(inner_method(builder, "cast_impl"), rec))
    for name in _CARRY:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _carry(inner_method(builder, name)))
    inside = [False]          # a plain load or store ends in the masked one: the outer hook reports it, once
    for name, where_ in _MEMORY.items():
        if hasattr(builder, name):
            kind = "load" if "load" in name else "store" if "store" in name else "atomic"
            scope.set_attr(builder, name, _memory(inner_method(builder, name), rec, kind, *where_, inside))


def _is_int_or_ptr(handle) -> bool:
    """Integers (not booleans: a comparison of a bad value is not an address) and pointers."""
    data = getattr(handle, "data", None)
    if data is None:
        return False
    return np.asarray(data).dtype.kind in "iu"


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
    """Give ``out`` the union of its operands' bad lanes (the first operand's cause)."""
    if all(_tag(a) is None for a in args):
        return                  # (and a lazy pointer block's lanes stay unread)
    shape = np.shape(out.data)
    cause, lanes = None, None
    for a in args:
        c, m = _lanes_of(a, shape)
        if c is not None:
            cause = cause or c
            lanes = m if lanes is None else (lanes | m)
    if cause is not None:
        setattr(out, TAG, (cause, lanes))


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
                    return out
        if _is_int_or_ptr(out):
            _carried(out, (lhs, rhs))
        return out
    return run


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
        if _is_int_or_ptr(out):
            _carried(out, (src,))
        return out
    return run


def _is_int_type(dst_type) -> bool:
    return bool(getattr(getattr(dst_type, "scalar", dst_type), "is_int", lambda: False)())


def _carry(inner):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        if any(_tag(a) is not None for a in args) and hasattr(out, "data") and _is_int_or_ptr(out):
            _carried(out, args)
        return out
    return run


def _memory(inner, rec, kind, ptr_at, value_at, mask_at, inside):
    def run(*args, **kwargs):
        if inside[0]:
            return inner(*args, **kwargs)
        if rec.recording:        # before the access, which a bad address may make fail
            _reached(rec, args, kind, ptr_at, value_at, mask_at)
        inside[0] = True
        try:
            return inner(*args, **kwargs)
        finally:
            inside[0] = False
    return run


def _reached(rec, args, kind, ptr_at, value_at, mask_at) -> None:
    """Report a tagged address or stored value in the op's active lanes."""
    mask = args[mask_at] if mask_at is not None and len(args) > mask_at and hasattr(args[mask_at], "data") else None
    for at, how in ((ptr_at, "address"), (value_at, "value")):
        handle = args[at] if at is not None and len(args) > at else None
        if _tag(handle) is None:
            continue
        shape = np.shape(handle.data)
        if mask is not None:
            try:
                shape = np.broadcast_shapes(shape, np.shape(mask.data))
            except ValueError:
                mask = None
        cause, lanes = _lanes_of(handle, shape)
        if mask is not None:
            lanes = lanes & np.broadcast_to(np.asarray(mask.data, bool), shape)
        file, line = where()
        rec.overflow.reached(cause, np.asarray(lanes), how, kind, rec.origin if rec.origin is not None else -1,
                             file, line)
