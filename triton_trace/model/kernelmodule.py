"""What a kernel needs besides its own source, as the recorder read it (record/kernelmodule.py): its
@triton.jit helpers, the imports and constants it names, each argument as a way to rebuild it, the launch
options, and what ``trace(inputs=...)`` kept. ``Launch.module`` holds it; a reproducer script
(repro/) and a compile for another target (compiled/) rebuild the kernel's module from it, in another
process, without the user's code.

A trace file carries it as the launch's ``meta.module`` object, in the shape ``to_dict`` writes (unchanged
from the untyped dict earlier versions kept there), and ``from_dict`` reads one back field by field: every
type, every string's length and every list's size is bounded, and an unknown key is refused, with a
message naming the field. The texts stay data here: compiled/source.py checks them as Python before any
is written into a script or imported.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Optional

MAX_HELPERS = 64            # the recorder stops carrying helpers over past this many
MAX_ITEMS = 4096            # imports, constants, unresolved names, parameters, launch options, storages
MAX_SOURCE = 1 << 20        # characters of one helper's source
MAX_TEXT = 1 << 16          # an import or constant line, an argument's expression, a reason, a note
MAX_NAME = 4096             # a name, a file path, a type name, a version
MAX_INT = 1 << 62
PARAM_KINDS = ("tensor", "value", "descriptor", "other")


def source_from_def(source: str) -> tuple:
    """(source from the ``def`` line on, dedented; how many lines came before it): decorators dropped."""
    lines = source.splitlines()
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return textwrap.dedent("\n".join(lines[i:])) + "\n", i
    return textwrap.dedent(source), 0


# -- checks: each raises ValueError whose message starts with the field it names ------------------------------
def _str(value, where: str, limit: int = MAX_NAME) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{where} is {type(value).__name__}, not a string")
    if len(value) > limit:
        raise ValueError(f"{where} holds {len(value)} characters, more than the {limit} it may hold")


def _int(value, where: str, lo: int = -MAX_INT) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= MAX_INT:
        raise ValueError(f"{where} is {value!r:.40}, not an integer in {lo}..2**62")


def _bool(value, where: str) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{where} is {type(value).__name__}, not a boolean")


def _seq(value, where: str, limit: int = MAX_ITEMS) -> None:
    """A tuple in memory; from_dict turns a file's lists into tuples first."""
    if not isinstance(value, tuple):
        raise ValueError(f"{where} is {type(value).__name__}, not a tuple")
    if len(value) > limit:
        raise ValueError(f"{where} holds {len(value)} entries, more than the {limit} it may hold")


def _ints(value, where: str, lo: int = -MAX_INT, limit: int = MAX_ITEMS) -> None:
    _seq(value, where, limit)
    for k, v in enumerate(value):
        _int(v, f"{where}[{k}]", lo)


def _mapping(value, where: str) -> dict:
    """A dict of at most MAX_ITEMS entries keyed by names (a file's JSON object, or the field in memory)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} is {type(value).__name__}, not an object")
    if len(value) > MAX_ITEMS:
        raise ValueError(f"{where} holds {len(value)} entries, more than the {MAX_ITEMS} it may hold")
    for name in value:
        _str(name, f"{where} key {str(name)[:40]!r}")
    return value


def _object(d, where: str, required: tuple, optional: tuple = ()) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"{where} is {type(d).__name__}, not an object")
    unknown = sorted(str(k)[:40] for k in set(d) - set(required) - set(optional))
    missing = sorted(set(required) - set(d))
    if unknown:
        raise ValueError(f"{where} has unknown keys {unknown[:5]}")
    if missing:
        raise ValueError(f"{where} lacks {missing[:5]}")


def _tuple(value, where: str, limit: int = MAX_ITEMS) -> tuple:
    """A file's list as a tuple (bounded before anything is built from it)."""
    if not isinstance(value, list):
        raise ValueError(f"{where} is {type(value).__name__}, not a list")
    if len(value) > limit:
        raise ValueError(f"{where} holds {len(value)} entries, more than the {limit} it may hold")
    return tuple(value)


def _within(where: str, build):
    """``build()``, its field named from ``where`` down when it refuses one."""
    try:
        return build()
    except ValueError as e:
        text = str(e)
        raise ValueError(where + ("" if text.startswith(" ") else ".") + text) from None


# -- the parts --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Helper:
    """A @triton.jit function the kernel calls (directly or through another helper)."""
    name: str           # the name the caller uses
    def_name: str       # the name in its ``def``
    source: str         # from its ``def`` line on, dedented, decorators dropped
    file: str
    line: int           # line of its ``def`` in ``file``

    def __post_init__(self):
        for key in ("name", "def_name", "file"):
            _str(getattr(self, key), key)
        _str(self.source, "source", MAX_SOURCE)
        _int(self.line, "line", lo=0)

    @staticmethod
    def from_dict(d: dict) -> "Helper":
        _object(d, "", ("name", "def_name", "source", "file", "line"))
        return Helper(d["name"], d["def_name"], d["source"], d["file"], d["line"])

    def to_dict(self) -> dict:
        return {"name": self.name, "def_name": self.def_name, "source": self.source, "file": self.file,
                "line": self.line}


@dataclass(frozen=True)
class Unresolved:
    """A name the kernel uses that could not be carried over, and why: a reproducer says so."""
    name: str
    why: str

    def __post_init__(self):
        _str(self.name, "name")
        _str(self.why, "why", MAX_TEXT)

    @staticmethod
    def from_dict(d: dict) -> "Unresolved":
        _object(d, "", ("name", "why"))
        return Unresolved(d["name"], d["why"])

    def to_dict(self) -> dict:
        return {"name": self.name, "why": self.why}


@dataclass(frozen=True)
class Param:
    """How one kernel argument is rebuilt: "tensor" (from the launch's tensor table), "value" (``expr``, a
    Python expression of a constant), "descriptor" (a host TensorDescriptor: ``shape``, ``strides``,
    ``block_shape``, over the tensor of the same name) or "other" (not rebuildable: ``type`` names it)."""
    kind: str
    expr: Optional[str] = None
    type: Optional[str] = None
    shape: Optional[tuple] = None
    strides: Optional[tuple] = None
    block_shape: Optional[tuple] = None

    _FIELDS = {"tensor": (), "value": ("expr",), "descriptor": ("shape", "strides", "block_shape"),
               "other": ("type",)}

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"kind is {str(self.kind)[:40]!r}, not one of {list(PARAM_KINDS)}")
        wanted = self._FIELDS[self.kind]
        for key in ("expr", "type", "shape", "strides", "block_shape"):
            value = getattr(self, key)
            if key not in wanted:
                if value is not None:
                    raise ValueError(f"{key} is set on a parameter of kind {self.kind!r}")
            elif key in ("expr", "type"):
                _str(value, key, MAX_TEXT)
            else:
                _ints(value, key, limit=64)

    @staticmethod
    def from_dict(d: dict) -> "Param":
        _object(d, "", ("kind",), ("expr", "type", "shape", "strides", "block_shape"))
        kw = {k: (_tuple(v, k, 64) if k in ("shape", "strides", "block_shape") else v) for k, v in d.items()}
        return Param(**kw)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **{k: (list(v) if isinstance(v, tuple) else v)
                                      for k in self._FIELDS[self.kind] for v in (getattr(self, k),)}}


@dataclass(frozen=True)
class KeptInputs:
    """What ``trace(inputs=...)`` kept: each storage's size in bytes (``Launch.inputs`` holds them back to
    back) and whether its bytes after the launch are in ``Launch.finals``; ``kept`` False and ``note`` say why
    none are (over the size budget)."""
    storages: tuple
    written: tuple
    kept: bool
    note: Optional[str] = None

    def __post_init__(self):
        _ints(self.storages, "storages", lo=0)
        _seq(self.written, "written")
        for k, w in enumerate(self.written):
            _bool(w, f"written[{k}]")
        if len(self.written) != len(self.storages):
            raise ValueError(f"written holds {len(self.written)} flags for {len(self.storages)} storages")
        _bool(self.kept, "kept")
        if self.note is not None:
            _str(self.note, "note", MAX_TEXT)

    @property
    def input_bytes(self) -> int:
        return sum(self.storages)

    @property
    def final_bytes(self) -> int:
        return sum(n for n, w in zip(self.storages, self.written) if w)

    @staticmethod
    def from_dict(d: dict) -> "KeptInputs":
        _object(d, "", ("storages", "written", "kept"), ("note",))
        return KeptInputs(_tuple(d["storages"], "storages"), _tuple(d["written"], "written"), d["kept"],
                          d.get("note"))

    def to_dict(self) -> dict:
        return {"storages": list(self.storages), "written": list(self.written), "kept": self.kept,
                **({"note": self.note} if self.note is not None else {})}


# -- the module ---------------------------------------------------------------------------------------------------
_REQUIRED = ("helpers", "imports", "constants", "missing", "params")
# files written before each existed lack them
_OPTIONAL = ("launch_options", "triton", "inputs", "no_specialize", "no_specialize_alignment")


@dataclass(frozen=True)
class KernelModule:
    """Everything but the kernel's own source (``Launch.source``) that rebuilds its module."""
    helpers: tuple = ()                 # Helper, callees after their callers, as the recorder met them
    imports: tuple = ()                 # "import x" / "from m import n as k" lines
    constants: tuple = ()               # "NAME = <literal>" lines
    missing: tuple = ()                 # Unresolved
    params: dict = field(default_factory=dict)          # parameter name -> Param (a file keeps them by name)
    launch_options: dict = field(default_factory=dict)  # num_warps, num_stages, ...: int, bool, str or None
    triton: Optional[str] = None        # the Triton release that recorded it
    inputs: Optional[KeptInputs] = None  # None: traced without trace(inputs=...)
    # parameters the kernel's @triton.jit(do_not_specialize=..., do_not_specialize_on_alignment=...) names:
    # the GPU's launcher does not specialize them (value 1, divisibility by 16), so a compile must not either
    no_specialize: tuple = ()
    no_specialize_alignment: tuple = ()

    def __post_init__(self):
        _seq(self.helpers, "helpers", MAX_HELPERS)
        for k, h in enumerate(self.helpers):
            if not isinstance(h, Helper):
                raise ValueError(f"helpers[{k}] is {type(h).__name__}, not a Helper")
        for key in ("imports", "constants"):
            _seq(getattr(self, key), key)
            for k, line in enumerate(getattr(self, key)):
                _str(line, f"{key}[{k}]", MAX_TEXT)
        _seq(self.missing, "missing")
        for k, m in enumerate(self.missing):
            if not isinstance(m, Unresolved):
                raise ValueError(f"missing[{k}] is {type(m).__name__}, not an Unresolved")
        for name, p in _mapping(self.params, "params").items():
            if not isinstance(p, Param):
                raise ValueError(f"params[{name!r}] is {type(p).__name__}, not a Param")
        for name, v in _mapping(self.launch_options, "launch_options").items():
            if isinstance(v, str):
                _str(v, f"launch_options[{name!r}]")
            elif v is not None and not isinstance(v, bool):
                _int(v, f"launch_options[{name!r}]")     # (an int, or refused as neither)
        if self.triton is not None:
            _str(self.triton, "triton", 64)
        for key in ("no_specialize", "no_specialize_alignment"):
            _seq(getattr(self, key), key)
            for k, name in enumerate(getattr(self, key)):
                _str(name, f"{key}[{k}]")
        if self.inputs is not None and not isinstance(self.inputs, KeptInputs):
            raise ValueError(f"inputs is {type(self.inputs).__name__}, not a KeptInputs")

    def options(self) -> dict:
        """The launch options that were set (a GPU launch passes these)."""
        return {k: v for k, v in self.launch_options.items() if v is not None}

    def to_dict(self) -> dict:
        """The JSON object a trace file keeps as ``meta.module``."""
        out = {"helpers": [h.to_dict() for h in self.helpers], "imports": list(self.imports),
               "constants": list(self.constants), "missing": [m.to_dict() for m in self.missing],
               "params": {name: p.to_dict() for name, p in self.params.items()},
               "launch_options": dict(self.launch_options)}
        if self.triton is not None:
            out["triton"] = self.triton
        if self.inputs is not None:
            out["inputs"] = self.inputs.to_dict()
        for key in ("no_specialize", "no_specialize_alignment"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        return out

    @staticmethod
    def from_dict(d, where: str = "module") -> "KernelModule":
        """The module a trace file describes; ValueError naming the field (``where`` and down) when any
        field has the wrong type, size or name."""
        def build():
            _object(d, "", _REQUIRED, _OPTIONAL)
            helpers = tuple(_within(f"helpers[{k}]", lambda h=h: Helper.from_dict(h))
                            for k, h in enumerate(_tuple(d["helpers"], "helpers", MAX_HELPERS)))
            missing = tuple(_within(f"missing[{k}]", lambda m=m: Unresolved.from_dict(m))
                            for k, m in enumerate(_tuple(d["missing"], "missing")))
            params = {name: _within(f"params[{name[:40]!r}]", lambda p=p: Param.from_dict(p))
                      for name, p in _mapping(d["params"], "params").items()}
            inputs = d.get("inputs")
            if inputs is not None:
                inputs = _within("inputs", lambda: KeptInputs.from_dict(inputs))
            return KernelModule(helpers, _tuple(d["imports"], "imports"), _tuple(d["constants"], "constants"),
                                missing, params, dict(_mapping(d.get("launch_options", {}), "launch_options")),
                                d.get("triton"), inputs, _tuple(d.get("no_specialize", []), "no_specialize"),
                                _tuple(d.get("no_specialize_alignment", []), "no_specialize_alignment"))
        return _within(where, build)
