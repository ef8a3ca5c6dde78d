"""What the check for a lock released (or a flag set) without a barrier needs beside the memory ops:
where each ``tl.debug_barrier()`` falls in a program's order, and the memory semantics of each atomic.

The interpreter runs a program as one step, so ``tl.debug_barrier()`` does nothing there (its builder's
``create_barrier`` is a no-op) and no value can show a missing one. On the GPU a program is several warps,
and the barrier (``bar.sync``) is what makes their stores happen before what the program does next. So the
check is on the order of a program's ops (analysis/checks/barriers.py): each barrier becomes a ``barrier``
op row (no lanes) in the program's order, through the collector as any compute op, and each atomic's
``sem=`` (which the op rows do not hold) is noted per source line here. A program that stores blocks and
then releases a lock with a scalar atomic, with no barrier row between, is the finding.

The sems go to ``Launch.meta["atomic_sem"]``: one entry per (line, atomic kind, sem). The same line runs
with the same sem in every program (it is a ``constexpr`` of the call), so a chunk undone and run again
notes nothing new and nothing is rolled back. A trace without this record (recorded before barriers were)
is not judged: its programs show no barrier rows either.
"""
from __future__ import annotations

from ..frames import where
from ..gpu.lowp import inner_method
from .monitor import Monitor

# the interpreter's names of the memory semantics (its builder gets Triton's IR enum) -> tl.atomic_*'s sem=
_SEMS = {"ACQUIRE_RELEASE": "acq_rel", "RELEASE": "release", "ACQUIRE": "acquire", "RELAXED": "relaxed"}
# what tl.atomic_*'s rmwOp names, by the interpreter's enum: the op rows' kinds (record/interp/proxy.py's)
_RMW = {"ADD": "atomic_add", "FADD": "atomic_add", "MIN": "atomic_min", "UMIN": "atomic_min", "MAX": "atomic_max",
        "UMAX": "atomic_max", "AND": "atomic_and", "OR": "atomic_or", "XOR": "atomic_xor", "XCHG": "atomic_xchg"}


def sem_name(sem) -> str:
    """``"acq_rel"``, ``"release"``, ``"acquire"`` or ``"relaxed"`` for Triton's enum (its name otherwise)."""
    name = getattr(sem, "name", str(sem)).split(".")[-1].upper()
    return _SEMS.get(name, name.lower())


class AtomicSems(Monitor):
    def __init__(self, tensors=(), outputs=()):
        super().__init__(tensors, outputs)
        self.seen: dict = {}        # (file, line, op, sem) -> None, in the order first seen

    def note(self, file, line, op: str, sem) -> None:
        self.seen.setdefault((file, int(line or 0), op, sem_name(sem)))

    # (a set, listed sorted: a worker's merge in whatever order)
    def fork_point(self):
        return None

    def since(self, point) -> list:
        return list(self.seen)

    def mergeable(self, added):
        return None

    def merge(self, added) -> None:
        for key in added:
            self.seen.setdefault(key)

    def records(self) -> dict:
        order = sorted(self.seen, key=lambda k: (str(k[0]), k[1], k[2], k[3]))
        return {"atomic_sem": [{"file": f, "line": line, "op": op, "sem": sem} for f, line, op, sem in order]}


def install(scope, builder, rec) -> None:
    if hasattr(builder, "create_barrier"):
        scope.set_attr(builder, "create_barrier", _barrier(inner_method(builder, "create_barrier"), rec))
    if hasattr(builder, "create_atomic_rmw"):
        scope.set_attr(builder, "create_atomic_rmw", _rmw(inner_method(builder, "create_atomic_rmw"), rec))
    if hasattr(builder, "create_atomic_cas"):
        scope.set_attr(builder, "create_atomic_cas", _cas(inner_method(builder, "create_atomic_cas"), rec))


def _barrier(inner, rec):
    def create_barrier(*args, **kwargs):
        out = inner(*args, **kwargs)
        if rec.recording:
            file, line = where()
            rec.compute_op("barrier", file, line, (), ())
        return out
    return create_barrier


def _rmw(inner, rec):
    def create_atomic_rmw(op, ptr, val, mask, sem, *args, **kwargs):
        if rec.recording:
            name = getattr(op, "name", str(op)).split(".")[-1].upper()
            file, line = where()
            rec.atomic_sems.note(file, line, _RMW.get(name, "atomic_add"), sem)
        return inner(op, ptr, val, mask, sem, *args, **kwargs)
    return create_atomic_rmw


def _cas(inner, rec):
    def create_atomic_cas(ptr, cmp, val, sem, *args, **kwargs):
        if rec.recording:
            file, line = where()
            rec.atomic_sems.note(file, line, "atomic_cas", sem)
        return inner(ptr, cmp, val, sem, *args, **kwargs)
    return create_atomic_cas
