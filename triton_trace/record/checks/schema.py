"""The schema of a runtime check's record: what checks/table.py declares for each record a monitor writes
into ``Launch.meta`` (a list of JSON objects), and the check that a trace file's copy of it holds exactly
that, before anything reads it.

A record comes back from a file, which may be damaged or crafted: every entry must be an object of the
declared fields, each of its declared kind and range, and every list within its declared length, so an
analysis or a view that reads it never meets a type, a negative index or a size it did not expect.
Nothing in it is ever run; an error names the record, the entry and the field (``meta.lane_conflict[3].
first``), and store/tracefile.py turns it into a TraceFileError naming the file.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from ...store.header import MAX_INT, HeaderError
from .monitor import MAX_HIT_INTS, MAX_PROGRAMS, MAX_REPORTS

MAX_LIST = 64          # entries of a short list inside an entry: a block index, the first offsets, operands

# kind -> what it holds (the message of a value that is not one)
KINDS = {
    "text": "a string",
    "int": "an integer",
    "real": "a number",
    "scalar": "a number, a string or a boolean",          # a recorded value (Inf and NaN as their repr)
    "ints": "a list of integers",
    "reals": "a list of numbers",
    "program": "a program id (three integers from 0)",
    "programs": "a list of program ids",
    "scalars": "a list of numbers, strings or booleans",
    "indexes": "a list of block indexes",
    "facts": "an object of numbers, strings and lists of them",
    "object": "an object",
}


class Field(NamedTuple):
    kind: str                        # one of KINDS
    lo: int = 0                      # "int", "ints", "indexes": the smallest integer allowed
    size: int = MAX_LIST             # lists: the most entries
    null: bool = False               # may be null
    need: bool = True                # must be present
    fields: Optional[dict] = None     # "object": its own fields


class Record(NamedTuple):
    """One list a monitor writes into ``Launch.meta[name]``: at most ``entries`` objects of ``fields``."""
    name: str
    fields: dict
    entries: int = MAX_REPORTS


# the fields most records share
TEXT = Field("text")
NAME = Field("text", null=True, need=False)           # a file or tensor name, absent or null when unknown
COUNT = Field("int")
PROGRAM = Field("program")
REACH = {"programs": Field("programs", size=MAX_PROGRAMS, need=False), "reach_lanes": Field("int", need=False)}
# which lanes of which op rows a cause reached (monitor.encode_hits); absent from older traces
HITS = {"hits": Field("ints", size=MAX_HIT_INTS, need=False)}


def check(record: Record, value, where: str) -> None:
    """Raise HeaderError, naming the entry and field, unless ``value`` is a list of ``record``'s entries."""
    if not isinstance(value, list):
        raise HeaderError(f"{where} is {type(value).__name__}, not a list")
    if len(value) > record.entries:
        raise HeaderError(f"{where} holds {len(value)} entries, more than the {record.entries} the recorder keeps")
    for k, entry in enumerate(value):
        _object(entry, record.fields, f"{where}[{k}]")


def _object(obj, fields: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise HeaderError(f"{where} is {type(obj).__name__}, not an object")
    unknown = set(obj) - set(fields)
    missing = {k for k, f in fields.items() if f.need} - set(obj)
    if unknown or missing:
        raise HeaderError(f"{where} has unknown keys {sorted(map(str, unknown))[:5]} or lacks {sorted(missing)[:5]}")
    for key, value in obj.items():
        _field(fields[key], value, f"{where}.{key}")


def _field(f: Field, v, where: str) -> None:
    if v is None and f.null:
        return
    ok = _CHECKS[f.kind](f, v, where)
    if not ok:
        what = KINDS[f.kind] + (f" within {f.size} entries" if f.kind in _LISTS else "") + \
            (f" from {f.lo}" if f.kind in ("int", "ints", "indexes") else "")
        raise HeaderError(f"{where} is {_show(v)}, not {what}")


def _show(v) -> str:
    text = repr(v) if not isinstance(v, (list, dict)) else f"a {type(v).__name__} of {len(v)}"
    return text[:40]


def _int(v, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= MAX_INT


def _scalar(v) -> bool:
    if isinstance(v, int) and not isinstance(v, bool):
        return -MAX_INT <= v <= MAX_INT
    return isinstance(v, (str, bool, float))


def _list(v, f: Field, each) -> bool:
    return isinstance(v, list) and len(v) <= f.size and all(each(x) for x in v)


def _facts(f: Field, v, where: str) -> bool:
    if not isinstance(v, dict) or len(v) > MAX_LIST:
        return False
    for name, x in v.items():
        if not (x is None or _scalar(x) or _list(x, Field("scalars"), _scalar)):
            raise HeaderError(f"{where}.{name} is {_show(x)}, not a number, a string or a short list of them")
    return True


def _nested(f: Field, v, where: str) -> bool:
    _object(v, f.fields or {}, where)
    return True


_LISTS = ("ints", "reals", "programs", "scalars", "indexes")
_CHECKS = {
    "text": lambda f, v, w: isinstance(v, str),
    "int": lambda f, v, w: _int(v, f.lo),
    "real": lambda f, v, w: isinstance(v, (int, float)) and not isinstance(v, bool) and _scalar(v),
    "scalar": lambda f, v, w: _scalar(v),
    "ints": lambda f, v, w: _list(v, f, lambda x: _int(x, f.lo)),
    "reals": lambda f, v, w: _list(v, f, lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and _scalar(x)),
    "program": lambda f, v, w: isinstance(v, list) and len(v) == 3 and all(_int(x, 0) for x in v),
    "programs": lambda f, v, w: _list(v, f, lambda p: isinstance(p, list) and len(p) == 3 and
                                      all(_int(x, 0) for x in p)),
    "scalars": lambda f, v, w: _list(v, f, _scalar),
    "indexes": lambda f, v, w: _list(v, f, lambda i: isinstance(i, list) and len(i) <= MAX_LIST and
                                     all(_int(x, f.lo) for x in i)),
    "facts": _facts,
    "object": _nested,
}
