"""The rules of ../shared/DESIGN.md a machine can check, on the source (function-level imports included):
no stage imports a later one, nothing outside view/ imports Flask or plotly, no two modules import each
other (directly or around a circle), every private Triton name is listed in the seam's table (record/interp/
seams.py), no silent excepts, no module-level state in the views, error classes in errors.py; and the tests'
own layout: every test module in a stage folder, shared code in tests/helpers and tests/kernels, no test module
imported by another."""
from __future__ import annotations

import ast
import os
import subprocess
import re
import sys

from helpers.paths import ROOT, TESTS

PKG = os.path.join(ROOT, "triton_trace")
# stage of each top-level part of the package; a module may import its own stage or earlier ones
STAGES = {"errors": 0, "numerics": 0, "cachedir": 0, "native": 0, "model": 1, "store": 2, "record": 3, "compiled": 4, "analysis": 4,
          "repro": 5, "view": 5, "suite": 5}
TOP = {"__init__", "__main__", "cli", "commands", "pytest_plugin", "fuzzing", "gpucheck"}   # the public API, the command line and the pytest plugin wire every stage


def _module_imports(path: str, package: list) -> set:
    """(top-level name, second part) of every module one file imports, relative imports resolved against
    ``package`` (the file's package, e.g. ["triton_trace", "record", "interp"])."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                target = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                if len(target) == 1:          # "from . import x" at the package's top: x is a submodule
                    found |= {(target[0], a.name) for a in node.names}
                else:
                    found.add((target[0], target[1]))
            elif node.module:
                parts = node.module.split(".")
                found.add((parts[0], parts[1] if len(parts) > 1 else ""))
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                found.add((parts[0], parts[1] if len(parts) > 1 else ""))
    return found


def _files():
    """(path, parts below triton_trace, the file's package)."""
    for folder, _, files in os.walk(PKG):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, PKG)[:-3].split(os.sep)
                yield path, rel, ["triton_trace"] + rel[:-1]


def test_no_stage_imports_a_later_one():
    offenders, seen = [], 0
    for path, rel, package in _files():
        if rel[0] in TOP:
            continue
        seen += 1
        mine = STAGES[rel[0]]
        for top, sub in _module_imports(path, package):
            if top == "triton_trace" and sub in STAGES and STAGES[sub] > mine:
                offenders.append(f"{'/'.join(rel)} imports {sub}")
    assert seen > 30 and not offenders, offenders


def _import_targets(path: str, package: list) -> set:
    """Every module path (a tuple of names) one file imports from, relative imports resolved; for
    ``from pkg import x`` both ``pkg`` and ``pkg.x`` (x may be a submodule)."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.ImportFrom):
            base = (package[:len(package) - (node.level - 1)] if node.level else []) + \
                (node.module.split(".") if node.module else [])
            found.add(tuple(base))
            found |= {tuple(base + [a.name]) for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {tuple(a.name.split(".")) for a in node.names}
    return found


# analysis/ by role: the memory model and the checks are independent; advice may use the memory model
ANALYSIS_MAY_NOT = {"memory": {"checks", "advice"}, "checks": {"memory", "advice"}, "advice": {"checks"}}


def test_analysis_roles_keep_apart():
    offenders, seen = [], 0
    for path, rel, package in _files():
        if rel[0] != "analysis" or len(rel) < 3 or rel[1] not in ANALYSIS_MAY_NOT:
            continue
        seen += 1
        for target in _import_targets(path, package):
            if target[:2] == ("triton_trace", "analysis") and len(target) > 2 \
                    and target[2] in ANALYSIS_MAY_NOT[rel[1]]:
                offenders.append(f"{'/'.join(rel)} imports analysis.{target[2]}")
    assert seen >= 15 and not offenders, offenders


def test_only_view_imports_flask_and_plotly():
    offenders = []
    for path, rel, package in _files():
        if rel[0] in ("view",) or rel[0] in TOP:
            continue
        for top, _ in _module_imports(path, package):
            if top in ("flask", "plotly", "werkzeug"):
                offenders.append(f"{'/'.join(rel)} imports {top}")
    assert not offenders, offenders


def test_recording_and_display_hooks_load_no_view_until_shown():
    code = ("import sys, torch, triton_trace\n"
            "sys.path.insert(0, 'tests')\n"
            "import kernels as K\n"
            "K.add(torch.randn(10), torch.randn(10), kernel=triton_trace.trace(K.make_add()), block=16)\n"
            "t = triton_trace.current_trace()\n"
            "assert hasattr(t, '_repr_html_') and hasattr(t.launches[0], '_repr_html_')\n"
            "print(sorted(m for m in sys.modules if m in ('flask', 'plotly', 'triton_trace.view.notebook')))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def _module_name(rel: list) -> str:
    parts = ["triton_trace"] + (rel[:-1] if rel[-1] == "__init__" else rel)
    return ".".join(parts)


def _graph() -> dict:
    """module -> the triton_trace modules it imports (a name imported from a package counts as the
    submodule when there is one, else as the package)."""
    files = list(_files())
    modules = {_module_name(rel) for _, rel, _ in files}
    graph = {}
    for path, rel, package in files:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        me = _module_name(rel)
        pkg = package if rel[-1] != "__init__" else ["triton_trace"] + rel[:-1]
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = (pkg[:len(pkg) - (node.level - 1)] if node.level else []) + \
                    (node.module.split(".") if node.module else [])
                target = ".".join(base)
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    edges.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
        graph[me] = {e for e in edges if e in modules and e != me}
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """A package's __init__ re-exporting its modules is not a circle: edges into a package's own
    __init__ from its submodules are left out."""
    graph = _graph()
    for mod, edges in graph.items():
        graph[mod] = {e for e in edges if not mod.startswith(e + ".")}
    assert len(graph) > 30
    assert _cycles(graph) == []


# --------------------------------------------------------------------------------------------------------
# the other rules of DESIGN.md that a machine can check
# --------------------------------------------------------------------------------------------------------
def _trees():
    for path, rel, package in _files():
        yield path, rel, ast.parse(open(path, encoding="utf-8").read(), path)


def _private_triton_uses(tree, private_modules) -> set:
    """Every private Triton name one module touches: names imported from a private module, attributes of
    an alias bound to one, and underscored attributes of ``triton``/``tl`` (dunders aside)."""
    aliases, used = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("triton"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                aliases[a.asname or a.name] = full
                if full not in private_modules and (full.startswith(private_modules) or a.name.startswith("_")):
                    used.add(full)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("triton"):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    aliases.setdefault("tl", "triton.language")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr.startswith("__"):
            continue
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in aliases):
            continue
        full = ".".join([aliases[base.id]] + chain[::-1])
        if any(p.startswith("__") for p in chain):
            continue
        if full.startswith(private_modules) and len(chain) == 1:
            used.add(full)
        elif chain[0].startswith("_") and all(not p.startswith("_") for p in chain[1:]):
            used.add(full)       # tl.standard._sum_combine
    return used


def test_every_private_triton_name_is_in_the_seam_table():
    """A Triton upgrade is one file to read: every private Triton name any module touches is listed in
    record/interp/seams.py's PRIVATE table (and the table lists nothing that nobody uses)."""
    sys.path.insert(0, ROOT)
    from triton_trace.record.interp import seams
    listed = {f"{mod}.{name}" for mod, names in seams.PRIVATE.items() for name in names}
    unlisted, sources = [], []
    for path, rel, tree in _trees():
        if rel[-1] == "seams":
            continue
        sources.append(open(path, encoding="utf-8").read())
        for full in sorted(_private_triton_uses(tree, seams.PRIVATE_MODULES)):
            if full not in listed:
                unlisted.append(f"{'/'.join(rel)}: {full}")
    assert not unlisted, "add these to seams.PRIVATE: " + "; ".join(unlisted)
    text = "\n".join(sources)
    stale = [f for f in listed if f.rsplit(".", 1)[-1] not in text]
    assert not stale, f"seams.PRIVATE lists names no module uses: {stale}"


def test_the_seam_table_catches_an_unlisted_name():
    """The scanner behind the rule above sees the three ways a module reaches a private name."""
    tree = ast.parse("from triton.runtime import interpreter as _ti\nimport triton.language as tl\n"
                     "from triton.runtime.jit import JITFunction\n"
                     "def f(x):\n    return _ti.new_private(x), tl.core._hidden, JITFunction")
    found = _private_triton_uses(tree, ("triton.runtime.interpreter", "triton.runtime.jit"))
    assert found == {"triton.runtime.interpreter.new_private", "triton.language.core._hidden",
                     "triton.runtime.jit.JITFunction"}


def test_no_bare_or_silent_excepts():
    """No bare ``except:`` and no ``except Exception: pass``: an error is handled or it propagates."""
    offenders = []
    for path, rel, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ExceptHandler):
                continue
            broad = node.type is None or (isinstance(node.type, ast.Name) and node.type.id in ("Exception", "BaseException"))
            silent = all(isinstance(s, ast.Pass) for s in node.body)
            if node.type is None or (broad and silent):
                offenders.append(f"{'/'.join(rel)}:{node.lineno}")
    assert not offenders, offenders


def test_the_views_keep_no_module_level_state():
    """The web app and the notebook hold their state in the app (``app.extensions``) or the output:
    a module of view/ binds no mutable container at module level except constants (UPPER_CASE)."""
    offenders = []
    mutable = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
    for path, rel, tree in _trees():
        if rel[0] != "view":
            continue
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                is_mutable = isinstance(value, mutable) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                                            and value.func.id in ("dict", "list", "set", "OrderedDict"))
                for t in targets:
                    if is_mutable and isinstance(t, ast.Name) and t.id != "__all__" and not t.id.lstrip("_").isupper():
                        offenders.append(f"{'/'.join(rel)}:{node.lineno} {t.id}")
    assert not offenders, offenders


# Exceptions that never reach a user: each is turned into one of errors.py's (or an HTTP answer) where it
# is caught. Every other exception class lives in errors.py.
INTERNAL_ERRORS = {
    "ApiError": "view/payload.py: the app answers it as a 4xx JSON error",
    "PlaneError": "view/tensormap.py: the app answers it as a 400",
    "HeaderError": "store/header.py: store/tracefile.py turns it into TraceFileError naming the file",
    "ProgramFailure": "record/executor.py: the session turns it into ProgramError",
    "DeviceAssertionFailed": "record/gpu/debugops.py: the cause of a ProgramError, as Triton raises it",
    "CliError": "cli.py: printed with exit status 2",
    "PtxUnsupported": "numerics/ptx.py: record/gpu/inlineasm.py raises it as the NotImplementedError the session "
                      "reports as UnsupportedOp",
}


def test_errors_a_user_sees_are_classes_of_errors_py():
    found = {}
    for path, rel, tree in _trees():
        if rel == ["errors"]:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception", "Failed")) or b.id == "Exception")
                    for b in node.bases):
                found[node.name] = "/".join(rel)
    assert set(found) <= set(INTERNAL_ERRORS), {k: v for k, v in found.items() if k not in INTERNAL_ERRORS}


# --------------------------------------------------------------------------------------------------------
# the tests' own layout
# --------------------------------------------------------------------------------------------------------
# test modules live one level down, in the folder of the stage they mainly test (tests/gpu: the GPU tests)
TEST_FOLDERS = {"model", "store", "record", "compiled", "analysis", "view", "cli", "suite", "project", "gpu"}
SHARED = {"helpers", "kernels"}       # what tests share: helpers by role, kernels in real files
# data and the suites some tests run in a child pytest (their test modules are not this project's)
DATA = {"scripts", "fixtures", "cuda_suite", "cuda_suite_bad", "plugin_suite", "plugin_suite_gpu", "triton_suite"}
TOP_LEVEL = {"conftest.py"}
# a test module's name, imported as a module: ``import test_x``, ``from test_x import``, ``from x import test_y``
_TEST_IMPORT_TEXT = re.compile(r"^\s*(from\s+([\w.]+\.)?test_\w+\s+import\b|import\s+([\w.]+\.)?test_\w+)", re.M)


def _test_tree_files():
    """(path relative to tests/ as a tuple of parts) of every .py file under tests/, the vendored Triton suite
    (triton_suite/release-3.6, third-party test data) left out."""
    for folder, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "release-3.6") and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield tuple(os.path.relpath(os.path.join(folder, name), TESTS).split(os.sep))


def _imports_of_test_modules(source: str, filename: str = "<test>") -> list:
    """How one file imports a test module: import statements (function-level ones too), calls of
    ``importlib.import_module``/``__import__`` with a literal name, and code in string literals that a child
    process runs."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if any(p.startswith("test_") for p in a.name.split("."))]
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if any(p.startswith("test_") for p in parts) or any(a.name.startswith("test_") for a in node.names):
                found.append(f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[-1].startswith("test_"):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__"):
                found.append(f"{name}({node.args[0].value!r})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [m.group(0).strip() for m in _TEST_IMPORT_TEXT.finditer(node.value)]
    return found


def test_no_test_module_imports_another():
    """What tests share lives in tests/helpers (or tests/kernels): a test module imported by another runs its
    module-level code twice and couples the two files' fixtures and collection."""
    offenders, seen = [], 0
    for rel in _test_tree_files():
        path = os.path.join(TESTS, *rel)
        seen += 1
        offenders += [f"tests/{'/'.join(rel)}: {imp}"
                      for imp in _imports_of_test_modules(open(path, encoding="utf-8").read(), path)]
    assert seen > 100 and not offenders, offenders


def test_helpers_and_kernels_import_no_test_folder():
    """tests/helpers and tests/kernels import each other, triton_trace and installed packages only: never a
    test module, nor a module that sits in a stage folder or at the top of tests/ (importable there only by
    accident of pytest's sys.path)."""
    elsewhere = {rel[-1][:-3] for rel in _test_tree_files() if len(rel) == 1 or rel[0] in TEST_FOLDERS} - SHARED
    offenders, seen = [], 0
    for rel in _test_tree_files():
        if rel[0] not in SHARED:
            continue
        seen += 1
        path = os.path.join(TESTS, *rel)
        source = open(path, encoding="utf-8").read()
        offenders += [f"tests/{'/'.join(rel)}: {imp}" for imp in _imports_of_test_modules(source, path)]
        for top, _ in _module_imports(path, list(rel[:-1])):
            if top in elsewhere:
                offenders.append(f"tests/{'/'.join(rel)}: imports {top}")
    assert seen >= 10 and not offenders, offenders


def test_every_test_module_lives_in_a_stage_folder():
    """tests/<stage>/test_*.py, one level down; the top of tests/ holds conftest.py only; a stage folder holds
    test modules only (no __init__.py: pytest imports them by basename, so every basename is unique)."""
    folders = {d for d in os.listdir(TESTS) if os.path.isdir(os.path.join(TESTS, d)) and d != "__pycache__"}
    offenders = [f"tests/{d}/: not a stage folder ({sorted(TEST_FOLDERS)}), nor shared ({sorted(SHARED)}) "
                 f"nor data ({sorted(DATA)})" for d in sorted(folders - TEST_FOLDERS - SHARED - DATA)]
    names, seen = {}, 0
    for rel in _test_tree_files():
        where = "tests/" + "/".join(rel)
        if rel[0] in SHARED or rel[0] in DATA:
            continue
        if len(rel) == 1:
            if rel[0] not in TOP_LEVEL:
                offenders.append(f"{where}: the top of tests/ holds only {sorted(TOP_LEVEL)}; a test module goes "
                                 "in its stage folder, shared code in tests/helpers/ or tests/kernels/")
            continue
        if len(rel) > 2 or not rel[-1].startswith("test_"):
            offenders.append(f"{where}: a stage folder holds test modules (test_*.py) only, one level down")
            continue
        seen += 1
        if rel[-1] in names:
            offenders.append(f"{where}: the same basename as {names[rel[-1]]}")
        names[rel[-1]] = where
    assert seen > 50 and not offenders, offenders


def test_the_layout_rules_catch_what_they_forbid():
    """The scanner behind the rules above sees a test module imported every way a file can import one
    (written TEST_ here, so that this file does not break its own rule)."""
    source = ("import os\nfrom TEST_batch import run_both\nimport helpers.TEST_x\nfrom helpers import TEST_y\n"
              "def f():\n    from TEST_masked_loops import same\n    importlib.import_module('TEST_cli')\n"
              "CODE = 'import sys\\nfrom TEST_arena import _run\\n'\n"
              "from helpers.batch import run_both\nDOC = 'the TEST_batch module'\n").replace("TEST_", "test_")
    want = ["from TEST_batch import run_both", "import helpers.TEST_x", "from helpers import TEST_y",
            "from TEST_masked_loops import same", "import_module('TEST_cli')", "from TEST_arena import"]
    assert sorted(_imports_of_test_modules(source)) == sorted(w.replace("TEST_", "test_") for w in want)

