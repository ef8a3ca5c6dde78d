"""The products ``numerics="compiled"`` may contract: an fp32/fp64 ``fmul`` result remembers its operands
(gpu/ascompiled.py marks them while the launch contracts, fp fusion on), so that an add that takes it becomes
``fma.rn`` (ascompiled) and an add reduction of it sums with its products fused (gpu/reduceorder.py). Apart
from both so that the reduction order needs nothing else of the contraction's machinery."""
from __future__ import annotations

import numpy as np

from ..interp.access import TensorHandle

FUSED = (np.dtype(np.float32), np.dtype(np.float64))


class Product:
    """What an ``fmul`` result remembers: its operands, and the fused uses of its value so far (shared
    with every product of the same two operand handles)."""
    __slots__ = ("a", "b", "uses")

    def __init__(self, a, b, uses):
        self.a, self.b, self.uses = a, b, uses


def product(h):
    """The Product an fp32/fp64 handle ``h`` carries, else None."""
    p = getattr(h, "_tt_product", None) if isinstance(h, TensorHandle) else None
    return p if p is not None and np.asarray(h.data).dtype in FUSED else None


def reduced_product(h):
    """The operands' data of the product ``h`` holds where an add reduction takes it (its adds LLVM contracts
    as it does ``a * b + c``; the reduction counts as one more use of the product), else None."""
    p = product(h)
    if p is None:
        return None
    p.uses[0] += 1
    return np.asarray(p.a.data), np.asarray(p.b.data)
