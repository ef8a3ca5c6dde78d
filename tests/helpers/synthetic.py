"""Synthetic traces for tests, built directly as columnar arrays with numpy (no Triton): the one place
that knows how to assemble a Launch by hand. Traces from real kernels come from tests/kernels."""
from __future__ import annotations

import numpy as np

from triton_trace.model import KIND_CODE, Launch, TensorInfo, empty_ops


def tensor(name, shape, strides=None, storage_offset=0, storage_size=None, eb=4):
    if strides is None:
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    if storage_size is None:
        storage_size = storage_offset + sum((s - 1) * d for s, d in zip(shape, strides)) + 1
    return TensorInfo(name, {4: "float32", 2: "float16", 8: "float64"}[eb], tuple(shape), tuple(strides),
                      storage_offset, storage_size, eb)


def launch(tensors, ops, grid=None, outputs=(), **kw):
    """ops: dicts with program, kind, tensor (index), offsets (array, the block shape), optional mask, line,
    aux. Each program's ops run in list order."""
    n = len(ops)
    cols = empty_ops(n)
    offsets, masks, seqs = [], [], {}
    start = 0
    for i, op in enumerate(ops):
        pid = tuple(op.get("program", (0, 0, 0)))
        pid = pid + (0,) * (3 - len(pid))
        seqs[pid] = seqs.get(pid, -1) + 1
        off = np.asarray(op.get("offsets", np.zeros((0,), np.int64)), dtype=np.int64)
        mask = np.broadcast_to(np.asarray(op.get("mask", True), dtype=bool), off.shape)
        memory = op["kind"] in ("load", "store") or op["kind"].startswith("atomic")
        cols["program"][i] = pid
        cols["seq"][i] = seqs[pid]
        cols["kind"][i] = KIND_CODE[op["kind"]]
        cols["line"][i] = op.get("line", 10 + i)
        cols["tensor"][i] = op.get("tensor", 0) if memory else -1
        cols["elem_bytes"][i] = op.get("eb", tensors[op.get("tensor", 0)].elem_bytes) if memory else 0
        if memory:
            cols["ndim"][i] = off.ndim
            cols["shape"][i, :off.ndim] = off.shape
        cols["lane_start"][i] = start if memory else 0
        cols["lane_count"][i] = off.size if memory else 0
        cols["value_start"][i] = -1
        cols["value_dtype"][i] = -1
        cols["aux"][i] = op.get("aux", (0, 0, 0))
        if memory:
            offsets.append(off.reshape(-1))
            masks.append(mask.reshape(-1))
            start += off.size
    programs = {tuple(int(v) for v in p) for p in cols["program"]}
    if grid is None:
        grid = tuple(max(p[d] for p in programs) + 1 for d in range(3)) if programs else (1, 1, 1)
    return Launch.from_flat(kernel_name=kw.pop("name", "synthetic"), source="", source_file="synthetic.py", source_line=1,
                  grid=grid, args={}, tensors=tuple(tensors), files=("synthetic.py",), value_dtypes=(), ops=cols,
                  offsets=np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
                  mask=np.concatenate(masks) if masks else np.zeros(0, bool), values=np.zeros(0, np.uint8),
                  outputs=tuple(outputs), recorded_programs=len(programs), **kw)


def load_launch(grid=(1, 1, 1), shape=(16,), strides=None, ops=(), name="k", tensor_name="x") -> Launch:
    """A launch with one float32 tensor and the given loads, each a (program, offsets, mask or None)."""
    t = tensor(tensor_name, shape, strides)
    rows = [{"program": pid, "kind": "load", "tensor": 0, "offsets": np.asarray(off, np.int64).reshape(-1),
             "mask": True if mask is None else np.asarray(mask, bool), "line": 3} for pid, off, mask in ops]
    return launch([t], rows, grid=tuple(grid), name=name)
