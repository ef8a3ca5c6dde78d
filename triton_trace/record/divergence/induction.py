"""A ``for`` loop's variable as compiled code types it.

The compiler makes the variable of ``for i in range(lo, hi, step)`` (or ``tl.range``) a scalar tensor of
the bounds' promoted integer type (``CodeGenerator.visit_For``: constants are int32 when they fit, runtime
arguments keep their specialised type), so kernels call tensor methods on it: flash-linear-attention's
``i_t.to(tl.int64) * stride``. The interpreter iterates a Python ``range``, whose ints have no ``.to``.
``InductionVar`` is an int that also answers as that scalar tensor: its tensor attributes (``.to``,
``.dtype``, ...) are those of a scalar of the loop's type holding the same value, and integer arithmetic
on it (``i_t * BT``) stays an InductionVar, as it stays a tensor on a GPU. Everything else about it is the
int the interpreter gave: loop bookkeeping, batching and the values recorded are unchanged.

``tl.static_range`` is left alone: the compiler makes its variable a ``tl.constexpr``, which has no ``.to``
either. Loops the masked-loop rewrite takes (divergence/loops.py) get their variables from ``of``; the other
``range`` / ``tl.range`` loops are rewritten (divergence/rewrite.py) to iterate ``ranged``.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

import triton.language as tl

from ..interp.access import TensorHandle, np_dtype
from .names import RANGE


def _constant_type(x) -> tl.dtype:
    """The type the compiler gives a constant bound (``semantic.to_tensor_type``)."""
    if isinstance(x, bool):
        return tl.int1
    x = int(x)
    if -2**31 <= x < 2**31:
        return tl.int32
    if 2**31 <= x < 2**32:
        return tl.uint32
    if -2**63 <= x < 2**63:
        return tl.int64
    return tl.uint64


def _bound_type(x):
    """The integer type of one bound, or None where the compiler would reject it (the loop then runs as
    the interpreter runs it, and fails or not as it would have)."""
    if isinstance(x, tl.constexpr):
        x = x.value
    if isinstance(x, tl.tensor):
        dtype = x.dtype
        return dtype if dtype.is_int() else None
    if isinstance(x, InductionVar):
        return x.dtype
    if isinstance(x, int):
        return _constant_type(x)
    return None


def promote(a: tl.dtype, b: tl.dtype) -> tl.dtype:
    """``semantic.integer_promote_impl``: C's usual arithmetic conversions for two integer types."""
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    unsigned, signed = (a, b) if a.is_int_unsigned() else (b, a)
    return unsigned if unsigned.int_bitwidth >= signed.int_bitwidth else signed


def loop_type(bounds) -> "tl.dtype | None":
    """The induction variable's type for these bounds (start, stop and step as the loop got them; a
    missing start or step is the constant 0 or 1), or None when a bound is not an integer."""
    types = [_bound_type(b) for b in bounds]
    if any(t is None for t in types):
        return None
    out = tl.int32
    for t in types:
        out = promote(out, t)
    return out


# --------------------------------------------------------------------------------------------------------
# the variable
# --------------------------------------------------------------------------------------------------------
class InductionVar(int):
    """An int that answers tensor attributes as a scalar of ``dtype`` (a subclass per type sets it)."""
    __slots__ = ()
    dtype: tl.dtype = tl.int32

    def tensor(self) -> tl.tensor:
        """The compiled loop's variable: a scalar tensor of the loop's type, this value."""
        dtype = self.dtype
        data = np.array([int(self)]).astype(np_dtype(dtype))
        return tl.tensor(TensorHandle(data, dtype), dtype)

    def __getattr__(self, name: str):
        # only names an int lacks get here; protocol probes (numpy's __array__, pickling) are not tensors'
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.tensor(), name)

    def __reduce__(self):
        return int, (int(self),)


_CLASSES: dict = {}


def of(value: int, dtype) -> int:
    """``value`` as the variable of a loop of type ``dtype`` (a plain int where ``dtype`` is None)."""
    if dtype is None:
        return value
    cls = _CLASSES.get(dtype.name)
    if cls is None:
        cls = _CLASSES[dtype.name] = type(f"InductionVar_{dtype.name}", (InductionVar,),
                                          {"__slots__": (), "dtype": dtype})
    return cls(value)


def _arithmetic(name: str, fn, reflected: bool = False):
    plain = getattr(int, name)

    def op(self, other):
        if isinstance(other, bool) or not isinstance(other, int):
            return plain(self, other)       # a float, a bool or a tensor: as an int would
        out = fn(int(other), int(self)) if reflected else fn(int(self), int(other))
        # a constant operand is weakly typed (it takes the tensor's type); two variables promote
        dtype = promote(self.dtype, other.dtype) if isinstance(other, InductionVar) else self.dtype
        return of(out, dtype) if type(out) is int else out
    op.__name__ = name
    return op


def _unary(name: str, fn):
    def op(self):
        return of(fn(int(self)), self.dtype)
    op.__name__ = name
    return op


for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("mod", operator.mod), ("lshift", operator.lshift),
                   ("rshift", operator.rshift), ("and", operator.and_), ("or", operator.or_),
                   ("xor", operator.xor)):
    setattr(InductionVar, f"__{_name}__", _arithmetic(f"__{_name}__", _fn))
    setattr(InductionVar, f"__r{_name}__", _arithmetic(f"__r{_name}__", _fn, reflected=True))
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs),
                   ("invert", operator.invert)):
    setattr(InductionVar, f"__{_name}__", _unary(f"__{_name}__", _fn))


# --------------------------------------------------------------------------------------------------------
# loops
# --------------------------------------------------------------------------------------------------------
def _bounds(fn, args: tuple, kwargs: dict) -> tuple:
    """(start, stop, step) of ``fn(*args, **kwargs)``: ``range``'s positional form, or ``tl.range``'s
    ``(arg1, arg2=None, step=None, ...)``."""
    if fn is builtins.range:
        return (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    given = dict(zip(("arg1", "arg2", "step"), args))
    given.update((k, v) for k, v in kwargs.items() if k in ("arg1", "arg2", "step"))
    arg1, arg2, step = given.get("arg1"), given.get("arg2"), given.get("step")
    start, stop = (0, arg1) if arg2 is None else (arg1, arg2)
    return start, stop, 1 if step is None else step


class _Loop:
    __slots__ = ("items", "dtype")

    def __init__(self, items, dtype):
        self.items, self.dtype = items, dtype

    def __iter__(self):
        dtype = self.dtype
        for value in self.items:
            yield of(value, dtype)

    def __len__(self):
        return len(self.items)


def ranged(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` (``range`` or the interpreter's ``tl.range``), its values as the loop's
    variable."""
    items = fn(*args, **kwargs)
    dtype = loop_type(_bounds(fn, args, kwargs)) if isinstance(items, builtins.range) else None
    return items if dtype is None else _Loop(items, dtype)


def provide(namespace: dict) -> None:
    namespace.setdefault(RANGE, ranged)
