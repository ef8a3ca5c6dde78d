"""The hooks behind record/memory/dataflow.py: every builder method that makes a value passes the union of its
operands' load tags on, each with its lane map carried through the op; a method that reads memory adds its
own event; a method that writes hands what its operands carry to the launch's Dataflow monitor.

Every value-making method of the builder is wrapped, known or not (an unknown one maps every dim to "every
index"), so no tag is dropped by an op this list forgets. A method the interpreter writes in terms of another
(``create_fadd`` calls ``binary_op``) is handled by the method it calls; a wrapped method that calls another
is handled once, by the outermost call.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ..batch.running import running
from ..gpu.lowp import inner_method
from ..interp.access import ReduceOps, ScanOps, TensorHandle
from ..patching import carried
from .dataflow import kind_codes
from .feedtags import ALL, EMPTY, every, join, join_all, remap, single

TAG = "_tt_feeds"     # a tag (feedtags.py): frozenset of (load site, dims, run of its executions)
# lanes map one to one (the loads too: their pointers' and masks' tags follow their lanes)
_ELEMENTWISE = {"binary_op", "unary_op", "ternary_op", "cast_impl", "create_fp_to_fp", "create_bitcast",
                "create_int_to_ptr", "create_ptr_to_int", "create_idiv", "create_ashr", "create_umulhi",
                "create_clampf", "create_fma", "create_fabs", "create_erf", "create_rsqrt", "create_addptr",
                "create_extern_elementwise", "create_load", "create_masked_load", "create_atomic_rmw",
                "create_atomic_cas", "create_atomic_load", "create_tensor_pointer_load", "create_descriptor_load",
                "create_join"}
_UNTOUCHED = {"create_get_program_id", "create_get_num_programs", "create_make_range", "create_barrier",
              "create_print", "create_assert", "create_assume", "create_make_tensor_descriptor",
              "create_make_block_ptr", "create_advance"}
# the arguments a write stores; its other tagged arguments (pointers, mask) are its "address"
_STORED = {"create_store": (1,), "create_masked_store": (1,), "create_tensor_pointer_store": (1,),
           "create_descriptor_store": (1,), "create_descriptor_scatter": (1,), "create_atomic_rmw": (2,),
           "create_atomic_cas": (1, 2), "create_atomic_store": (1,)}


def tags(value) -> frozenset:
    """The tag a handle (or a tl.tensor's handle) carries."""
    return carried(getattr(value, "handle", value), TAG, None) or EMPTY


def _put(out, found) -> None:
    if not found:
        return
    if type(out) is TensorHandle:
        old = out.__dict__.get(TAG)
        out.__dict__[TAG] = join(found, old) if old else found
    elif isinstance(out, (tuple, list)):
        for o in out:
            _put(o, found)
    elif isinstance(out, TensorHandle):
        old = carried(out, TAG, None)
        setattr(out, TAG, join(found, old) if old else found)


def _shape(h, chunk) -> tuple:
    # a lazy pointer block (batch/described.py) computes its data when read: its shape says as much
    s = tuple(h.shape) if "data" not in vars(h) and hasattr(h, "shape") else np.shape(h.data)
    return tuple(s[1:]) if chunk is not None else tuple(s)


def _arg_tags(args) -> list:
    """(position, tags) of every argument that carries some (one level into lists: inline asm's operands).
    On every builder call: kept to a type check and a dict lookup per argument."""
    out = None
    for k, a in enumerate(args):
        if isinstance(a, TensorHandle):
            found = a.__dict__.get(TAG)
        elif type(a) in (list, tuple) and a and isinstance(a[0], TensorHandle):
            found = join_all(x.__dict__.get(TAG) for x in a if isinstance(x, TensorHandle))
        else:
            continue
        if found:
            if out is None:
                out = []
            out.append((k, found))
    return out


_METHODS: dict = {}     # builder class -> [(method name, how its lanes map)], found once per class


def _methods(cls) -> list:
    """The value-making methods of a builder class. The interpreter's lambdas (``create_fadd``, ``create_exp``,
    the casts, ``create_select``) only call an elementwise method, which is wrapped; ``create_reshape`` is
    the one lambda that makes its value itself."""
    found = _METHODS.get(cls)
    if found is None:
        found = _METHODS[cls] = []
        for name in dir(cls):
            if name in _UNTOUCHED or not (name.startswith("create_") or name.endswith("_op") or name == "cast_impl"):
                continue
            member = getattr(cls, name)
            if callable(member) and (getattr(member, "__name__", "") != "<lambda>" or name == "create_reshape"):
                found.append((name, "elementwise" if name in _ELEMENTWISE else name))
    return found


def install(scope, builder, rec) -> None:
    depth = [0]            # > 0 inside a wrapped method: the calls it makes are its own business
    codes = kind_codes()[1:]
    for name, kind in _methods(type(builder)):
        scope.set_attr(builder, name, _hooked(inner_method(builder, name), name, kind, builder, rec, depth, codes))
    for ops_cls, scan in ((ReduceOps, False), (ScanOps, True)):
        scope.set_attr(ops_cls, "apply", _reduction(ops_cls.apply, scan))


def _hooked(inner, name: str, kind: str, builder, rec, depth: list, codes: tuple):
    events = rec.events
    recorded = events.events            # (a rollback cuts this list in place)
    stored = _STORED.get(name)
    own = vars(builder).get(name) is None           # no earlier hook: the class's method (batched or not)

    def run(*args, **kwargs):
        if depth[0]:
            return getattr(type(builder), name)(builder, *args, **kwargs) if own else inner(*args, **kwargs)
        before = len(recorded)
        depth[0] = 1
        try:
            out = getattr(type(builder), name)(builder, *args, **kwargs) if own else inner(*args, **kwargs)
        finally:
            depth[0] = 0
        found = _arg_tags(args)
        if len(recorded) > before:
            _accessed(rec, events, before, stored, found or (), out, kind, codes)
        if found:
            _put(out, _carried(kind, found, args, builder))
        return out
    return run


_IDENTITY = [tuple(range(n)) for n in range(9)]


def _accessed(rec, events, before: int, stored, found: list, out, kind: str, codes: tuple) -> None:
    """The op recorded events of its own: its reads tag what it returns, its writes are reported."""
    reads, writes = codes
    for w in range(before, len(events.events)):
        ev = events.events[w]
        if ev.kind in writes:             # (an atomic's own read is no execution before its write)
            value, address = EMPTY, EMPTY
            for k, t in found:
                if stored is None:
                    value = join(value, every(t))     # an op that writes in its own way: whole tiles
                elif k in stored:
                    value = join(value, t)
                else:
                    address = join(address, t)
            rec.dataflow.wrote(events, list(events.files), w, {"value": value, "address": address})
        if ev.kind in reads:
            n = len(ev.shape)
            dims = (_IDENTITY[n] if n < len(_IDENTITY) else tuple(range(n))) if kind == "elementwise" else (ALL,) * n
            site, place = rec.dataflow.read(events, w)
            _put(out, single(site, dims, place))


def _carried(kind: str, found: list, args, builder) -> frozenset:
    """What the op's result carries: each operand's tags through the op's lane map."""
    if kind == "elementwise":
        return found[0][1] if len(found) == 1 else join_all(t for _, t in found)
    chunk = running(builder)
    out = EMPTY
    for k, t in found:
        if kind == "create_broadcast":
            shape, new = _shape(args[0], chunk), tuple(args[1])
            t = remap(t, lambda d: ALL if d < len(shape) and shape[d] == 1 and new[d] != 1 else d)
        elif kind == "create_expand_dims":
            n = len(_shape(args[0], chunk)) + 1
            axis = args[1] % n
            t = remap(t, lambda d: d + (d >= axis))
        elif kind == "create_reshape":
            t = _reshaped(t, _shape(args[0], chunk), tuple(args[1]))
        elif kind == "create_trans":
            perm = list(args[1])
            t = remap(t, lambda d: perm.index(d) if d in perm else ALL)
        elif kind == "create_cat":
            t = remap(t, lambda d: ALL if d == 0 else d)
        elif kind == "create_split":
            n = len(_shape(args[0], chunk))
            t = remap(t, lambda d: ALL if d == n - 1 else d)
        elif kind == "create_gather" and k == 0:
            axis = args[2]
            t = remap(t, lambda d: ALL if d == axis else d)
        elif kind == "create_dot" and k in (0, 1):
            n = len(_shape(args[k], chunk))
            gone = n - 1 if k == 0 else n - 2           # A's columns and B's rows are contracted
            t = remap(t, lambda d: ALL if d == gone else d)
        elif kind not in ("create_gather", "create_dot"):
            t = every(t)                                # splat, unsplat, histogram and anything unknown
        out = join(out, t)
    return out


def _reshaped(found, old: tuple, new: tuple) -> frozenset:
    """A reshape that only adds or drops dims of size 1 keeps the others' lanes; any other: every lane."""
    big_old = [d for d, s in enumerate(old) if s != 1]
    big_new = [d for d, s in enumerate(new) if s != 1]
    if [old[d] for d in big_old] != [new[d] for d in big_new]:
        return every(found)
    where = dict(zip(big_old, big_new))
    return remap(found, lambda d: where.get(d, ALL))


def _reduction(orig, scan: bool):
    """tl.reduce / tl.associative_scan (the interpreter runs them outside the builder): the axis reduced or
    scanned becomes every index (a scan's prefix is a part of it); the others keep their place."""
    def apply(self, input):
        ret = orig(self, input)
        ins = input if isinstance(input, tuple) else (input,)
        found = join_all(tags(x) for x in ins)
        if not found:
            return ret
        n = len(getattr(ins[0], "shape", ()) or ())
        axis = self.axis
        if axis is None:
            moved = every(found)
        else:
            axis %= max(n, 1)
            keep = scan or getattr(self, "keep_dims", False)
            moved = remap(found, lambda d: ALL if d == axis else d if keep or d < axis else d - 1)
        for r in (ret if isinstance(ret, (tuple, list)) else (ret,)):
            _put(getattr(r, "handle", None), moved)
        return ret
    return apply


def carry_transpose(scope) -> None:
    """``x.T``: the interpreter (and a batched chunk) transposes in a tensor property, not in the builder."""
    current = tl.tensor.__dict__.get("T")
    if not isinstance(current, property):
        return

    def T(self):
        out = current.fget(self)
        found = tags(self)
        if found:
            n = len(self.shape)
            _put(out.handle, remap(found, lambda d: n - 2 if d == n - 1 else n - 1 if d == n - 2 else d))
        return out
    scope.set_attr(tl.tensor, "T", property(T))
