"""The frozen data model: a Trace holds Launches; a Launch holds a tensor table and columnar op records.

One row of ``Launch.ops`` is one operation executed by one program. Rows are keyed by their program id
column, never by a "current program", so a batch of programs can append its rows in one chunk. The
lane-level data (element offsets, masks, values) live in flat buffers that the rows slice into.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

import numpy as np

from .actions import RichDisplay, action, save as _save
from .kernelmodule import KernelModule
from .lanes import Lanes, lanes_from_flat
from .touches import touches
from .values import value_stats

# Op kinds, stored as uint8 codes. Memory kinds come first; analyses rely on the split. A new kind goes last:
# a trace file lists the kinds it was written with, and one whose list is a prefix of this one still loads.
# "barrier": a tl.debug_barrier(), a no-op in the interpreter, recorded for the order of a program's ops
# (analysis/checks/barriers.py).
KINDS: tuple = (
    "load", "store",
    "atomic_add", "atomic_min", "atomic_max", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg",
    "atomic_cas",
    "dot", "reduce", "scan", "math", "barrier",
)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
MEMORY_KINDS = frozenset(KINDS[:10])
ATOMIC_KINDS = frozenset(k for k in KINDS if k.startswith("atomic_"))
WRITE_KINDS = frozenset({"store"}) | ATOMIC_KINDS
READ_KINDS = frozenset({"load"}) | ATOMIC_KINDS
MAX_RANK = 8

# Columns of the op table, with their dtypes and trailing shapes. The store validates against this.
OP_COLUMNS: dict = {
    "program": (np.int32, (3,)),     # (x, y, z) program id
    "seq": (np.int32, ()),           # position of the op within its program, in execution order
    "kind": (np.uint8, ()),          # index into KINDS
    "file": (np.int32, ()),          # index into Launch.files
    "line": (np.int32, ()),          # source line in that file (0 when unknown)
    "tensor": (np.int32, ()),        # index into Launch.tensors, -1 for non-memory ops
    "elem_bytes": (np.int32, ()),    # bytes per element of the access
    "ndim": (np.int32, ()),
    "shape": (np.int64, (MAX_RANK,)),  # block shape, zero padded
    "lane_start": (np.int64, ()),    # slice into Launch.offsets / Launch.mask
    "lane_count": (np.int64, ()),
    "value_start": (np.int64, ()),   # byte slice into Launch.values
    "value_dtype": (np.int32, ()),   # index into Launch.value_dtypes, -1 when values were not recorded
    "aux": (np.int64, (3,)),         # dot: M, N, K; reduce/scan: input elements, output elements; math: flops
                                     # (a barrier has none: only its place in the order counts)
}


def empty_ops(n: int = 0) -> dict:
    return {name: np.zeros((n,) + shape, dtype=dt) for name, (dt, shape) in OP_COLUMNS.items()}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor argument of a launch, as the kernel saw it."""
    name: str
    dtype: str            # torch dtype name without the "torch." prefix, e.g. "float32"
    shape: tuple
    strides: tuple        # in elements
    storage_offset: int   # in elements
    storage_size: int     # elements of this dtype that fit in the underlying storage
    elem_bytes: int
    device: str = "cpu"
    # Index of the distinct memory behind the argument within its launch: arguments with the same index
    # alias one storage (x and x[1:]), and their offsets count from the same start. -1: unknown (a
    # synthetic or older trace), taken as a storage of its own.
    storage: int = -1
    # Identity of that memory across the launches of one trace: launches whose arguments have the same
    # ``buffer`` used the same live storage (a host loop writing one output chunk by chunk), so their
    # storage offsets compare. -1: unknown (an older trace), never taken as shared.
    buffer: int = -1

    def view_offsets(self) -> np.ndarray:
        """Storage offsets of every element of the view, in the view's index order (row-major)."""
        off = np.full((), self.storage_offset, dtype=np.int64)
        for size, stride in zip(self.shape, self.strides):
            off = off[..., None] + np.arange(size, dtype=np.int64) * stride
        return off

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "strides": list(self.strides),
                "storage_offset": self.storage_offset, "storage_size": self.storage_size,
                "elem_bytes": self.elem_bytes, "device": self.device, "storage": self.storage,
                "buffer": self.buffer}

    @staticmethod
    def from_dict(d: dict) -> "TensorInfo":
        return TensorInfo(str(d["name"]), str(d["dtype"]), tuple(int(s) for s in d["shape"]),
                          tuple(int(s) for s in d["strides"]), int(d["storage_offset"]), int(d["storage_size"]),
                          int(d["elem_bytes"]), str(d.get("device", "cpu")), int(d.get("storage", -1)),
                          int(d.get("buffer", -1)))


@dataclass(frozen=True)
class Access:
    """One recorded operation of one program, with its lane-level arrays in the op's block shape."""
    index: int             # row in Launch.ops
    program: tuple
    seq: int
    kind: str
    tensor: Optional[str]
    file: Optional[str]
    line: int
    elem_bytes: int
    shape: tuple
    offsets: Optional[np.ndarray]   # element offsets into the tensor's storage
    mask: Optional[np.ndarray]      # active lanes
    values: Optional[np.ndarray]    # loaded / stored / atomic operand values; None when not recorded;
                                    # bfloat16 values come widened to float32 (numpy has no bfloat16)
    dims: tuple = ()                # dot: (M, N, K)


@dataclass(frozen=True)
class Launch(RichDisplay):
    """One kernel launch. ``lanes`` holds the offsets and masks of every memory op, compacted (see
    triton_trace.model.lanes); ``Launch.from_flat`` builds it from flat per-lane arrays, and ``offsets`` and
    ``mask`` read back expanded, read-only."""
    kernel_name: str
    source: str
    source_file: str
    source_line: int                # line of the kernel's ``def``
    grid: tuple                     # (x, y, z)
    args: dict                      # scalar and constexpr arguments, JSON-ready
    tensors: tuple                  # TensorInfo, in argument order
    files: tuple                    # file names the op table's "file" column indexes
    value_dtypes: tuple             # numpy dtype strings the "value_dtype" column indexes
    ops: dict                       # column name -> numpy array, see OP_COLUMNS
    lanes: Lanes                    # offsets (int64) and mask (bool) of all lanes of all memory ops
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))   # uint8 byte buffer
    config: Optional[dict] = None   # the autotune / heuristics config that ran
    outputs: tuple = ()             # argument names declared as outputs (undefined at launch)
    recorded_programs: int = 0      # programs whose ops were recorded
    skipped_programs: int = 0       # programs that ran but were filtered out of the recording
    values_truncated: bool = False  # the value cap was hit: later ops have value_dtype == -1
    completed: bool = True          # False when a program raised; the ops recorded so far are kept
    error: Optional[str] = None
    meta: dict = field(default_factory=dict)    # the runtime checks' records and how the launch executed
    # what rebuilds the kernel's module elsewhere (helpers, imports, constants, arguments, kept inputs); None
    # for a synthetic launch or one from a file written without it
    module: Optional[KernelModule] = None
    recorded_ids: Optional[np.ndarray] = None   # (n, 3) int32: the programs recorded, in execution order
    # trace(inputs=True): every storage's bytes before the launch, back to back in storage order, and the
    # written storages' bytes after it (meta["inputs"] gives the sizes); None when not kept
    inputs: Optional[np.ndarray] = None
    finals: Optional[np.ndarray] = None
    # Where the launch came from, never read from a file: "recorded" (in this process), "signed" (a file
    # this user saved, carrying their local key's signature), "trusted" (a file the user trusted by hand:
    # load(trust=True)) or "untrusted" (any other file: its kernel code is data, never imported or compiled)
    provenance: str = "recorded"
    origin: Optional[str] = None    # the trace file it was read from; None when recorded here

    def __post_init__(self):
        if not isinstance(self.lanes, Lanes):
            raise TypeError(f"Launch(lanes=...) takes a Lanes, got {type(self.lanes).__name__}; "
                            f"Launch.from_flat(offsets=, mask=, ...) compacts flat arrays")
        if self.module is not None and not isinstance(self.module, KernelModule):
            raise TypeError(f"Launch(module=...) takes a KernelModule or None, got {type(self.module).__name__}")

    @classmethod
    def from_flat(cls, *, offsets, mask, **fields) -> "Launch":
        """A launch from flat per-lane ``offsets`` and ``mask`` (1-D, parallel), compacted into lanes with
        the op table's rows (``fields["ops"]``)."""
        return cls(lanes=lanes_from_ops(fields["ops"], offsets, mask), **fields)

    @property
    def offsets(self) -> np.ndarray:
        """Element offsets of every lane, int64, expanded from ``lanes`` (read-only). Per op, prefer
        ``access(i)`` or ``lanes.take(start, count)``, which decode only that op's lanes."""
        return self.lanes.offsets()

    @property
    def mask(self) -> np.ndarray:
        """Active flag of every lane, bool, parallel to ``offsets`` (read-only)."""
        return self.lanes.mask()

    def skipped_ids(self) -> np.ndarray:
        """The programs of the grid that ran but were left out of the recording, as an (n, 3) array in
        launch order. Without ``recorded_ids`` (a synthetic launch) it is every program that has no op."""
        gx, gy, gz = (int(g) for g in self.grid)
        x, y, z = np.meshgrid(np.arange(gx), np.arange(gy), np.arange(gz), indexing="ij")
        every = np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1).astype(np.int32)
        kept = self.recorded_ids if self.recorded_ids is not None else self.programs()
        if len(kept) == 0:
            return every
        linear = lambda p: (p[:, 0].astype(np.int64) * gy + p[:, 1]) * gz + p[:, 2]
        return every[~np.isin(linear(every), linear(np.asarray(kept)))]

    @property
    def trusted(self) -> bool:
        """Whether the launch's kernel code may be compiled or run (see ``provenance``)."""
        return self.provenance != "untrusted"

    @property
    def num_ops(self) -> int:
        return int(len(self.ops["kind"]))

    @property
    def num_programs(self) -> int:
        return int(self.grid[0] * self.grid[1] * self.grid[2])

    def tensor_index(self, name: str) -> int:
        for i, t in enumerate(self.tensors):
            if t.name == name:
                return i
        raise KeyError(f"launch of '{self.kernel_name}' has no tensor argument named '{name}'; "
                       f"it has {[t.name for t in self.tensors]}")

    def programs(self) -> np.ndarray:
        """The distinct program ids that recorded ops, sorted, as an (n, 3) array."""
        if self.num_ops == 0:
            return np.zeros((0, 3), dtype=np.int32)
        return np.unique(self.ops["program"], axis=0)

    def rows(self, program=None, kind=None, tensor=None, memory_only: bool = True) -> np.ndarray:
        """Indices of op rows matching the filters, in (program, seq) order."""
        sel = np.ones(self.num_ops, dtype=bool)
        if memory_only:
            sel &= self.ops["kind"] < len(MEMORY_KINDS)
        if program is not None:
            pid = _as_pid(program)
            sel &= np.all(self.ops["program"] == np.asarray(pid, dtype=np.int32), axis=1)
        if kind is not None:
            kinds = [kind] if isinstance(kind, str) else list(kind)
            codes = [KIND_CODE[k] for k in kinds if k in KIND_CODE]
            if len(codes) != len(kinds):
                raise KeyError(f"unknown op kind in {kinds}; kinds are {list(KINDS)}")
            sel &= np.isin(self.ops["kind"], codes)
        if tensor is not None:
            sel &= self.ops["tensor"] == self.tensor_index(tensor)
        idx = np.nonzero(sel)[0]
        p = self.ops["program"][idx]
        order = np.lexsort((self.ops["seq"][idx], p[:, 2], p[:, 1], p[:, 0]))
        return idx[order]

    def access(self, i: int) -> Access:
        o = self.ops
        ndim = int(o["ndim"][i])
        shape = tuple(int(s) for s in o["shape"][i][:ndim])
        kind = KINDS[int(o["kind"][i])]
        t = int(o["tensor"][i])
        offsets = mask = values = None
        if kind in MEMORY_KINDS:
            s, n = int(o["lane_start"][i]), int(o["lane_count"][i])
            offsets, mask = self.lanes.take(s, n)
            offsets, mask = offsets.reshape(shape), mask.reshape(shape)
            vd = int(o["value_dtype"][i])
            if vd >= 0:
                dt = np.dtype(self.value_dtypes[vd])
                vs = int(o["value_start"][i])
                values = np.frombuffer(self.values[vs:vs + n * dt.itemsize].tobytes(), dtype=dt).reshape(shape)
        f = int(o["file"][i])
        return Access(
            index=int(i), program=tuple(int(v) for v in o["program"][i]), seq=int(o["seq"][i]), kind=kind,
            tensor=self.tensors[t].name if t >= 0 else None, file=self.files[f] if 0 <= f < len(self.files) else None,
            line=int(o["line"][i]), elem_bytes=int(o["elem_bytes"][i]), shape=shape, offsets=offsets, mask=mask,
            values=values, dims=tuple(int(v) for v in o["aux"][i]) if kind == "dot" else ())

    def value_stats(self, rows=None) -> dict:
        """Per memory-op row (default: every row, in table order): min, max and mean of the finite values
        its active lanes loaded or stored, and its NaN and Inf counts (model.values.value_stats)."""
        return value_stats(self, np.arange(self.num_ops) if rows is None else np.asarray(rows))

    def touches(self, tensor, index) -> list:
        """Every recorded access to one element, ``tensor[index]`` (a name or argument position, and a view
        index), in execution order: program, op, line, kind and value of each (model.touches.Touch). For a
        wrong output element: who wrote it, with what, and who read it."""
        return touches(self, tensor, index, KINDS, len(MEMORY_KINDS))

    def compiled(self, target="sm_90", cache: bool = True):
        """The kernel compiled for a GPU ``target`` ("sm_80", "sm_90", "sm_100", or "A100", "H200", ...) on
        this machine, specialized as this launch would be on a GPU: the TTIR, TTGIR, LLVM IR and PTX with the
        source line of each IR line, each memory op's layout, instruction and vector width, shared memory,
        registers and occupancy (triton_trace.compiled.Compiled). Cached on disk."""
        return action("compiled")(self, target, cache=cache)

    def reproducer(self, path, data: str = "auto", index: int = 0):
        """Write a standalone reproducer of this launch into folder ``path``: ``launch.py`` (the kernel with its
        helpers, every argument rebuilt, the grid; run it as it is, with ``--plain`` or ``--gpu``) and
        ``launch_data.npz``. ``data``: "exact" (the inputs kept by ``trace(inputs=True)``), "stats" (random
        inputs with the recorded statistics) or "auto" (exact when kept). Returns the script's path."""
        return action("reproducer")(self, path, data=data, index=index)

    def accesses(self, program=None, kind=None, tensor=None) -> list:
        """The memory operations (loads, stores, atomics) of the launch, in execution order per program."""
        return [self.access(i) for i in self.rows(program, kind, tensor)]

    def all_ops(self, program=None) -> list:
        """Every recorded op, memory and compute (dot, reduce, scan, math), in execution order."""
        return [self.access(i) for i in self.rows(program, memory_only=False)]

    def __repr__(self) -> str:
        return (f"<Launch {self.kernel_name} grid={self.grid} ops={self.num_ops} "
                f"programs={self.recorded_programs}{'' if self.completed else ' INCOMPLETE'}>")


def _as_pid(program) -> tuple:
    if isinstance(program, (int, np.integer)):
        return (int(program), 0, 0)
    p = tuple(int(v) for v in program)
    if not 1 <= len(p) <= 3:
        raise ValueError(f"a program id has 1 to 3 coordinates, got {program!r}")
    return p + (0,) * (3 - len(p))


@dataclass(frozen=True)
class Trace(RichDisplay):
    launches: tuple = ()

    def save(self, path) -> None:
        """Write the trace file (triton_trace.store.tracefile; ``triton_trace.load`` reads it back)."""
        _save(self, path)

    def kernels(self) -> list:
        return sorted({lc.kernel_name for lc in self.launches})

    def __iter__(self) -> Iterator[Launch]:
        return iter(self.launches)

    def __len__(self) -> int:
        return len(self.launches)

    def __repr__(self) -> str:
        return f"<Trace launches={len(self.launches)} kernels={self.kernels()}>"

    def summary(self) -> str:
        lines = [f"trace: {len(self.launches)} launch(es)"]
        for i, lc in enumerate(self.launches):
            kinds = np.bincount(lc.ops["kind"], minlength=len(KINDS)) if lc.num_ops else np.zeros(len(KINDS), int)
            counts = ", ".join(f"{KINDS[k]}={int(c)}" for k, c in enumerate(kinds) if c)
            lanes = int(np.count_nonzero(lc.mask))
            lines.append(f"  [{i}] {lc.kernel_name} grid={lc.grid} programs={lc.recorded_programs}"
                         f"{f' (+{lc.skipped_programs} not recorded)' if lc.skipped_programs else ''}"
                         f" ops: {counts or 'none'}; active lanes={lanes}"
                         f"{'; values truncated' if lc.values_truncated else ''}"
                         f"{'' if lc.completed else '; INCOMPLETE: ' + (lc.error or '')}")
        return "\n".join(lines)


def lanes_from_ops(ops: dict, offsets, mask) -> Lanes:
    """Compact flat lane arrays, rows cut where the op table's memory rows start and end. When the rows
    tile the lanes exactly (the recorder's layout, in any order), each row keeps its block shape, so tiles
    are recognised as strided blocks; otherwise (a synthetic launch) the pieces are 1-D."""
    offsets, mask = np.asarray(offsets), np.asarray(mask)
    if offsets.ndim != 1 or mask.shape != offsets.shape:
        raise ValueError(f"Launch: offsets and mask must be 1-D arrays of one length, got shapes "
                         f"{offsets.shape} and {mask.shape}")
    size = len(offsets)
    try:
        kind, start = np.asarray(ops["kind"]), np.asarray(ops["lane_start"], dtype=np.int64)
        count, ndim = np.asarray(ops["lane_count"], dtype=np.int64), np.asarray(ops["ndim"], dtype=np.int64)
        shape = np.asarray(ops["shape"], dtype=np.int64).reshape(len(kind), MAX_RANK)
    except (KeyError, ValueError, TypeError):
        return lanes_from_flat(offsets, mask)
    rows = np.flatnonzero((kind < len(MEMORY_KINDS)) & (count > 0) & (start >= 0) & (start + count <= size))
    rows = rows[np.argsort(start[rows], kind="stable")]
    s, c = start[rows], count[rows]
    if len(rows) and int(c.sum()) == size and s[0] == 0 and np.array_equal(s[1:], (s + c)[:-1]):
        nd = np.clip(ndim[rows], 0, MAX_RANK)
        sh = shape[rows]
        shapes = [tuple(sh[i, :nd[i]].tolist()) for i in range(len(rows))]
        return lanes_from_flat(offsets, mask, counts=c, shapes=shapes)
    cuts = np.unique(np.concatenate([[0, size], s, s + c]))
    return lanes_from_flat(offsets, mask, counts=np.diff(cuts))


def concat_ops(chunks: Sequence[dict]) -> dict:
    if not chunks:
        return empty_ops()
    return {name: np.concatenate([c[name] for c in chunks]) for name in OP_COLUMNS}
