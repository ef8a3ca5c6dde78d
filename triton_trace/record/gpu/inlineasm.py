"""``tl.inline_asm_elementwise`` on the CPU: the builder's ``create_inline_asm`` runs the PTX block on
numpy (numerics/ptx.py) with the operands packed into registers as Triton's NVIDIA backend packs them.

Packing (ElementwiseInlineAsmOpConversion in Triton's NVIDIA backend): ``pack`` consecutive elements form
one instance of the asm; an operand of ``w``-bit elements puts ``min(max(32 // w, 1), pack)`` of them in
each register, the first in the low bits; the registers are numbered outputs first (each result's
registers in turn), then the inputs in argument order. A tied input ("0") is the output register it names.
Loads and stores in the block go through the builder's ``create_masked_load``/``create_masked_store``, so
the recorder sees them as the kernel line's accesses (bounds, races and bytes included)."""
from __future__ import annotations

import functools
import inspect

import numpy as np
import triton.language as tl

from ...numerics import ptx, ptx_float
from ..interp.access import TensorHandle, np_dtype
from .lowp import inner_method

_U64 = np.uint64
_PTX_TO_TL = {"b8": tl.uint8, "u8": tl.uint8, "s8": tl.int8, "b16": tl.uint16, "u16": tl.uint16,
              "s16": tl.int16, "f16": tl.float16, "bf16": tl.bfloat16, "b32": tl.uint32, "u32": tl.uint32,
              "s32": tl.int32, "f32": tl.float32, "b64": tl.uint64, "u64": tl.uint64, "s64": tl.int64,
              "f64": tl.float64}


def install(scope, builder, rec=None) -> None:
    """Run inline asm on numpy for one launch; the approximate instructions it met go in the launch's meta
    (``inline_asm_approx``), so the report says which values are not the GPU's bits."""
    def create_inline_asm(inline_asm, constraints, values, type, is_pure, pack):
        try:
            out = run(builder, str(inline_asm), str(constraints), list(values), list(type), int(pack))
            if out.approximate and rec is not None:
                seen = rec.meta_extra.setdefault("inline_asm_approx", [])
                seen.extend(sorted(out.approximate - set(seen)))
            return out
        except ptx.PtxUnsupported as e:
            text = " ".join(str(inline_asm).split())
            text = text if len(text) <= 80 else text[:77] + "..."
            err = NotImplementedError(f"inline asm not supported: {text!r}: {e}")
            err.tt_op = "inline_asm_elementwise"           # (read by interp/hooks.unsupported_op)
            raise err from None
    inner_method(builder, "create_inline_asm")       # (present on every supported release)
    scope.set_attr(builder, "create_inline_asm", create_inline_asm)


class _Results:
    """What ``create_inline_asm`` returns: ``get_result(i)`` is the i-th output."""

    def __init__(self, handles: list, approximate: set):
        self._handles = handles
        self.approximate = approximate

    def get_result(self, i: int):
        return self._handles[i]


def _bits_width(dtype) -> int:
    if dtype.is_ptr():
        return 64
    if dtype == tl.int1:
        raise ptx.PtxUnsupported("a boolean (tl.int1) operand: convert it to tl.int8 or tl.int32 first")
    return dtype.primitive_bitwidth


def _to_bits(data: np.ndarray) -> np.ndarray:
    data = np.ascontiguousarray(data)
    return data.view(f"u{data.dtype.itemsize}").astype(_U64)


def _layout(constraints: str):
    parts = [c.strip() for c in constraints.split(",") if c.strip() and not c.strip().startswith("~")]
    outs = [c.lstrip("=&") for c in parts if c.startswith("=")]
    ins = [c for c in parts if not c.startswith("=")]
    return outs, ins


def run(builder, asm: str, constraints: str, values: list, types: list, pack: int) -> _Results:
    block = ptx.parse(asm)
    out_cons, in_cons = _layout(constraints)
    datas = [np.asarray(h.data) for h in values]
    shape = np.broadcast_shapes(*(d.shape for d in datas)) if datas else (1,)
    if shape[-1] % pack:
        raise ptx.PtxUnsupported(f"pack={pack} does not divide the block's last dimension {shape[-1]}")
    groups_shape = shape[:-1] + (shape[-1] // pack,)
    n = int(np.prod(groups_shape))
    slots, widths, alias = {}, {}, {}
    index = 0
    out_layout = []                                   # (first slot, per register, registers, dtype)
    for ty in types:
        dtype = ty.element_ty if hasattr(ty, "element_ty") else ty
        w = _bits_width(dtype)
        per = min(max(32 // w, 1), pack)
        out_layout.append((index, per, pack // per, dtype, w))
        for _ in range(pack // per):
            if index >= len(out_cons):
                raise ptx.PtxUnsupported(f"{len(out_cons)} output constraints for {len(types)} results "
                                         f"with pack={pack}")
            widths[index] = ptx.CONSTRAINT_WIDTH.get(out_cons[index], 32)
            slots[index] = np.zeros(n, dtype=_U64)
            index += 1
    if index != len(out_cons):
        raise ptx.PtxUnsupported(f"{len(out_cons)} output constraints, {index} output registers")
    k = 0
    for h, data in zip(values, datas):
        w = _bits_width(h.dtype)
        per = min(max(32 // w, 1), pack)
        elems = _to_bits(np.broadcast_to(data, shape)).reshape(n, pack)
        for j in range(pack // per):
            reg = np.zeros(n, dtype=_U64)
            for e in range(per):
                reg |= elems[:, j * per + e] << _U64(w * e)
            if k >= len(in_cons):
                raise ptx.PtxUnsupported(f"{len(in_cons)} input constraints for {len(values)} arguments")
            con = in_cons[k]
            if con.isdigit():                          # tied to an output register
                alias[index] = int(con)
                slots[int(con)] = reg
            else:
                slots[index], widths[index] = reg, ptx.CONSTRAINT_WIDTH.get(con, 32)
            index += 1
            k += 1
    if k != len(in_cons):
        raise ptx.PtxUnsupported(f"{len(in_cons)} input constraints, {k} input registers")
    machine = ptx.Machine(n, slots, widths, alias, _Memory(builder, groups_shape))
    machine.run(block, ptx_float.OPS)
    results = []
    for first, per, count, dtype, w in out_layout:
        elems = np.zeros((n, pack), dtype=_U64)
        for j in range(count):
            reg = machine.slots[first + j]
            for e in range(per):
                elems[:, j * per + e] = (reg >> _U64(w * e)) & ptx.mask(w)
        np_t = np.dtype(np_dtype(dtype))
        data = elems.astype(f"u{np_t.itemsize}").view(np_t).reshape(shape)
        results.append(TensorHandle(data, dtype))
    return _Results(results, machine.approximate)


class _Memory:
    """ld.global/st.global of the block as the builder's masked loads and stores, one per instruction."""

    def __init__(self, builder, groups_shape: tuple):
        self.builder = builder
        self.shape = groups_shape

    @functools.cached_property
    def _load_extra(self) -> tuple:          # (only a block that reaches memory looks the signature up)
        return _extra_args(self.builder, "create_masked_load", 4)

    @functools.cached_property
    def _store_extra(self) -> tuple:
        return _extra_args(self.builder, "create_masked_store", 4)

    def _ptrs(self, addr, ptx_type):
        return TensorHandle(np.asarray(addr, dtype=_U64).reshape(self.shape),
                            tl.pointer_type(_PTX_TO_TL[ptx_type]))

    def _mask(self, active):
        full = np.ones(self.shape, dtype=bool) if active is None else np.asarray(active).reshape(self.shape)
        return TensorHandle(full, tl.int1)

    def load(self, addr, ptx_type, active):
        h = self.builder.create_masked_load(self._ptrs(addr, ptx_type), self._mask(active), None, *self._load_extra)
        return _to_bits(np.asarray(h.data)).reshape(-1)

    def store(self, addr, bits, ptx_type, active):
        np_t = np.dtype(np_dtype(_PTX_TO_TL[ptx_type]))
        value = np.asarray(bits).astype(f"u{np_t.itemsize}").view(np_t).reshape(self.shape)
        self.builder.create_masked_store(self._ptrs(addr, ptx_type), TensorHandle(value, _PTX_TO_TL[ptx_type]),
                                         self._mask(active), *self._store_extra)


def _extra_args(builder, name: str, given: int) -> tuple:
    """Defaults for the trailing cache/eviction/volatile parameters, whose number differs by release."""
    for cls in type(builder).__mro__:
        fn = vars(cls).get(name)
        if fn is None:
            continue
        params = list(inspect.signature(fn).parameters.values())
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            continue                                   # (a wrapper's *args: the interpreter's own is below)
        return tuple(False if p.name == "is_volatile" else None for p in params[given:])
    return ()
