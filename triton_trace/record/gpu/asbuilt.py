"""Compiled facts for the launch being traced: its kernel compiled for sm_90 on this machine (to TTGIR, no GPU
and no ptxas), so that ``numerics="compiled"`` can ask how the compiler laid out an op of a source line: the
layout a ``tl.sum``/``tl.cumsum`` reduces over (gpu/reduceorder.py), the tensor-core instruction a ``tl.dot``
became (``dot_at``, for numerics/tensorcore.py).

The compile is the GPU launcher's: the kernel's binder specialises the launch's arguments (tensors stand in at
the address a ``cudaMalloc`` would give: 256-aligned storages plus the view's offset) under its launch
options, once per specialization (``facts`` caches it on the jit function). Ops are found by the source
places of their TTGIR ``loc`` (every file:line of a ``callsite`` chain, so one inside ``tl.sum`` or a user's
helper is found at the kernel's line too). Where the kernel does not compile the facts say why and know no op.

Which launch is being traced: ``launching(kernel, args, options)`` names it and compiles it, before the
interpreter's hooks patch the language (the code generator cannot run under them); ``current()`` answers
inside. A launch nobody named has no facts (``Facts.error`` says so) and keeps the interpreter's order.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import weakref
from dataclasses import dataclass, field
from typing import Optional

from ..interp import access, kernels

TARGET_ARCH = 90
_ALIGN = 256                 # cudaMalloc's alignment: a storage's first byte on the GPU
_LAUNCH: contextvars.ContextVar = contextvars.ContextVar("triton_trace_asbuilt_launch", default=None)
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # jit function -> {spec: Facts}
_CACHE_PER_KERNEL = 16


@dataclass(frozen=True)
class Op:
    """One ``tt.reduce``/``tt.scan``/dot of the TTGIR: its operand's shape, element type and layout (parsed:
    ``{"kind": "blocked", ...}``, a slice with its ``parent``), the combine region's one arithmetic op
    (``"addf"``, ``"mulf"``, or None for anything else), and the source places of its ``loc``."""
    kind: str
    axis: int
    reverse: bool
    shape: tuple
    element: str
    layout: Optional[dict]
    combine: Optional[str]
    places: frozenset
    column: Optional[tuple] = None         # (file, line, column) of the innermost user place
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    ttgir: str = ""
    ops: tuple = ()
    error: Optional[str] = None
    num_warps: int = 0
    triton: str = ""
    fp_fusion: bool = True          # the launch's enable_fp_fusion (TRITON_DEFAULT_FP_FUSION when it gave none)

    def at(self, kind: str, file: Optional[str], line: int) -> list:
        """The ops of ``kind`` ("reduce", "scan", "dot") whose source places include ``file:line``."""
        want = _place(file, line)
        return [op for op in self.ops if op.kind == kind and (want in op.places or
                                                              (os.path.basename(file or ""), line) in op.places)]

    def dot_at(self, file: Optional[str], line: int) -> list:
        """The dots of a source line as compiled: ``{"instruction": "wgmma" | "mma.sync" | "fma", "instrShape",
        "versionMajor", "warpsPerCTA", "a", "b", "acc" (element types), "shape"}``."""
        return [dict(op.extra, shape=list(op.shape), acc=op.element) for op in self.at("dot", file, line)]


@contextlib.contextmanager
def launching(kernel, args: dict, options: Optional[dict] = None):
    """Name the launch being traced (the kernel object, its bound arguments, its launch options such as
    num_warps) while its programs run, compiling it now: once the interpreter's hooks are in, the language
    is patched and the compiler cannot run."""
    token = _LAUNCH.set(facts(kernel, args, options))
    try:
        yield
    finally:
        _LAUNCH.reset(token)


def current() -> Facts:
    """The compiled facts of the launch being traced (``launching``)."""
    named = _LAUNCH.get()
    return named if named is not None else Facts(error="the launch was not named to gpu/asbuilt (launching)")


def facts(kernel, args: Optional[dict] = None, options: Optional[dict] = None) -> Facts:
    """The compiled facts of a launch of ``kernel`` (a jit function, possibly autotuned) with ``args`` (name
    -> value: tensors, scalars, constexprs) and launch ``options``, compiled once per specialization."""
    try:
        jit = kernels.innermost(kernel)
    except TypeError as e:
        return Facts(error=str(e))
    if not hasattr(jit, "params"):              # under TRITON_INTERPRET=1 triton.jit made an InterpretedFunction
        jit = access.jit_function(jit.fn)
    stand_ins = _stand_ins(args or {})
    options = {k: v for k, v in (options or {}).items() if isinstance(v, (int, bool, str)) or v is None}
    try:
        # the compiler reads the FP-fusion default from the environment when the launch gives none
        env = [os.environ.get(n) for n in ("TRITON_DEFAULT_FP_FUSION", "TRITON_FORCE_DISABLE_FP_FUSION")]
        key = json.dumps([{k: _key(v) for k, v in stand_ins.items()}, options, env], sort_keys=True)
    except TypeError:
        key = None
    per = _CACHE.setdefault(jit, {}) if _weakable(jit) else {}
    if key is not None and key in per:
        return per[key]
    out = _compile(jit, stand_ins, options)
    if key is not None:
        if len(per) >= _CACHE_PER_KERNEL:
            per.pop(next(iter(per)))
        per[key] = out
    return out


def _weakable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


class _DeviceTensor:
    """A tensor argument as the GPU launcher sees it: its dtype and the address of its first element."""

    def __init__(self, dtype, address: int):
        self.dtype, self._address = dtype, address

    def data_ptr(self) -> int:
        return self._address


def _stand_ins(args: dict) -> dict:
    out, storages = {}, {}
    for name, v in args.items():
        if hasattr(v, "data_ptr") and hasattr(v, "dtype") and hasattr(v, "storage_offset"):
            try:
                base = storages.setdefault(v.untyped_storage().data_ptr(), (len(storages) + 1) * (1 << 30))
                out[name] = _DeviceTensor(v.dtype, base + v.storage_offset() * v.element_size())
            except (RuntimeError, AttributeError):
                out[name] = _DeviceTensor(v.dtype, _ALIGN * (len(storages) + 1))
        else:
            out[name] = v
    return out


def _key(v):
    if isinstance(v, _DeviceTensor):
        return ["tensor", str(v.dtype), v.data_ptr() % _ALIGN]
    if isinstance(v, (int, float, bool, str)) or v is None:
        return [type(v).__name__, v]
    return [type(v).__name__, repr(v)]


def _compile(jit, args: dict, options: dict) -> Facts:
    import triton
    try:
        text, warps, fusion = access.compile_ttgir(jit, args, options, TARGET_ARCH)
    except Exception as e:          # noqa: BLE001 the binder, front end and passes raise many kinds
        first = " / ".join(str(e).strip().splitlines()[:3])[:300]
        return Facts(error=f"did not compile for sm_{TARGET_ARCH}: {type(e).__name__}: {first}",
                     triton=triton.__version__)
    return Facts(ttgir=text, ops=tuple(parse_ops(text)), num_warps=warps, triton=triton.__version__, fp_fusion=fusion)


# ------------------------------------------------------------------------------------------------------------
# reading the TTGIR
# ------------------------------------------------------------------------------------------------------------
_LOC_DEF = re.compile(r"^#(loc\d*)\s*=\s*loc\((.*)\)\s*$")
_ALIAS_DEF = re.compile(r"^#(\w+)\s*=\s*(#\w+\.\w+<.*>)\s*$")
_TRAIL_LOC = re.compile(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_FILELINE = re.compile(r"\"([^\"]*)\":(\d+):(\d+)")
_OPEN = re.compile(r"\"tt\.(reduce|scan)\"\(")
_DOT = re.compile(r"=\s*(tt\.dot|ttng\.warp_group_dot)\b")


def _place(file: Optional[str], line: int) -> tuple:
    return (os.path.realpath(file) if file else None, int(line))


def _bracketed(text: str, start: int) -> str:
    """The text from ``start`` (an opening ``<``, ``[`` or ``(``) to its matching close, inclusive."""
    pairs = {"<": ">", "[": "]", "(": ")", "{": "}"}
    opening = []
    for i in range(start, len(text)):
        c = text[i]
        if c in pairs:
            opening.append(pairs[c])
        elif opening and c == opening[-1]:
            opening.pop()
            if not opening:
                return text[start:i + 1]
    return text[start:]


def parse_layout(text: str, aliases: dict) -> Optional[dict]:
    """``#blocked1`` or an inline ``#ttg.slice<{dim = 1, parent = #blocked}>`` / ``#ttg.linear<{...}>`` as a
    dict: its kind and attributes (a slice's ``parent`` parsed too)."""
    text = text.strip()
    if re.fullmatch(r"#\w+", text):
        return parse_layout(aliases[text[1:]], aliases) if text[1:] in aliases else None
    m = re.match(r"#\w+\.(\w+)<\{", text)
    if not m:
        return None
    body = _bracketed(text, m.end() - 1)[1:-1]
    out = {"kind": m.group(1)}
    i = 0
    for km in re.finditer(r"(\w+)\s*=\s*", body):
        if km.start() < i:
            continue
        j = km.end()
        if body[j] in "[#":
            value = _bracketed(body, j) if body[j] == "[" else re.match(r"#[\w.]+(<.*)?", body[j:]).group(0)
            if body[j] == "#" and "<" in value:
                value = value[:value.index("<")] + _bracketed(body, j + value.index("<"))
        else:
            value = re.match(r"[^,}]+", body[j:]).group(0).strip()
        i = j + len(value)
        key = km.group(1)
        if value.startswith("["):
            out[key] = json.loads(value)
        elif value.startswith("#"):
            out[key] = parse_layout(value, aliases)
        else:
            out[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
    return out


def _loc_places(body: str, defs: dict, depth: int = 0) -> list:
    """Every (file, line, column) a location names, innermost first (a callsite's callee, then its caller)."""
    if depth > 64:
        return []
    out = []
    for m in re.finditer(r"#(loc\d*)\b|\"([^\"]*)\":(\d+):(\d+)", body):
        if m.group(1):
            out += _loc_places(defs.get(m.group(1), ""), defs, depth + 1)
        else:
            out.append((m.group(2), int(m.group(3)), int(m.group(4))))
    return out


def _operand_type(text: str) -> tuple:
    """(shape, element type, encoding text) of the first ranked tensor type in ``text``."""
    m = re.search(r"tensor<", text)
    if not m:
        return (), "", ""
    inner = _bracketed(text, m.end() - 1)[1:-1]
    dims, _, rest = inner.partition(", ")
    parts = dims.split("x")
    shape = tuple(int(p) for p in parts[:-1] if p.isdigit())
    return shape, parts[-1], rest


def parse_ops(text: str) -> list:
    """The reductions, scans and dots of a TTGIR text (see ``Op``)."""
    lines = text.splitlines()
    defs, aliases = {}, {}
    for line in lines:
        m = _LOC_DEF.match(line)
        if m:
            defs[m.group(1)] = m.group(2)
        m = _ALIAS_DEF.match(line)
        if m:
            aliases[m.group(1)] = m.group(2)
    ops = []
    for i, line in enumerate(lines):
        m = _OPEN.search(line)
        if m:
            ops.append(_reduce_or_scan(m.group(1), line, lines, i, defs, aliases))
        elif _DOT.search(line):
            ops.append(_dot(line, defs, aliases))
    return [op for op in ops if op is not None]


def _places(line: str, defs: dict) -> tuple:
    m = _TRAIL_LOC.search(line)
    found = _loc_places(m.group(1), defs) if m else []
    places = frozenset(p for f, ln, _ in found for p in (_place(f, ln), (os.path.basename(f), ln)))
    user = next(((f, ln, c) for f, ln, c in found if "triton/language" not in f.replace(os.sep, "/")), None)
    return places, user


def _reduce_or_scan(kind: str, line: str, lines: list, i: int, defs: dict, aliases: dict) -> Optional[Op]:
    attrs = line[line.find("<{"):]
    axis = re.search(r"axis\s*=\s*(-?\d+)", attrs)
    reverse = re.search(r"reverse\s*=\s*(true|false)", attrs)
    end = next((j for j in range(i + 1, len(lines)) if lines[j].lstrip().startswith("}) :")), None)
    if axis is None or end is None:
        return None
    arith = [re.search(r"=\s*arith\.(\w+)", ln) for ln in lines[i + 1:end]]
    arith = [a.group(1) for a in arith if a]
    shape, element, encoding = _operand_type(lines[end][lines[end].index("("):])
    places, user = _places(lines[end], defs)
    return Op(kind, int(axis.group(1)), bool(reverse and reverse.group(1) == "true"), shape, element,
              parse_layout(encoding, aliases) if encoding else None, arith[0] if len(arith) == 1 else None,
              places, user)


def _dot(line: str, defs: dict, aliases: dict) -> Optional[Op]:
    types = line[line.rfind(" : ") + 3:] if " : " in line else ""
    operands = re.findall(r"(?:tensor|!ttg\.memdesc)<([\dx]+)x(\w+)", types)
    shape, element, encoding = _operand_type(types[types.find("->"):] if "->" in types else types)
    layout = parse_layout(encoding, aliases) if encoding else None
    version = (layout or {}).get("versionMajor")
    instruction = "wgmma" if "warp_group_dot" in line else ("mma.sync" if version == 2 else
                                                             "wgmma" if version == 3 else "fma")
    extra = {"instruction": instruction, "versionMajor": version, "instrShape": (layout or {}).get("instrShape"),
             "warpsPerCTA": (layout or {}).get("warpsPerCTA"),
             "a": operands[0][1] if len(operands) > 0 else None, "b": operands[1][1] if len(operands) > 1 else None}
    places, user = _places(line, defs)
    return Op("dot", 0, False, shape, element, layout, None, places, user, extra)
