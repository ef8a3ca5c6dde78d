"""An allowlist check of every function body of a kernel module rebuilt from a trace file (source.py).

Triton's code generator evaluates a kernel body's names and attribute chains in the compiling process, and
lets any chain through that starts at a module: ``tl.core.knobs.os.system("...")`` in a crafted file's kernel
runs a shell command when the file is analysed. ``source.check`` sees only top-level statements, so before a
file's module is imported or compiled, every node of every body must be something a Triton kernel uses:

- statements and expressions of the language: no imports, lambdas, comprehensions, nested functions,
  try/raise, global, walrus, dict or set displays (the code generator has none), deletions, or assignments
  to attributes. It takes tuple comprehensions and walrus, but no kernel we trace uses them, and both bind
  names out of the statement order this check follows;
- names: the function's parameters and locals, the module's functions, constants and imports, and the
  builtins Triton's code generator handles (``BUILTINS``); none starting with ``__``;
- attribute chains: no attribute starting with ``_``. A chain rooted at an import walks only through the
  language's modules (``LANGUAGE_MODULES``, and Python's ``math`` for constexpr arithmetic) to one of their
  public members, and a module is never used bare. A chain on any other value names only public attributes
  of the language's values (tensors, dtypes, constexprs, tensor descriptors): no jit function's ``.fn``.

The allowlists come from the installed Triton through public names and ``dir()`` (``allowlists``).
"""
from __future__ import annotations

import ast
import importlib
import math
import numbers
import types
from dataclasses import dataclass
from functools import lru_cache

from ..errors import TraceUsageError

# the modules a kernel reaches functions through; one this Triton release lacks is skipped
LANGUAGE_MODULES = ("triton.language", "triton.language.math", "triton.language.extra", "triton.language.extra.cuda",
                    "triton.language.extra.cuda.libdevice", "triton.language.extra.libdevice",
                    "triton.language.target_info")
# the top-level package is the host API (jit, compile, knobs, runtime): a body needs only these
TRITON_MEMBERS = ("cdiv", "next_power_of_2")
# builtins the code generator resolves itself; its getattr and hasattr are left out, as they name attributes
# by strings the attribute rules cannot see
BUILTINS = frozenset({"range", "len", "list", "int", "float", "isinstance", "print", "min", "max"})
# attributes of language values that hand out or take the compiler's IR objects: no kernel touches them
IR_ATTRIBUTES = frozenset({"handle", "to_ir"})

STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.While, ast.If, ast.Return, ast.Pass,
              ast.Break, ast.Continue, ast.Assert, ast.Expr, ast.With)
EXPRESSIONS = (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Constant,
               ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Starred, ast.JoinedStr, ast.FormattedValue)
TOKENS = (ast.operator, ast.boolop, ast.unaryop, ast.cmpop, ast.Load)
VALUE = None            # a member rule: further attributes follow the value rule (dtypes, constexprs)
# what a name is (an import is ("module", path), ("member", rule) or ("foreign", dotted))
LOCAL, FUNCTION, CONSTANT, BUILTIN = ("local",), ("function",), ("constant",), ("builtin",)


@dataclass(frozen=True)
class Allowlists:
    modules: dict       # dotted module path -> {public member: VALUE, or the attribute names it may take}
    values: frozenset   # attributes allowed on every other value


def _rule(obj, tl):
    """What may follow a member: a dtype or constexpr takes value attributes, a class (PropagateNan) its own
    enumerated values, anything else nothing."""
    if isinstance(obj, (tl.dtype, tl.constexpr)):
        return VALUE
    if isinstance(obj, type):
        return frozenset(n for n in dir(obj) if not n.startswith("_") and isinstance(getattr(obj, n, None), obj))
    return frozenset()


def _members(module, origin: str, tl) -> dict:
    """Public non-module members of ``module``. ``triton.language`` declares its surface in ``__all__``; the
    other modules also hold what they imported (typing, functools, the driver), so those keep only what is
    defined under ``origin``."""
    out = {}
    for name in (module.__all__ if module is tl else dir(module)):
        obj = getattr(module, name, None)
        if name.startswith("_") or obj is None or isinstance(obj, types.ModuleType):
            continue
        home = getattr(obj, "__module__", None)
        if module is tl or isinstance(obj, (tl.dtype, tl.constexpr)) or \
                (isinstance(obj, numbers.Real) and not isinstance(obj, bool)) or \
                (isinstance(home, str) and (home == origin or home.startswith(origin + "."))):
            out[name] = _rule(obj, tl)
    return out


def _value_attributes(tl) -> frozenset:
    """Public attributes of the language's values, instance attributes included (``x.dtype``, ``c.value``)."""
    block = tl.block_type(tl.float32, [16])
    samples = [tl.float32, tl.pointer_type(tl.float32), block, tl.constexpr(1), tl.tensor, tl.tensor_descriptor]
    try:
        samples += [tl.tensor(None, block), tl.tensor_descriptor(None, [], [], block)]
    except (TypeError, AttributeError):       # another release's constructors: the classes' names stay
        pass
    return frozenset({n for s in samples for n in dir(s) if not n.startswith("_")} - IR_ATTRIBUTES)


@lru_cache(maxsize=None)
def allowlists() -> Allowlists:
    import triton
    import triton.language as tl
    modules = {"triton": {n: frozenset() for n in TRITON_MEMBERS if hasattr(triton, n)},
               "math": _members(math, "math", tl)}
    for path in LANGUAGE_MODULES:
        try:
            module = importlib.import_module(path)     # fixed names of Triton's own modules, not the file's
        except ImportError:
            continue
        modules[path] = _members(module, "triton.language", tl)
    return Allowlists(modules, _value_attributes(tl))


def _resolve(dotted: str) -> tuple:
    """What an import binds: ("module", path), ("member", rule) or ("foreign", dotted)."""
    modules = allowlists().modules
    parent, _, name = dotted.rpartition(".")
    if dotted in modules:
        return ("module", dotted)
    return ("member", modules[parent][name]) if name in modules.get(parent, ()) else ("foreign", dotted)


def _module_scope(tree: ast.Module, check) -> dict:
    """Name -> what it is at module level: an import's _resolve, ("function",) or ("constant",)."""
    scope = {}
    for node in tree.body:
        check.current = node
        if isinstance(node, ast.Import):            # "import a.b" binds a, "import a.b as c" binds a.b
            for a in node.names:
                scope[a.asname or a.name.split(".")[0]] = _resolve(a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                dotted = f"{node.module}.{a.name}" if node.module and not node.level else "."
                scope[a.asname or a.name] = _resolve(dotted)
        elif isinstance(node, ast.Assign):
            check.scope = scope
            check.expression(node.value)
            alias = isinstance(node.value, ast.Name) and scope.get(node.value.id) == FUNCTION
            for t in node.targets:
                if not isinstance(t, ast.Name):
                    check.refuse(t, "an assignment to something other than a name")
                scope[t.id] = FUNCTION if alias else CONSTANT
        elif isinstance(node, ast.FunctionDef):
            scope[node.name] = FUNCTION
        else:
            check.refuse(node, f"the top-level {type(node).__name__} statement")
    return scope                    # a name starting with "__" stays unusable: the name rule refuses it


class _Checker:
    """Walks one module; ``refuse`` raises naming the function, the line and the construct."""

    def __init__(self, what: str, lines: list):
        self.what, self.lines = what, lines
        self.scope, self.locals, self.function, self.current = {}, set(), None, None

    def refuse(self, node, construct: str):
        line = getattr(node, "lineno", None) or getattr(self.current, "lineno", 0)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else \
            ast.unparse(self.current or node).splitlines()[0]
        where = f"function '{self.function}'" if self.function else "the module"
        raise TraceUsageError(f"{self.what}: {where}, line {line} `{text[:120]}`: {construct} is not allowed; a kernel "
                              f"body may use only Triton language operations on its own names (compiled/bodycheck.py)")

    def function_def(self, node: ast.FunctionDef) -> None:
        self.function, self.current, self.locals = node.name, node, set()
        d = node.decorator_list
        if not (len(d) == 1 and isinstance(d[0], ast.Attribute) and d[0].attr == "jit" and
                isinstance(d[0].value, ast.Name) and self.scope.get(d[0].value.id) == ("module", "triton")):
            self.refuse(node, "a decorator other than @triton.jit")
        a = node.args
        params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
        for x in [p.annotation for p in params] + a.defaults + a.kw_defaults + [node.returns]:
            if x is not None:
                self.expression(x)          # evaluated at import, in the module's scope
        stores = [n for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for p, name in [(p, p.arg) for p in params] + [(n, n.id) for n in stores]:
            self.bind(p, name)          # before the walk: a local is local in the whole body
        self.locals = {p.arg for p in params} | {n.id for n in stores}
        for stmt in node.body:
            self.statement(stmt)

    def bind(self, node, name: str) -> None:
        if name.startswith("__"):
            self.refuse(node, f"the name '{name}'")
        if name in self.scope and self.scope[name] != CONSTANT:
            self.refuse(node, f"a local '{name}' that hides the module's import or function of that name")

    def statement(self, node) -> None:
        outer, self.current = self.current, node
        if not isinstance(node, STATEMENTS):
            self.refuse(node, f"the {type(node).__name__} statement")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if hasattr(node, "target") else []
        for t in targets:
            self.target(t)
        for item in getattr(node, "items", ()):     # with: the context managers, then what they bind
            self.expression(item.context_expr)
            if item.optional_vars is not None:
                self.target(item.optional_vars)
        for field, value in ast.iter_fields(node):
            if field in ("targets", "target", "items"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.stmt):
                    self.statement(child)
                elif isinstance(child, ast.AST):
                    self.expression(child)
        self.current = outer

    def target(self, node) -> None:
        if isinstance(node, ast.Name):
            return                      # bound names were checked before the walk
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                self.target(e)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        elif isinstance(node, ast.Subscript):
            self.expression(node.value)
            self.expression(node.slice)
        else:
            self.refuse(node, f"an assignment to {ast.unparse(node)!r} (a {type(node).__name__})")

    def expression(self, node) -> None:
        if isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, EXPRESSIONS + TOKENS):
            for child in ast.iter_child_nodes(node):
                self.expression(child)
        else:
            self.refuse(node, f"the {type(node).__name__} expression `{ast.unparse(node)[:60]}`")

    def name(self, node: ast.Name, root: bool = False):
        kind, n = None, node.id
        if not n.startswith("__") and isinstance(node.ctx, ast.Load):    # Python's order of scopes
            kind = LOCAL if n in self.locals else self.scope.get(n, BUILTIN if n in BUILTINS else None)
        if kind is None or kind[0] == "foreign":
            self.refuse(node, f"the name '{node.id}' (not a parameter, local, or function, constant or Triton import "
                              f"of the module, nor a builtin Triton handles: {', '.join(sorted(BUILTINS))})")
        if kind[0] == "module" and not root:
            self.refuse(node, f"the module '{node.id}' used as a value (it may only start a chain such as tl.load)")
        return kind

    def attribute(self, node: ast.Attribute) -> None:
        attrs, root = [], node
        while isinstance(root, ast.Attribute):
            attrs.insert(0, root.attr)
            root = root.value
        private = next((a for a in attrs if a.startswith("_")), None)
        if private is not None:
            self.refuse(node, f"the attribute '{private}' (no attribute may start with '_')")
        if not isinstance(root, ast.Name):
            self.expression(root)
            return self.rest(node, VALUE, attrs, ast.unparse(root)[:40])
        kind = self.name(root, root=True)
        if kind[0] == "module":
            return self.module_chain(node, kind[1], root.id, attrs)
        if kind in (FUNCTION, BUILTIN):
            self.refuse(node, f"'{root.id}.{attrs[0]}', an attribute of the function '{root.id}'")
        self.rest(node, kind[1] if kind[0] == "member" else VALUE, attrs, root.id)

    def module_chain(self, node, path: str, shown: str, attrs: list) -> None:
        modules = allowlists().modules
        for i, a in enumerate(attrs):
            if f"{path}.{a}" in modules:
                path, shown = f"{path}.{a}", f"{shown}.{a}"
                continue
            if a not in modules[path]:
                self.refuse(node, f"'{shown}.{a}' ('{a}' is not a public member of {path} that a kernel may use)")
            return self.rest(node, modules[path][a], attrs[i + 1:], f"{shown}.{a}")
        self.refuse(node, f"the module '{shown}' used as a value")

    def rest(self, node, rule, attrs: list, shown: str) -> None:
        """The attributes after ``shown``: under VALUE any public attributes of the language's values, else (a
        member of a module) none, or one of ``rule`` (an enumeration's values)."""
        bad = next((a for a in attrs if a not in allowlists().values), None) if rule is VALUE else None
        if bad is not None:
            self.refuse(node, f"the attribute '{bad}' of '{shown}' (not a public attribute of Triton's tensors, "
                              f"dtypes, constexprs or tensor descriptors)")
        if rule is not VALUE and attrs and (len(attrs) > 1 or attrs[0] not in rule):
            self.refuse(node, f"'{shown}.{'.'.join(attrs)}' (an attribute of a language function or class)")


def check_module(tree_or_text, what: str) -> None:
    """Refuse, with a TraceUsageError naming the function, line and construct, an assembled kernel module
    (source.kernel_module's text) any of whose function bodies steps outside the allowlists above."""
    text = tree_or_text if isinstance(tree_or_text, str) else None
    check = _Checker(what, text.splitlines() if text is not None else [])
    try:
        tree = ast.parse(text) if text is not None else tree_or_text
        check.scope = _module_scope(tree, check)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                check.function_def(node)
    except SyntaxError as e:
        raise TraceUsageError(f"{what}: line {e.lineno} is not valid Python ({e.msg})") from None
    except (RecursionError, MemoryError):       # the parser, or this walk, on crafted deeply nested expressions
        raise TraceUsageError(f"{what}: the module nests expressions too deeply to check") from None
