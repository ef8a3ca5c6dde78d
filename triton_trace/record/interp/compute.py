"""The compute ops a launch records besides its memory ops: ``tl.dot`` (its m, n, k), reductions and scans
(their sizes in and out) and the flops of elementwise float math, hooked on the interpreter's builder for
one launch (record/interp/hooks.py installs them with every other hook, and restores them)."""
from __future__ import annotations

import numpy as np

from triton.runtime import interpreter as _ti

from ..frames import where
from ..batch import running as batch, tensor as batchtensor


def _is_float(handle) -> bool:
    scalar = getattr(getattr(handle, "dtype", None), "scalar", None)
    return scalar is not None and scalar.is_floating()


def install(scope, rec) -> None:
    b = _ti.interpreter_builder
    cls = type(b)

    # The hooks look the method up on type(self) at call time: a batched chunk swaps the builder's class.
    def dot(self, a, bb, *args, **kwargs):
        out = type(self).create_dot(self, a, bb, *args, **kwargs)
        chunk = batch.running(self)
        sa, sb = batch.program_shape(a.data, chunk), batch.program_shape(bb.data, chunk)
        nb = int(np.prod(sa[:-2])) if len(sa) > 2 else 1
        m, k, n = sa[-2] * nb, sa[-1], sb[-1]
        file, line = where()
        rec.compute_op("dot", file, line, batch.program_shape(out.data, chunk), (m, n, k))
        return out

    def counted(method, flops_per_elem):
        def run(self, *args, **kwargs):
            out = getattr(type(self), method)(self, *args, **kwargs)
            if _is_float(out) and rec.recording:
                file, line = where()
                rec.add_flops(file, line, flops_per_elem * batch.program_size(out.data, batch.running(self)))
            return out
        return run

    scope.set_attr(b, "create_dot", dot.__get__(b))
    for name, per in (("binary_op", 1), ("unary_op", 1), ("ternary_op", 1), ("create_fma", 2)):
        if hasattr(cls, name):
            scope.set_attr(b, name, counted(name, per).__get__(b))

    for cls_name, kind, batched in (("ReduceOps", "reduce", batchtensor.reduce_apply),
                                    ("ScanOps", "scan", batchtensor.scan_apply)):
        ops_cls = getattr(_ti, cls_name)
        orig_apply = ops_cls.apply

        def apply(self, input, _orig=orig_apply, _kind=kind, _batched=batched):
            chunk = batch.running(b)
            if chunk is None:
                ret = _orig(self, input)
            elif not isinstance(input, tuple):
                return self.apply((input,))[0]
            else:
                ret = _batched(self, input)
            if not isinstance(input, tuple):    # apply() re-enters itself with a 1-tuple: record that once
                return ret
            first, res = input[0], (ret[0] if isinstance(ret, tuple) else ret)
            if rec.recording and hasattr(first, "handle"):
                file, line = where()
                rec.compute_op(_kind, file, line, batch.program_shape(first.handle.data, chunk),
                               (batch.program_size(first.handle.data, chunk), batch.program_size(res.handle.data, chunk), 0))
            return ret
        scope.set_attr(ops_cls, "apply", apply)
