"""What ``trace(...)`` and ``trace_all(...)`` accept, checked and normalised once per decoration: which
programs to record, how many values, declared outputs, what out-of-bounds lanes do, batching, memory
limits, kept inputs, poisoned ``torch.empty`` and the worker processes a launch may use. Every wrong value is a ``TraceUsageError`` naming the option
and what it takes."""
from __future__ import annotations

import numbers
from typing import Callable, Iterable, Optional, Union

from ..errors import TraceUsageError

DEFAULT_CHUNK = 256          # programs per batched chunk: bounds memory to ~chunk x one program's values
NUMERICS = ("interpreter", "compiled")
DEFAULT_VALUE_CAP = 1 << 22  # trace(values=True): elements of values kept per launch (about 32 MB of float64)


def _pid(p) -> tuple:
    if isinstance(p, numbers.Integral):
        return (int(p), 0, 0)
    if isinstance(p, (tuple, list)) and 1 <= len(p) <= 3 and all(isinstance(v, numbers.Integral) for v in p):
        return tuple(int(v) for v in p) + (0,) * (3 - len(p))
    raise TraceUsageError(f"trace(programs=...): {p!r} is not a program id; use an int or an (x, y, z) tuple")


def program_filter(programs) -> Optional[Callable]:
    """None records every program; a callable gets the (x, y, z) id; an iterable lists the ids to keep."""
    if programs is None:
        return None
    if callable(programs):
        return lambda pid: programs(pid)
    if isinstance(programs, (numbers.Integral, tuple)) and not (
            isinstance(programs, tuple) and programs and isinstance(programs[0], (tuple, list))):
        keep = {_pid(programs)}
    else:
        try:
            keep = {_pid(p) for p in programs}
        except TypeError:
            raise TraceUsageError(f"trace(programs=...) takes program ids, a list of them or a callable; "
                                  f"got {programs!r}") from None
    return lambda pid: pid in keep


def value_cap(values) -> int:
    if values is True:
        return DEFAULT_VALUE_CAP
    if values is False or values is None:
        return 0
    if isinstance(values, int) and values >= 0:
        return values
    raise TraceUsageError(f"trace(values=...) takes True, False or a number of elements to keep; got {values!r}")


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


INPUTS_LIMIT = 1 << 30     # trace(inputs=True): bytes of storages kept per launch (before and after)


def inputs_bytes(inputs) -> int:
    """``trace(inputs=...)``: False (0), True (INPUTS_LIMIT), or a size as for ``memory_limit``."""
    if inputs is False or inputs is None:
        return 0
    if inputs is True:
        return INPUTS_LIMIT
    return memory_bytes(inputs, "inputs")


def memory_bytes(limit, option: str = "memory_limit") -> Optional[int]:
    """``trace(memory_limit=...)``: None, a number of bytes, or a string such as "512MB" or "2GiB"."""
    if limit is None:
        return None
    if isinstance(limit, numbers.Integral) and not isinstance(limit, bool) and limit > 0:
        return int(limit)
    if isinstance(limit, str):
        text = limit.strip().lower().replace(" ", "")
        num = text.rstrip("kmgib")
        unit = text[len(num):]
        try:
            if unit in _UNITS and float(num) > 0:
                return int(float(num) * _UNITS[unit])
        except ValueError:
            pass
    raise TraceUsageError(f"trace({option}=...) takes a number of bytes or a size such as '512MB' or '2GiB'; "
                          f"got {limit!r}")


def batch_chunk(batch) -> int:
    """Programs per batched chunk: ``True`` the default size, ``False`` one program at a time."""
    if batch is True:
        return DEFAULT_CHUNK
    if batch is False or batch is None:
        return 1
    if isinstance(batch, numbers.Integral) and batch >= 1:
        return int(batch)
    raise TraceUsageError(f"trace(batch=...) takes True, False or a number of programs per chunk; got {batch!r}")


def worker_count(workers) -> Optional[int]:
    """``trace(workers=...)``: a number >= 1, or "auto" (None here: the idle cores the process may use,
    decided per launch)."""
    if workers is None or workers == "auto":
        return None
    if isinstance(workers, numbers.Integral) and not isinstance(workers, bool) and workers >= 1:
        return int(workers)
    raise TraceUsageError(f"trace(workers=...) takes a number of worker processes >= 1 or 'auto' (the idle "
                          f"cores this process may use); got {workers!r}")


SHADOWS = (None, "float64")


def shadow_mode(shadow) -> Optional[str]:
    if shadow not in SHADOWS:
        raise TraceUsageError(f"trace(shadow=...) is None or 'float64' (every floating value followed in "
                              f"float64: analyze() then says where precision is lost); got {shadow!r}")
    return shadow


class TraceOptions:
    def __init__(self, programs=None, values=True, outputs: Iterable[str] = (), on_oob: str = "skip",
                 config=None, batch: Union[bool, int] = True, memory_limit=None, inputs=False,
                 poison_empty: bool = False, numerics: str = "interpreter", workers=1, shadow=None):
        if on_oob not in ("skip", "raise"):
            raise TraceUsageError(f"trace(on_oob=...) is 'skip' or 'raise', not {on_oob!r}")
        if not isinstance(poison_empty, bool):
            raise TraceUsageError(f"trace(poison_empty=...) is True or False, not {poison_empty!r}")
        if numerics not in NUMERICS:
            raise TraceUsageError(f"trace(numerics=...) is one of {', '.join(map(repr, NUMERICS))}, not {numerics!r}")
        if isinstance(outputs, str):
            outputs = (outputs,)
        self.programs = programs
        self.filter = program_filter(programs)
        self.values_cap = value_cap(values)
        self.outputs = tuple(outputs)
        self.on_oob = on_oob
        self.config = config
        self.chunk = batch_chunk(batch)
        self.grow = batch is True       # the default chunk size grows for kernels of small blocks
        self.memory_limit = memory_bytes(memory_limit)
        self.inputs = inputs_bytes(inputs)
        self.poison_empty = poison_empty     # torch.empty & co. poisoned (record/memory/poison.py)
        self.numerics = numerics             # "compiled": arithmetic as the GPU's (record/gpu/ascompiled.py)
        self.workers = worker_count(workers)  # processes a launch's programs may run in (record/parallel/)
        self.shadow = shadow_mode(shadow)     # "float64": the float64 shadow monitor (record/checks/shadow.py)
        self.keep = True       # False: run through the interpreter without keeping a launch


def untraced_options() -> "TraceOptions":
    opts = TraceOptions(programs=lambda pid: False, values=False)
    opts.keep = False
    return opts
