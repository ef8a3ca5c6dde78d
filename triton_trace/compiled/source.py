"""The traced kernel as a module of its own: its source, its @triton.jit helpers, the imports and constants it
names (recorded at trace time, record/kernelmodule.py), with a map from the module's lines back to the
user's files. A reproducer script embeds it; a compile for another target imports it.

A trace file comes from anywhere, so the module is checked statement by statement before it is written or
imported: imports, assignments of literals, and function definitions whose defaults and annotations are
plain names or constants. Nothing else runs at import time. ``allowed_imports`` narrows the modules further
where nobody asked for the code to run (the web viewer compiling a loaded trace). With ``strict``, every
function body must also pass bodycheck.py's allowlist, since Triton's code generator evaluates the bodies
when it compiles them (the caller asks for it where the launch came from a file).
"""
from __future__ import annotations

import ast
import builtins
import keyword
from dataclasses import dataclass

from ..errors import TraceUsageError
from ..model.kernelmodule import source_from_def
from . import bodycheck

HEADER = "import triton\nimport triton.language as tl\n"
SAFE_PACKAGES = frozenset({"triton", "math", "numpy", "torch"})
_CALLS = {("tl", "constexpr"), ("tl", "dtype"), (None, "float")}
# Names the checked calls and the added decorator resolve through: nothing in the module may rebind them,
# and no other name may shadow a builtin (``float = eval`` would turn a checked ``float("...")`` into eval).
_CANONICAL = {"triton": ("import", "triton", None), "tl": ("import", "triton.language", "tl")}
RESERVED = frozenset(dir(builtins)) | {"tl", "triton"}


def _identifier(name) -> bool:
    return isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


def _binds(node) -> list:
    """(bound name, module, asname) of an import statement."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name, a.asname) for a in node.names]
    return [(a.asname or a.name, node.module or "", a.asname) for a in node.names]


@dataclass(frozen=True)
class Span:
    """Lines ``first``..``last`` of the module (the added ``@triton.jit``, then the function from its
    ``def`` on, at module line ``first + 1``) come from ``file``, whose ``def`` is at its line ``line``."""
    first: int
    last: int
    file: str
    line: int
    name: str


@dataclass(frozen=True)
class AssembledModule:
    """The module's text, assembled from ``Launch.module`` (model.KernelModule) and the kernel's source."""
    text: str
    kernel: str             # the kernel's function name in the module
    spans: tuple            # Span, one per function
    missing: tuple          # model.Unresolved: names the kernel uses that could not be carried over, with why

    def original(self, line: int) -> tuple:
        """(file, line) in the user's source of a line of the module, or (None, 0)."""
        for s in self.spans:
            if s.first <= line <= s.last:
                return s.file, s.line + max(line - s.first - 1, 0)
        return None, 0


def _literal_ok(node) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_literal_ok(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _literal_ok(node.operand)
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        f = node.func
        key = (f.value.id, f.attr) if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else \
            (None, f.id) if isinstance(f, ast.Name) else None
        return key in _CALLS and _literal_ok(node.args[0])
    return False


def constant_node(expr: str, name: str):
    """The parsed expression of a recorded argument, only when it is a constant (the trace file may come from
    anyone); a TraceUsageError naming the argument otherwise."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        node = None
    if node is None or not _literal_ok(node):
        raise TraceUsageError(f"argument '{name}': the recorded value {expr[:60]!r} is not a constant")
    return node


def _annotation_ok(node) -> bool:
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    return isinstance(node, ast.Attribute) and _annotation_ok(node.value)


def _jit_decorator(d) -> bool:
    return isinstance(d, ast.Attribute) and d.attr == "jit" and isinstance(d.value, ast.Name) and d.value.id == "triton"


def check(text: str, what: str, allowed_imports=None, decorated: bool = False, aliases: bool = False) -> ast.Module:
    """Parse ``text`` and refuse any statement that would run code on import (see the module docstring):
    imports (never rebinding ``triton``, ``tl`` or a builtin), assignments of literals to fresh names,
    functions whose defaults are literals and whose annotations are names or attribute chains. A function
    may carry a decorator only when ``decorated`` (the assembled module), and then only ``@triton.jit``;
    with ``aliases``, a new name may also be bound to a function defined above it."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise TraceUsageError(f"{what}: line {e.lineno} is not valid Python ({e.msg})") from None
    except (RecursionError, MemoryError):       # CPython's parser on crafted, deeply nested expressions
        raise TraceUsageError(f"{what}: the source nests expressions too deeply to parse") from None
    defined = set()
    for node in tree.body:
        bad = None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level:
                bad = "a relative import"
            elif any(a.name == "*" for a in node.names):
                bad = "a star import"
            elif allowed_imports is not None and any(m.split(".")[0] not in allowed_imports for m in mods):
                bad = f"an import of {mods} (allowed here: {sorted(allowed_imports)})"
            for name, module, asname in _binds(node):
                canon = _CANONICAL.get(name)
                if name in RESERVED and not (canon and isinstance(node, ast.Import) and (module, asname) == canon[1:]):
                    bad = f"an import that rebinds '{name}'"
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            alias = aliases and isinstance(node.value, ast.Name) and node.value.id in defined
            if len(names) != len(node.targets) or not (_literal_ok(node.value) or alias) or \
                    any(n in RESERVED or not _identifier(n) for n in names):
                bad = "an assignment of something other than a constant to a new name"
        elif isinstance(node, ast.FunctionDef):
            a = node.args
            every = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
            decorators_ok = (not node.decorator_list) or (decorated and len(node.decorator_list) == 1 and
                                                           _jit_decorator(node.decorator_list[0]))
            if not all(_literal_ok(d) for d in a.defaults + [d for d in a.kw_defaults if d is not None]) or \
                    not all(_annotation_ok(x.annotation) for x in every) or node.returns is not None or \
                    not decorators_ok or node.name in RESERVED or not _identifier(node.name):
                bad = ("a function whose name, defaults, annotations or decorators are not plain (only "
                       "@triton.jit, added here, is allowed)")
            defined.add(node.name)
        else:
            bad = f"a {type(node).__name__} statement"
        if bad:
            raise TraceUsageError(f"{what}: line {node.lineno} is {bad}; a kernel module holds only imports, "
                                  f"constants and functions")
    return tree


def _function(source: str, what: str) -> tuple:
    """(the function's text with @triton.jit above it, its name), checked to be one function definition."""
    tree = check(source, what)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].decorator_list:
        raise TraceUsageError(f"{what}: the recorded source is not one undecorated function definition")
    return "@triton.jit\n" + source.rstrip("\n") + "\n", tree.body[0].name


def kernel_module(launch, allowed_imports=None, strict: bool = False) -> AssembledModule:
    """The module that defines ``launch``'s kernel (and its helpers) as @triton.jit functions; with ``strict``,
    refused unless every function body passes ``bodycheck.check_module``."""
    mod = launch.module
    if mod is None:
        raise TraceUsageError(f"launch of '{launch.kernel_name}' was recorded without its module (an older "
                              f"trace, or a synthetic one): trace it again with this version of triton_trace")
    where = f"launch of '{launch.kernel_name}'"
    parts = [HEADER]
    parts += [line + "\n" for line in mod.imports if line + "\n" not in HEADER]
    parts += [line + "\n" for line in mod.constants]
    check("".join(parts), f"{where}: its imports and constants", allowed_imports)
    spans, line = [], sum(p.count("\n") for p in parts) + 1
    body, _ = source_from_def(launch.source)
    functions = [(h.source, h.file, h.line, h.name, h.def_name) for h in mod.helpers]
    functions.append((body, launch.source_file, launch.source_line, launch.kernel_name, launch.kernel_name))
    kernel = None
    for src, file, first, name, def_name in functions:
        text, found = _function(src, f"{where}: the source of '{def_name}'")
        if found != def_name:
            raise TraceUsageError(f"{where}: the source recorded for '{def_name}' defines '{found}'")
        parts.append("\n\n" + text)
        line += 2
        spans.append(Span(line, line + text.count("\n") - 1, file, first, def_name))
        line += text.count("\n")
        if name != def_name:
            if not _identifier(name) or name in RESERVED:
                raise TraceUsageError(f"{where}: '{str(name)[:60]}' is not a name a helper can have")
            parts.append(f"{name} = {def_name}\n")
            line += 1
        kernel = found
    text = "".join(parts)
    check(text, f"{where}: the assembled module", allowed_imports, decorated=True, aliases=True)
    if strict:
        bodycheck.check_module(text, where)
    return AssembledModule(text, kernel, tuple(spans), mod.missing)
