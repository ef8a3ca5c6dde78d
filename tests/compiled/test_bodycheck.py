"""compiled/bodycheck.py: every function body of a kernel module rebuilt from a trace file is checked against
allowlists before Triton's code generator (which evaluates names and attribute chains in this process) sees it.

An escape corpus, each refused with the function, line and construct named (module texts, and end to end
through crafted launches of real traced kernels, where the side effect must not happen); every kernel our
tests trace passes (and a few still compile); and a fuzz test over a small grammar with dangerous atoms."""
from __future__ import annotations

import ast
import dataclasses

import pytest
from helpers.modules import module_dict, with_module
import torch
import triton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import triton_trace
from triton_trace.compiled import bodycheck, compile_launch, stand_ins
from triton_trace.compiled.bodycheck import allowlists, check_module
from triton_trace.compiled.source import constant_node, kernel_module
from triton_trace.errors import TraceUsageError

import kernels as K
from kernels import dropin, moe
from kernels import sizebugs as S

HEADER = ("import triton\n"
          "import triton.language as tl\n"
          "import triton.language.extra.libdevice as libdevice\n"
          "from triton.language.extra.cuda.libdevice import fast_expf\n"
          "import torch\n"
          "SCALE = 2.0\n"
          "\n\n@triton.jit\n"
          "def helper(x):\n"
          "    return x * SCALE\n"
          "\n\nhelper2 = helper\n"
          "\n\n@triton.jit\n"
          "def kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
          "    offs = tl.arange(0, BLOCK)\n")
FIRST = HEADER.count("\n") + 1          # the module line of the first line a case adds to the kernel


def _module(lines) -> str:
    return HEADER + "".join("    " + line + "\n" for line in lines)


# (id, lines added to the kernel's body, a fragment of the construct the message names); the first line offends
ESCAPES = [
    ("tl-core-knobs-os", ['tl.core.knobs.os.system("touch pwned")'], "'tl.core'"),
    ("triton-knobs", ["x = triton.knobs.cache.dir"], "'triton.knobs'"),
    ("triton-compile", ["tl.static_print(triton.compile)"], "'triton.compile'"),
    ("tl-math-os", ["x = tl.math.os.getcwd()"], "'tl.math.os'"),
    ("tl-math-core", ["x = tl.math.core.knobs"], "'tl.math.core'"),
    ("tl-extra-utils", ["x = tl.extra.cuda.utils"], "'tl.extra.cuda.utils'"),
    ("libdevice-core", ["x = libdevice.core.knobs"], "'libdevice.core'"),
    ("class-mro", ["x = offs.__class__.__mro__"], "'__class__'"),
    ("dtype-class", ["x = tl.float32.__class__"], "'__class__'"),
    ("globals", ["x = helper.__globals__['os']"], "'__globals__'"),
    ("builtins", ["x = __builtins__"], "'__builtins__'"),
    ("wrapped", ["x = fast_expf.__wrapped__"], "'__wrapped__'"),
    ("getattr", ['x = getattr(tl, "core")'], "'getattr'"),
    ("eval", ['eval("1")'], "'eval'"),
    ("import-call", ['__import__("os")'], "'__import__'"),
    ("alias-module", ["m = tl", "m.core.knobs"], "module 'tl' used as a value"),
    ("module-as-argument", ["x = helper(tl)"], "module 'tl' used as a value"),
    ("module-subscript", ["x = tl.math[0]"], "module 'tl.math' used as a value"),
    ("jit-fn", ["x = tl.randint.fn"], "'tl.randint.fn'"),
    ("helper-globals", ["x = helper.used_global_vals"], "'helper.used_global_vals'"),
    ("alias-src", ["x = helper2.src"], "'helper2.src'"),
    ("local-jit-fn", ["x = f.fn", "f = helper"], "'fn' of 'f'"),
    ("libdevice-fn", ["x = libdevice.tanh.fn"], "'libdevice.tanh.fn'"),
    ("ir-handle", ["x = offs.handle"], "'handle'"),
    ("import", ["import os"], "the Import statement"),
    ("import-from", ["from os import system"], "the ImportFrom statement"),
    ("lambda", ["f = lambda: 0"], "the Lambda expression"),
    ("list-comprehension", ["x = [i for i in range(4)]"], "the ListComp expression"),
    ("generator", ["x = list(i for i in range(4))"], "the GeneratorExp expression"),
    ("dict", ['x = {"a": 1}'], "the Dict expression"),
    ("set", ["x = {1, 2}"], "the Set expression"),
    ("fstring-call", ["""x = f"{__import__('os').system('touch pwned')}\""""], "'__import__'"),
    ("walrus", ["if (y := n) > 0:", "    pass"], "the NamedExpr expression"),
    ("global", ["global SCALE"], "the Global statement"),
    ("nested-def", ["def inner():", "    return 0"], "the FunctionDef statement"),
    ("class", ["class C:", "    pass"], "the ClassDef statement"),
    ("try", ["try:", "    pass", "except Exception:", "    pass"], "the Try statement"),
    ("raise", ['raise ValueError("x")'], "the Raise statement"),
    ("delete", ["del offs"], "the Delete statement"),
    ("await", ["x = await n"], "the Await expression"),
    ("yield", ["yield n"], "the Yield expression"),
    ("attribute-assignment", ["offs.dtype = tl.float32"], "an assignment to 'offs.dtype'"),
    ("hide-module", ["tl = n"], "hides the module's import"),
    ("torch", ["x = torch.zeros(3)"], "the name 'torch'"),
    ("if-exp", ['x = n if n else __import__("os")'], "'__import__'"),
    ("for-iter", ['for i in __import__("os").listdir("."):', "    pass"], "'__import__'"),
    ("with", ['with open("f") as f:', "    pass"], "'open'"),
    ("assert-message", ['assert n, __import__("os")'], "'__import__'"),
    ("keyword", ["x = tl.load(x_ptr, **__builtins__)"], "'__builtins__'"),
]
FORBIDDEN_BUILTINS = ["getattr", "setattr", "hasattr", "eval", "exec", "compile", "open", "type", "globals", "vars",
                      "__import__", "object", "super", "locals", "breakpoint", "input", "delattr"]


@pytest.mark.parametrize("lines, construct", [e[1:] for e in ESCAPES], ids=[e[0] for e in ESCAPES])
def test_escapes_are_refused_naming_function_line_and_construct(lines, construct):
    with pytest.raises(TraceUsageError) as ei:
        check_module(_module(lines), "crafted")
    msg = str(ei.value)
    assert msg.startswith("crafted: function 'kernel', line %d `%s`" % (FIRST, lines[0].strip())), msg
    assert construct in msg, msg


@pytest.mark.parametrize("name", FORBIDDEN_BUILTINS)
def test_builtins_outside_the_code_generators_set_are_refused(name):
    with pytest.raises(TraceUsageError, match=f"the name '{name}'"):
        check_module(_module([f"x = {name}(offs)"]), "crafted")


def test_a_parsed_tree_is_checked_the_same_and_a_helper_is_named():
    text = HEADER.replace("    return x * SCALE", "    return x.__class__")
    with pytest.raises(TraceUsageError, match=r"function 'helper', line 11 `return x.__class__`"):
        check_module(ast.parse(text), "tree")


def test_module_level_decorators_defaults_and_statements_are_refused():
    crafted = [
        (HEADER.replace("@triton.jit\ndef kernel", "@triton.autotune(configs=[], key=[])\ndef kernel"),
         "a decorator other than @triton.jit"),
        (HEADER.replace("def helper(x)", "def helper(x=__import__('os').system('touch pwned'))"), "'__import__'"),
        (HEADER.replace("def helper(x)", "def helper(x: tl.core.knobs)"), "'tl.core'"),
        (HEADER + "print('at import')\n", "the top-level Expr statement"),
        (HEADER.replace("SCALE = 2.0", "SCALE = tl.core"), "'tl.core'"),
    ]
    for text, construct in crafted:
        with pytest.raises(TraceUsageError, match=construct.replace("(", r"\(").replace(")", r"\)")):
            check_module(text, "crafted")


def test_deep_nesting_and_bad_syntax_are_usage_errors():
    for body in ("x = " + "-" * 20_000 + "n", "x = " + "n.to" * 20_000, "x = (", "x = " + "-" * 200_000 + "n"):
        with pytest.raises(TraceUsageError):
            check_module(_module([body]), "deep")


def test_what_kernels_use_passes():
    check_module(_module([
        "pid = tl.program_id(0).to(tl.int64)",
        "x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(x_ptr.dtype.element_ty)",
        "y = tl.math.exp(x) + tl.extra.cuda.libdevice.fast_expf(x) + libdevice.tanh(x) + fast_expf(x)",
        "y = tl.maximum(y, x, propagate_nan=tl.PropagateNan.ALL) * helper2(x) + SCALE",
        "bits = tl.float32.primitive_bitwidth + x.dtype.primitive_bitwidth + BLOCK.value + x.shape[0]",
        "acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32).T",
        "for i in range(0, triton.cdiv(n, BLOCK)):",
        "    acc += tl.dot(acc, acc)",
        "while tl.atomic_cas(x_ptr, 0, 1) == 1:",
        "    pass",
        "for j in tl.static_range(2):",
        "    tl.static_assert(BLOCK > 0, f'{BLOCK}')",
        "a, b = (min(n, 3), max(n, 4)) if isinstance(n, int) else (len(acc.shape), float('inf'))",
        "print('x', x)",
        "tl.store(x_ptr + offs, tl.sum(acc, axis=0), mask=offs < n)",
        "return y",
    ]), "clean")


def test_allowlists_come_from_the_installed_triton():
    lists = allowlists()
    language = lists.modules["triton.language"]
    assert {"load", "store", "dot", "float32", "constexpr", "static_range", "PropagateNan"} <= set(language)
    assert not {"core", "semantic", "math", "extra", "standard"} & set(language)        # modules are paths
    assert "fast_expf" in lists.modules["triton.language.extra.cuda.libdevice"]
    assert set(lists.modules["triton"]) == {"cdiv", "next_power_of_2"}
    assert {"to", "dtype", "element_ty", "shape", "T", "value", "primitive_bitwidth", "load"} <= lists.values
    assert not {"handle", "fn", "src", "used_global_vals", "run", "cache_key"} & lists.values
    # what a value attribute can reach on a jit function, a Python function or the module of a chain: nothing
    # but the jit function's constexpr type
    for obj in (triton.language.randint, triton.cdiv, triton.language.load, triton.language.math.exp):
        assert {n for n in dir(obj) if not n.startswith("_")} & lists.values <= {"type"}


# ----------------------------------------------------------------------------------------------------------
# end to end: a real traced launch, with the malicious line put into its recorded source
# ----------------------------------------------------------------------------------------------------------
def _traced(run):
    triton_trace.reset()
    run()
    return triton_trace.current_trace().launches


def _inject(source: str, line: str) -> str:
    """``source`` (a function, decorators included) with ``line`` as the first statement of its body."""
    lines = source.splitlines(True)
    head = next(i for i, t in enumerate(lines) if t.lstrip().startswith("def "))
    while not lines[head].rstrip().endswith(":"):
        head += 1
    return "".join(lines[:head + 1]) + "    " + line + "\n" + "".join(lines[head + 1:])


def test_a_crafted_kernel_body_is_refused_before_its_shell_command_runs(tmp_path):
    (launch,) = _traced(lambda: K.add(torch.randn(300), torch.randn(300), kernel=triton_trace.trace(K.make_add())))
    marker = tmp_path / "pwned"
    line = f'tl.core.knobs.os.system("touch {marker}")'
    crafted = dataclasses.replace(launch, source=_inject(launch.source, line))
    assert line in kernel_module(crafted).text          # the top-level check alone lets it through
    with pytest.raises(TraceUsageError, match=r"function 'add_kernel', line \d+ `tl\.core\.knobs.*'tl\.core'"):
        kernel_module(crafted, strict=True)
    assert not marker.exists()


def test_a_crafted_helper_body_is_refused(tmp_path):
    (launch,) = _traced(lambda: K.poly(torch.randn(100), kernel=triton_trace.trace(K.make_nested())))
    marker = tmp_path / "pwned"
    mod = module_dict(launch)
    helper = mod["helpers"][0]
    bad = _inject(helper["source"], f"x.__class__.__init__.__globals__['os'].system('touch {marker}')")
    crafted = with_module(launch, {**mod, "helpers": [{**helper, "source": bad}]})
    with pytest.raises(TraceUsageError, match="function '_poly'.*'__class__'"):
        kernel_module(crafted, strict=True)
    crafted = dataclasses.replace(launch, source=_inject(_inject(launch.source, "g = f.fn"), "f = _poly"))
    with pytest.raises(TraceUsageError, match="the attribute 'fn' of 'f'"):
        kernel_module(crafted, strict=True)
    assert not marker.exists()


def test_crafted_decorators_defaults_and_argument_expressions_are_refused(tmp_path):
    (launch,) = _traced(lambda: K.add(torch.randn(300), torch.randn(300), kernel=triton_trace.trace(K.make_add())))
    mod = module_dict(launch)

    def with_helper(source):
        helper = {"name": "h", "def_name": "h", "file": "f", "line": 1, "source": source}
        return with_module(launch, {**mod, "helpers": [helper]})
    for source in ("@atexit.register\ndef h():\n    return 1\n",
                   "def h(x=__import__('os').system('touch pwned')):\n    return x\n"):
        with pytest.raises(TraceUsageError, match="not plain"):
            kernel_module(with_helper(source), strict=True)
    expr = f"__import__('os').system('touch {tmp_path / 'pwned'}')"
    with pytest.raises(TraceUsageError, match="argument 'n'.*is not a constant"):
        constant_node(expr, "n")
    params = {**mod["params"], "n": {"kind": "value", "expr": expr}}
    with pytest.raises(TraceUsageError, match="argument 'n'"):
        stand_ins(with_module(launch, {**mod, "params": params}))
    assert not (tmp_path / "pwned").exists()


# ----------------------------------------------------------------------------------------------------------
# no false refusals: every kernel our tests trace passes
# ----------------------------------------------------------------------------------------------------------
def _t(kernel):
    """A traced copy (decorating a shared @triton.jit kernel in place would change it for other tests)."""
    fn = kernel.fn if isinstance(kernel, triton.JITFunction) else kernel
    return triton_trace.trace(triton.jit(fn), values=False)


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def _layer_norm_bwd():
    x, w, b = _x(8, 20), _x(20) + 2, _x(20)
    y, mean, rstd = K.layer_norm_fwd(x, w, b, kernel=_t(K.make_layer_norm_fwd()))
    K.layer_norm_bwd(_x(8, 20), x, w, mean, rstd, dx_kernel=_t(K.make_layer_norm_bwd_dx()),
                     dwdb_kernel=_t(K.make_layer_norm_bwd_dwdb()))


def _sizebugs():
    for k in (S.scale_unmasked, S.scale_masked, S.square_index_i32, S.square_index_i64):
        _t(k)[(2,)](_x(128), torch.empty(128), 128, BLOCK=64)
    for k in (S.rows_contiguous_only, S.rows_strided):
        _t(k)[(2,)](_x(2, 64), torch.empty(2, 64), 64, 64, BLOCK=64)


def _dropin(name):
    return lambda: dropin.CASES[name](lambda k, **o: _t(k))


CLEAN = {
    "add": lambda: K.add(_x(300), _x(300), kernel=_t(K.make_add())),
    "bias": lambda: (K.scale_bias(_x(100), _x(100), kernel=_t(K.make_bias())),
                     K.scale_bias(_x(100), None, kernel=_t(K.make_bias()))),
    "softmax": lambda: K.softmax(_x(4, 100), kernel=_t(K.make_softmax())),
    "layer_norm_fwd_bwd": _layer_norm_bwd,
    "matmul_group_m": lambda: K.matmul(_x(32, 16), _x(16, 32), kernel=_t(K.make_matmul()), group_m=2),
    "transpose": lambda: K.transpose(_x(16, 24).t(), kernel=_t(K.make_transpose())),
    "tensor_desc": lambda: K.tensor_desc_add_one(_x(8, 16), kernel=_t(K.make_tensor_desc())),
    "host_desc": lambda: K.host_desc_scale(_x(8, 16), kernel=_t(K.make_host_desc())),
    "histogram": lambda: K.histogram(torch.arange(40, dtype=torch.int32) % 7, 7, kernel=_t(K.make_histogram())),
    "cumsum": lambda: K.cumsum(_x(3, 20), kernel=_t(K.make_cumsum())),
    "autotuned": lambda: K.scale(_x(100), 2.0, kernel=triton_trace.trace(K.make_autotuned(), values=False)),
    "heuristics": lambda: K.square(_x(100), kernel=triton_trace.trace(K.make_heuristics(), values=False)),
    "triton_op": lambda: K.make_triton_op_add(triton_trace.trace(K.make_add(), values=False))(_x(150), _x(150)),
    "nested_helper": lambda: K.poly(_x(100), kernel=_t(K.make_nested())),
    "grid3d": lambda: K.sub3d(_x(2, 4, 8), _x(2, 4, 8), kernel=_t(K.make_grid3d())),
    "segment_sum": lambda: K.segment_sum(_x(30), torch.tensor([0, 7, 30]), kernel=_t(K.make_segment_sum())),
    "moe_early_exit": lambda: moe.expert_tiles(_x(2 * 32, 16), torch.tensor([5, 0]), _x(2, 16, 16),
                                               kernel=_t(moe.make_expert_tiles())),
    "sizebugs": _sizebugs,
    "dropin_checked_and_overflow": lambda: (_t(dropin.checked)[(1,)](_x(8), 100.0, N=8),
                                            _t(dropin.scaled_index)[(1,)](torch.arange(4), torch.empty(4), 3, N=4),
                                            _t(dropin.difference)[(1,)](_x(4), _x(4), torch.empty(4), N=4)),
    "dropin_tensor_like": lambda: dropin.run_tensor_like(lambda k, **o: _t(k)),
    **{f"dropin_{name}": _dropin(name) for name in dropin.CASES},
    **{f"library_{name}": (lambda case: lambda: case[1](*case[3]("cpu"), kernel=_t(case[0]())))(case)
       for name, case in K.LIBRARY.items()},
}


if tuple(int(v) for v in triton.__version__.split(".")[:2]) < (3, 9):    # 3.9's interpreter removed them
    CLEAN["block_pointers"] = lambda: K.block_ptr_scale(_x(20, 40), kernel=_t(K.make_block_ptr()))


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_every_kernel_our_tests_trace_passes(case):
    launches = _traced(CLEAN[case])
    assert launches
    for launch in launches:
        module = kernel_module(launch, strict=True)
        assert module.kernel == launch.kernel_name


@pytest.fixture
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("case", ["matmul_group_m", "library_gelu_erf", "layer_norm_fwd_bwd"])
def test_checked_kernels_still_compile(case, _cache):
    for launch in _traced(CLEAN[case]):
        kernel_module(launch, strict=True)
        assert compile_launch(launch, target="sm_90").ir["ptx"]


# ----------------------------------------------------------------------------------------------------------
# fuzz: random bodies over a small grammar with dangerous atoms never crash, and what passes is allowed
# ----------------------------------------------------------------------------------------------------------
SAFE_ATOMS = ["offs", "n", "x_ptr", "BLOCK", "SCALE", "helper", "tl", "triton", "libdevice", "fast_expf", "1", "2.0",
              "'s'", "None", "range", "print"]
DANGEROUS_ATOMS = ["torch", "getattr", "eval", "__import__", "__builtins__", "os", "type"]
SAFE_ATTRS = ["load", "arange", "to", "dtype", "element_ty", "float32", "math", "exp", "extra", "cuda", "libdevice",
              "fast_expf", "T", "shape", "value", "cdiv", "PropagateNan", "ALL"]
DANGEROUS_ATTRS = ["core", "knobs", "os", "system", "fn", "used_global_vals", "__class__", "__globals__", "handle",
                   "src"]
ATTRS = st.one_of(st.sampled_from(SAFE_ATTRS), st.sampled_from(SAFE_ATTRS), st.sampled_from(DANGEROUS_ATTRS))
DANGER = {"getattr", "eval", "__import__", "__builtins__", "os", "type", "core", "knobs", "system", "fn",
          "used_global_vals", "__class__", "__globals__", "handle", "src", "torch"}
MODULES = {"tl", "triton", "libdevice"}


def _grow(e):
    allowed = [
        st.tuples(e, ATTRS).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(e, st.lists(e, max_size=2)).map(lambda t: f"({t[0]})({', '.join(t[1])})"),
        st.tuples(e, st.sampled_from(["+", "*", "<", " and ", " if n else "]), e).map(lambda t: f"({''.join(t)})"),
        st.tuples(e, e).map(lambda t: f"({t[0]})[{t[1]}]"),
        e.map(lambda s: f"-{s}"),
        e.filter(lambda s: 'f"' not in s).map(lambda s: f'f"{{ {s} }}"'),     # Python 3.11 nests no f"
    ]
    refused = [e.map(lambda s: f"[{s} for i in range(2)]"), e.map(lambda s: f"(lambda: {s})"),
               e.map(lambda s: f"(y := {s})"), e.map(lambda s: f"{{1: {s}}}")]
    return st.one_of(*allowed * 6, *refused)        # mostly allowed ones, so that enough bodies pass


# safe atoms twice as often as dangerous ones, so that enough bodies pass for the oracle to judge; and
# attribute chains as atoms, so that the chain rules meet many roots and attributes
NAMES = st.one_of(st.sampled_from(SAFE_ATOMS), st.sampled_from(SAFE_ATOMS), st.sampled_from(DANGEROUS_ATOMS))
CHAINS = st.tuples(NAMES, st.lists(ATTRS, min_size=1, max_size=3)).map(lambda t: ".".join([f"({t[0]})", *t[1]]))
MEMBERS = st.tuples(st.sampled_from(["tl.load", "tl.randint", "tl.float32", "tl.PropagateNan", "triton.cdiv",
                                     "libdevice.exp", "fast_expf", "helper", "tl.math.exp", "tl.extra.cuda"]),
                    st.lists(ATTRS, max_size=2)).map(lambda t: ".".join([t[0], *t[1]]))
ATOMS = st.one_of(NAMES, CHAINS, MEMBERS)
EXPRS = st.recursive(ATOMS, _grow, max_leaves=4)
STATEMENTS = st.one_of(
    EXPRS.map(lambda e: f"y = {e}"), EXPRS, EXPRS.map(lambda e: f"if {e}:\n        y = 1"),
    EXPRS.map(lambda e: f"for i in range({e}):\n        pass"), EXPRS.map(lambda e: f"with {e}:\n        pass"),
    EXPRS.map(lambda e: f"assert {e}"), EXPRS.map(lambda e: f"offs.dtype = {e}"),
    EXPRS.map(lambda e: f"y: tl.constexpr = {e}"), EXPRS.map(lambda e: f"return {e}"),
    st.sampled_from(["global SCALE", "import os", "del offs", "raise ValueError()", "pass", "tl = 1",
                     "try:\n        pass\n    except Exception:\n        pass"]),
)
ALLOWED_NODES = bodycheck.STATEMENTS + bodycheck.EXPRESSIONS + bodycheck.TOKENS + (
    ast.Name, ast.Attribute, ast.Store, ast.withitem)


def _assert_allowed(tree: ast.Module) -> None:
    """An oracle independent of the checker's walk: no node of another type, no dangerous name or attribute,
    a module only at the root of an attribute chain."""
    kernel = tree.body[-1]
    parents = {id(c): p for p in ast.walk(kernel) for c in ast.iter_child_nodes(p)}
    for node in (n for stmt in kernel.body for n in ast.walk(stmt)):
        assert isinstance(node, ALLOWED_NODES), ast.dump(node)
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        assert name is None or (name not in DANGER and not name.startswith("_")), name
        if isinstance(node, ast.Name) and node.id in MODULES:
            assert isinstance(parents[id(node)], ast.Attribute), ast.unparse(parents[id(node)])


@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(STATEMENTS, min_size=1, max_size=2))
def test_fuzzed_bodies_are_refused_or_allowed_never_crash(body):
    text = _module(body)
    try:
        check_module(text, "fuzz")
    except TraceUsageError:
        return
    _assert_allowed(ast.parse(text))
