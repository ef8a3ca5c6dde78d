"""How deep an import of the recorder reaches: the longest chain of module-level imports among triton_trace's
modules that starts in record/. Every link is a module that loads before the one above it can; a short
chain keeps the recorder's layers few, and a change at the bottom of one from reaching through many
modules. The chain is kept at most 8 modules. Imports inside functions load at call time and are not
links; neither are imports under ``if TYPE_CHECKING:``."""
from __future__ import annotations

import ast
import functools
import os

from helpers.paths import ROOT

PKG = os.path.join(ROOT, "triton_trace")
LIMIT = 8


def _module_name(rel: list) -> str:
    return ".".join(["triton_trace"] + (rel[:-1] if rel[-1] == "__init__" else rel))


def _files():
    """(path, module name, the package relative imports resolve against)."""
    for folder, _, files in os.walk(PKG):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, PKG)[:-3].split(os.sep)
                yield path, _module_name(rel), ["triton_trace"] + rel[:-1]


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(tree) -> list:
    """The import statements that run when the module loads: the module body and its classes, ifs, trys and
    withs, but not function bodies and not ``if TYPE_CHECKING:``."""
    found = []

    def visit(stmts):
        for node in stmts:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, None) or [])
                for part in getattr(node, "handlers", None) or getattr(node, "cases", None) or []:
                    visit(part.body)
    visit(tree.body)
    return found


def import_graph(sources: dict = None) -> dict:
    """module -> the triton_trace modules its module-level imports load (a name imported from a package is
    the submodule when there is one, else the package). ``sources``: module -> (text, package) instead of
    the files on disk, for the self-test."""
    if sources is None:
        sources = {mod: (open(path, encoding="utf-8").read(), pkg) for path, mod, pkg in _files()}
    modules = set(sources)
    graph = {}
    for me, (text, pkg) in sources.items():
        edges = set()
        for node in module_level_imports(ast.parse(text)):
            if isinstance(node, ast.ImportFrom):
                base = (pkg[:len(pkg) - (node.level - 1)] if node.level else []) + \
                    (node.module.split(".") if node.module else [])
                target = ".".join(base)
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    edges.add(sub if sub in modules else target)
            else:
                edges |= {a.name for a in node.names}
        # a submodule naming its own package's __init__ is how a package re-exports, not a deeper link
        graph[me] = {e for e in edges if e in modules and e != me and not me.startswith(e + ".")}
    return graph


def longest_chain(graph: dict, start_prefix: str) -> list:
    """The longest simple path (as modules) starting at a module under ``start_prefix``; the graph has no
    circles (tests/project/test_architecture.py), so a memoised depth-first search is exact."""
    @functools.lru_cache(maxsize=None)
    def deepest(v, visiting=frozenset()):
        best = [v]
        for w in sorted(graph.get(v, ())):
            if w in visiting:
                raise AssertionError(f"import circle through {v} and {w}")
            tail = deepest(w, visiting | {v})
            if len(tail) + 1 > len(best):
                best = [v] + tail
        return best
    starts = [m for m in sorted(graph) if m.startswith(start_prefix)]
    return max((deepest(m) for m in starts), key=len, default=[])


def test_the_longest_import_chain_from_record_is_short():
    chain = longest_chain(import_graph(), "triton_trace.record")
    print(f"longest chain ({len(chain)} modules):\n  " + "\n  -> ".join(chain))
    assert len(chain) <= LIMIT, f"{len(chain)} modules (limit {LIMIT}):\n  " + "\n  -> ".join(chain)


def test_the_chain_counts_module_level_imports_only():
    """A lazy import in a function is no link; a relative import and a ``from package import submodule``
    are; a submodule naming its package's __init__ is not."""
    sources = {
        "triton_trace.record": ("", ["triton_trace", "record"]),
        "triton_trace.record.a": ("from . import b\nfrom .. import record\n", ["triton_trace", "record"]),
        "triton_trace.record.b": ("from .c import x\ndef f():\n    from . import d\n", ["triton_trace", "record"]),
        "triton_trace.record.c": ("import triton_trace.model\nx = 1\n", ["triton_trace", "record"]),
        "triton_trace.record.d": ("", ["triton_trace", "record"]),
        "triton_trace.model": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .record import d\n",
                               ["triton_trace", "model"]),
    }
    chain = longest_chain(import_graph(sources), "triton_trace.record")
    assert chain == ["triton_trace.record.a", "triton_trace.record.b", "triton_trace.record.c", "triton_trace.model"]
