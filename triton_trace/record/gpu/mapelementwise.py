"""``tl.map_elementwise(scalar_fn, *args, pack=1)`` in a traced launch.

The compiler builds a region that runs ``scalar_fn`` on one element (``pack`` elements) of the broadcast
arguments at a time, so the function may branch on its element (``if x > y: return 1``). Triton's
interpreter has no builder op for it (3.6: ``InterpreterBuilder`` has no ``new_block``). Here the function
runs once per element group on scalar tensors, as the region would, and its results are gathered into
blocks: every op inside is recorded like the kernel's own (one program at a time: a chunk of programs runs
them one by one, since each program's elements take their own branches).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ...errors import BatchFallback
from ..batch import running as batch
from ..interp.access import TensorHandle, np_dtype

# the type the compiler gives a Python constant a branch returns
_CONSTANT = ((bool, tl.int1), (int, tl.int32), (float, tl.float32))


def _scalar(data: np.ndarray, dtype):
    return tl.tensor(TensorHandle(data, dtype), dtype)


def _element_type(value):
    if isinstance(value, tl.tensor):
        return value.dtype
    for kind, dtype in _CONSTANT:
        if isinstance(value, kind):
            return dtype
    raise TypeError(f"tl.map_elementwise: the mapped function returned {type(value).__name__}; it must return "
                    f"scalars (tensors or Python numbers)")


def _element_value(value):
    return np.asarray(value.handle.data).reshape(-1)[0] if isinstance(value, tl.tensor) else value


def make(builder):
    def map_elementwise(scalar_fn, *args, pack=1, _semantic=None, _generator=None):
        if batch.running(builder) is not None:
            raise BatchFallback("tl.map_elementwise runs its function element by element, program by program")
        pack = int(getattr(pack, "value", pack))
        blocks = [a for a in args if isinstance(a, tl.tensor)]
        shape = tuple(np.broadcast_shapes(*(tuple(b.shape) for b in blocks))) if blocks else ()
        flat = [np.broadcast_to(np.asarray(a.handle.data), shape).reshape(-1) if isinstance(a, tl.tensor) else None
                for a in args]
        n = int(np.prod(shape)) if shape else 1
        if n % pack:
            raise ValueError(f"tl.map_elementwise: pack={pack} does not divide the {n} elements of the arguments")
        outputs, types = None, None
        for start in range(0, n, pack):
            call = []
            for a, data in zip(args, flat):
                if data is None:
                    call.extend([a] * pack)
                else:
                    call.extend(_scalar(data[start + j:start + j + 1].copy(), a.dtype.scalar) for j in range(pack))
            result = scalar_fn(*call)
            result = tuple(result) if isinstance(result, tuple) else (result,)
            if len(result) % pack:
                raise ValueError(f"tl.map_elementwise: the mapped function returned {len(result)} values, not a "
                                 f"multiple of pack={pack}")
            if outputs is None:
                count = len(result) // pack
                outputs, types = [[] for _ in range(count)], [None] * count
            for k in range(len(outputs)):
                for j in range(pack):
                    value = result[k * pack + j]
                    if types[k] is None or isinstance(value, tl.tensor):
                        types[k] = _element_type(value)
                    outputs[k].append(_element_value(value))
        blocks = []
        for values, dtype in zip(outputs, types):
            data = np.array(values).astype(np_dtype(dtype)).reshape(shape)
            blocks.append(tl.tensor(TensorHandle(data, dtype), tl.block_type(dtype, list(shape))) if shape
                          else _scalar(data.reshape(1), dtype))
        return blocks[0] if len(blocks) == 1 else tuple(blocks)
    return map_elementwise
