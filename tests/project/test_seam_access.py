"""The seam is the only door to Triton's interpreter: no module outside triton_trace/record/interp/ imports
``triton.runtime.interpreter`` or ``triton._C``, or touches a private name of ``triton.language`` (an
underscored attribute, a name record/interp/seams.py's ``PRIVATE`` lists under a ``triton.language`` module).
They reach the interpreter's objects through record/interp/access.py, so a Triton release that moves one
is fixed in one folder.

The other private names ``PRIVATE`` lists (the compiler, the backends, the jit and autotune classes, the
driver slot) belong to seams of their own, each named in ``OTHER_SEAMS`` with what it does there; a module
not in that table touches none of them. Imports inside functions count: a lazy import is a door too."""
from __future__ import annotations

import ast
import os
import sys

from helpers.paths import ROOT

PKG = os.path.join(ROOT, "triton_trace")
SEAM = ("record", "interp")
INTERP_ONLY = ("triton.runtime.interpreter", "triton._C", "triton._")     # (triton._C, triton._internal_testing)

# module (below triton_trace/, without .py) -> why it may touch the compiler's, backends' or runtime's
# private names that PRIVATE lists outside the interpreter
OTHER_SEAMS = {
    "compiled/toolchain": "the compiler seam: every touch of Triton's compiler (ASTSource, make_backend, GPUTarget, "
                          "the launcher's argument binder)",
    "record/autotune": "picks an autotune config without benchmarking: compiles a config for the GPU (the "
                       "compiler's front end, GPUTarget, the launcher's binder) to drop those Triton's autotuner drops",
    "suite/driver": "the stub CUDA driver of the redirect: DriverBase, GPUTarget, the CUDA backend's type table",
    "suite/bench": "do_bench through the active driver's benchmarker",
    "suite/kernelsource": "a library's kernel source rewrite also replaces jit.fn (JITFunction._unsafe_update_src)",
    "errors": "Triton's CompilationError is the base of the errors a kernel's compile failure raises",
}


def _files():
    for folder, _, files in os.walk(PKG):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                yield path, os.path.relpath(path, PKG)[:-3].split(os.sep)


def touched(tree) -> set:
    """Every dotted Triton name one module reaches: what it imports (``module.name``), and each attribute
    chain rooted at a name bound to a Triton module or object (``tl.standard._sum_combine``)."""
    aliases, found = {"tl": "triton.language"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "triton":
            found.add(node.module)
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                found.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "triton":
                    found.add(a.name)
                    aliases[a.asname or "triton"] = a.name if a.asname else "triton"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in aliases and not any(p.startswith("__") for p in chain):
            found.add(".".join([aliases[base.id]] + chain[::-1]))
    return found


def _private_language(name: str) -> bool:
    """An underscored name inside triton.language (``triton.language.standard._sum_combine``)."""
    parts = name.split(".")
    return parts[:2] == ["triton", "language"] and any(p.startswith("_") and not p.startswith("__")
                                                       for p in parts[2:])


def violations(tree, private: dict, other_seam: bool) -> list:
    """The names of ``touched(tree)`` a module outside record/interp/ may not reach: the interpreter,
    ``triton._C``, triton.language's private names, and (unless ``other_seam``) every other name in
    ``private`` (seams.PRIVATE)."""
    interp_names = {f"{m}.{n}" for m, names in private.items() for n in names
                    if m.startswith(INTERP_ONLY) or m.startswith("triton.language")}
    other_names = {f"{m}.{n}" for m, names in private.items() for n in names} - interp_names
    out = []
    for name in sorted(touched(tree)):
        if name.startswith(INTERP_ONLY) or _private_language(name) or \
                any(name == p or name.startswith(p + ".") for p in interp_names):
            out.append(name)
        elif not other_seam and any(name == p or name.startswith(p + ".") for p in other_names):
            out.append(name)
    return out


def _private() -> dict:
    sys.path.insert(0, ROOT)
    from triton_trace.record.interp import seams
    return seams.PRIVATE


def test_only_the_seam_reaches_the_interpreter():
    private, offenders, seen = _private(), [], 0
    for path, rel in _files():
        if tuple(rel[:2]) == SEAM:
            continue
        seen += 1
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for name in violations(tree, private, "/".join(rel) in OTHER_SEAMS):
            offenders.append(f"{'/'.join(rel)}: {name}")
    assert seen > 100
    assert not offenders, ("reach these through record/interp/access.py (or list a new seam in OTHER_SEAMS): "
                           + "; ".join(offenders))


def test_every_other_seam_still_touches_a_private_name():
    """A module that no longer needs its exception leaves the table, so the table stays the list of doors."""
    private, idle = _private(), []
    for rel in OTHER_SEAMS:
        path = os.path.join(PKG, *rel.split("/")) + ".py"
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        names = {f"{m}.{n}" for m, ns in private.items() for n in ns}
        if not any(t == p or t.startswith(p + ".") for t in touched(tree) for p in names):
            idle.append(rel)
    assert not idle, f"OTHER_SEAMS lists modules that touch no private Triton name: {idle}"


def test_the_scan_sees_each_way_through_the_door():
    """Imports of the interpreter and of triton._C, at module level or in a function, an interpreter name
    through ``import triton``, an underscored language name, and a listed name outside its seams."""
    private = {"triton.runtime.interpreter": {"TensorHandle": ""}, "triton.runtime.jit": {"JITFunction": ""},
               "triton.language.standard": {"_sum_combine": ""}}
    src = ("import triton\nimport triton.language as tl\n"
           "from triton.runtime.interpreter import TensorHandle\n"
           "from triton.runtime.jit import JITFunction\n"
           "def f(x):\n"
           "    from triton._C.libtriton import ir\n"
           "    return triton.runtime.interpreter.interpreter_builder, tl.standard._sum_combine, tl.core.tensor\n")
    found = violations(ast.parse(src), private, other_seam=False)
    assert found == ["triton._C.libtriton", "triton._C.libtriton.ir", "triton.language.standard._sum_combine",
                     "triton.runtime.interpreter", "triton.runtime.interpreter.TensorHandle",
                     "triton.runtime.interpreter.interpreter_builder", "triton.runtime.jit.JITFunction"], found
    # a seam of the compiler or driver may use the jit's names, never the interpreter's
    assert "triton.runtime.jit.JITFunction" not in violations(ast.parse(src), private, other_seam=True)
    clean = "import triton.language as tl\nfrom ..interp.access import TensorHandle\nx = tl.core.tensor\n"
    assert violations(ast.parse(clean), private, other_seam=False) == []
