"""The source rewrite behind masked loops (divergence/loops.py): a kernel's or helper's ``for ... in range()``
/ ``tl.range()`` and ``while`` loops get the hooks that let their trips run per program (the shape of the
rewritten loop is in divergence/loops.py). Loops the hooks cannot keep exact are left as they are: a body with
``break``, ``continue``, ``return`` or ``try``, an ``else`` clause, a loop variable read after the loop, a
``while`` with an atomic in it (a spin lock's condition has effects); their variables are still typed as
compiled (induction.py). A kernel's own early exits (``if c: ... return`` in its body) get the hook of
divergence/exits.py."""
from __future__ import annotations

import ast

from . import induction
from .names import CUT, EXIT, IF, LOOP, PREFIX, WHILE


_PLAIN_IF = "_triton_trace_plain"      # set on the ifs the rewrite adds that need no masking

_NOT_IN_BODY = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global,
                ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)


def _typed(node: ast.For) -> ast.For:
    """A ``range`` / ``tl.range`` loop left as it is, its variable typed as compiled (induction.py)."""
    it = node.iter
    if isinstance(it, ast.Call) and _is_range(it.func) and not any(isinstance(a, ast.Starred) for a in it.args):
        node.iter = ast.copy_location(ast.Call(func=ast.Name(id=induction.RANGE, ctx=ast.Load()),
                                               args=[it.func] + it.args, keywords=it.keywords), it)
    return node


def _is_range(func) -> bool:
    """``range`` or ``tl.range`` (the interpreter runs it as ``range``; its pipelining keywords mean nothing
    there), not ``tl.static_range`` (its bounds are constants)."""
    if isinstance(func, ast.Name):
        return func.id == "range"
    return isinstance(func, ast.Attribute) and func.attr == "range" and (
        isinstance(func.value, ast.Name) and func.value.id in ("tl", "language") or
        isinstance(func.value, ast.Attribute) and func.value.attr == "language")


class _Loops(ast.NodeTransformer):
    def __init__(self, fn: ast.FunctionDef):
        self.count = 0
        self.loads: dict = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.loads.setdefault(node.id, []).append(node)
        # the function's local names: only these may be cut to a sub-chunk's programs and put back
        self.local = _local_names(fn)

    def visit_For(self, node: ast.For):
        node = self.generic_visit(node)
        it = node.iter
        if not (isinstance(it, ast.Call) and _is_range(it.func) and 1 <= len(it.args) <= 3 and
                isinstance(node.target, ast.Name) and not node.orelse and
                not any(isinstance(it.func, ast.Name) or k.arg in (None, "arg1", "arg2", "step")
                        for k in it.keywords)):
            return _typed(node)
        if not self._body_allowed(node):
            return _typed(node)
        inside = {id(n) for n in ast.walk(node)}
        if any(id(n) not in inside for n in self.loads.get(node.target.id, ())):
            return _typed(node)             # the loop variable is read after the loop
        self.count += 1
        names, kept, skip = self._names(node.body, (), {node.target.id})
        head = self._head(LOOP, it.args, names, kept, node.target.id, self._outside(node, kept))
        enter, save, merge, leave = self._hooks(names, kept, skip, node.target.id)
        loop_node = ast.For(target=node.target, iter=ast.Name(id=self._name("L"), ctx=ast.Load()),
                            body=[enter, save] + node.body + [merge], orelse=[])
        return self._placed(node, [head, loop_node, leave])

    def visit_While(self, node: ast.While):
        node = self.generic_visit(node)
        if node.orelse or not self._body_allowed(node) or any(
                isinstance(n, (ast.Name, ast.Attribute)) and getattr(n, "id", getattr(n, "attr", "")).startswith("atomic_")
                for n in ast.walk(node)):
            return node             # a spin lock's condition has effects: its programs split into runs instead
        self.count += 1
        names, kept, skip = self._names(node.body, (node.test,), set())
        head = self._head(WHILE, [], names, kept, None, self._outside(node, kept))
        enter, save, merge, leave = self._hooks(names, kept, skip, None)
        test = ast.Call(func=ast.Attribute(value=ast.Name(id=self._name("L"), ctx=ast.Load()), attr="test",
                                           ctx=ast.Load()), args=[node.test], keywords=[])
        loop_node = ast.While(test=test, body=[enter, save] + node.body + [merge], orelse=[])
        return self._placed(node, [head, loop_node, leave])

    def visit_If(self, node: ast.If):
        if getattr(node, _PLAIN_IF, False):
            return node             # an exit's rebinding of a name (_exits): a plain value test
        node = self.generic_visit(node)
        if not (self._body_allowed(node) and self._allowed(node.orelse)):
            return node             # a side that returns or breaks: its programs split into runs instead
        self.count += 1
        _, kept, _ = self._names(node.body + node.orelse, (node.test,), set())
        # names read anywhere outside the if: only these are merged (a name one side binds for itself
        # alone is not, as the compiler drops it after the if)
        live = self._outside(node, kept)
        st, side, restore, merged = self._name("I"), self._name("B"), self._name("R"), self._name("M")
        head = ast.Assign(targets=[ast.Name(id=st, ctx=ast.Store())], value=ast.Call(
            func=ast.Name(id=IF, ctx=ast.Load()), args=[node.test],
            keywords=[ast.keyword(arg="assigned", value=ast.Constant(kept)),
                      ast.keyword(arg="live", value=ast.Constant(live)),
                      ast.keyword(arg="has_else", value=ast.Constant(bool(node.orelse)))]))

        def put(d: str, names: tuple, indent: str) -> str:
            return "".join(f"{indent}if {v!r} in {d}:\n{indent}    {v} = {d}[{v!r}]\n" for v in names)
        loop_node, after = ast.parse(
            f"for {side} in {st}:\n    if {st}.masked:\n        {restore} = {st}.begin(locals())\n" +
            put(restore, kept, "        ") +
            f"    if {side}:\n        pass\n    if {st}.masked:\n        {st}.end(locals())\n"
            f"if {st}.masked:\n    {merged} = {st}.merge()\n" + put(merged, live, "    ")).body
        loop_node.body[1].body, loop_node.body[1].orelse = node.body, node.orelse
        return self._placed(node, [head, loop_node, after])

    # -- pieces of the rewrite ------------------------------------------------------------------------------
    @staticmethod
    def _allowed(body: list) -> bool:
        return not any(isinstance(n, _NOT_IN_BODY) for stmt in body for n in ast.walk(stmt))

    def _body_allowed(self, node) -> bool:
        return self._allowed(node.body)

    def _name(self, kind: str) -> str:
        return f"{PREFIX}{kind}{self.count}"

    def _names(self, body: list, extra: tuple, own: set) -> tuple:
        """(local names the body and ``extra`` use, those the body assigns, loop variables to skip)."""
        used = {n.id for stmt in list(body) + list(extra) for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        assigned = sorted({n.id for stmt in body for n in ast.walk(stmt)
                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                           and not n.id.startswith(PREFIX)})
        # loop variables (this loop's and rewritten inner loops'): never read after their loops
        skip = tuple(sorted(own | {
            n.target.id for stmt in body for n in ast.walk(stmt)
            if isinstance(n, ast.For) and isinstance(n.iter, ast.Name) and n.iter.id.startswith(PREFIX)}))
        names = tuple(sorted(v for v in used & self.local if not v.startswith(PREFIX) and v not in skip))
        return names, tuple(v for v in assigned if v not in skip), skip

    def _outside(self, node, names: tuple) -> tuple:
        """Those of ``names`` read anywhere outside ``node`` (after it, or before it in an enclosing loop)."""
        inside = {id(n) for n in ast.walk(node)}
        return tuple(v for v in names if any(id(n) not in inside for n in self.loads.get(v, ())))

    def _head(self, factory: str, args: list, names: tuple, kept: tuple, var, outside: tuple) -> ast.stmt:
        keywords = [ast.keyword(arg="names", value=ast.Constant(names)),
                    ast.keyword(arg="assigned", value=ast.Constant(kept)),
                    ast.keyword(arg="outside", value=ast.Constant(outside))]
        if var is not None:
            keywords.append(ast.keyword(arg="var", value=ast.Constant(var)))
        return ast.Assign(targets=[ast.Name(id=self._name("L"), ctx=ast.Store())],
                          value=ast.Call(func=ast.Name(id=factory, ctx=ast.Load()), args=args, keywords=keywords))

    def _hooks(self, names: tuple, kept: tuple, skip: tuple, var) -> tuple:
        name, saved, merged, cut = self._name("L"), self._name("S"), self._name("M"), self._name("C")

        def cut_to(what: str, call: str, put: tuple) -> ast.stmt:
            return ast.parse(f"if {name}.{what}:\n    {cut} = {name}.{call}(locals())\n" +
                             "".join(f"    if {v!r} in {cut}:\n        {v} = {cut}[{v!r}]\n" for v in put)).body[0]
        # only a trip that some programs sit out pays for the cut, or for the snapshot and the merge
        enter = cut_to("compact", "enter", names + ((var,) if var else ()))
        leave = cut_to("compacted", "leave", names)
        text = (f"{saved} = {name}.save(locals()) if {name}.masked else None\n"
                f"if {saved} is not None:\n"
                f"    {merged} = {name}.merge({saved}, locals(), {skip!r})\n" +
                "".join(f"    if {v!r} in {merged}:\n        {v} = {merged}[{v!r}]\n" for v in kept))
        save, merge = ast.parse(text).body
        return enter, save, merge, leave

    @staticmethod
    def _placed(node, out: list) -> list:
        """The new statements at the loop's line (not the snippets'); the body keeps its own lines."""
        body = {id(n) for stmt in node.body + getattr(node, "orelse", []) for n in ast.walk(stmt)}
        for stmt in out:
            for sub in ast.walk(stmt):
                if id(sub) not in body:
                    ast.copy_location(sub, node)
        return out


def transform(tree: ast.AST, kernel: bool = False) -> ast.AST:
    """Rewrite the function's own loops and branches (not those of functions it defines or calls); a
    ``kernel``'s early exits too (a helper's ``return`` leaves only the helper)."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        return tree
    body = _exits(fn) if kernel else fn.body
    # one visitor for the whole body: it walks the function once to index its reads and local names (one per
    # statement made the rewrite quadratic: 0.4 s for one of fla's long kernels); its counter keeps the
    # names it adds unique across statements
    loops = _Loops(fn)
    fn.body = [s for stmt in body for s in _as_list(loops.visit(stmt))]
    ast.fix_missing_locations(tree)
    return tree


def _local_names(fn: ast.FunctionDef) -> set:
    """The function's arguments and the names it assigns."""
    a = fn.args
    return {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | \
        {x.arg for x in (a.vararg, a.kwarg) if x is not None} | \
        {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _is_exit(stmt) -> bool:
    """``if c: ... return`` (a bare return, last; no other return, break or continue in it). An ``else`` runs
    exactly when the exit is not taken: its statements simply follow the exit (``elif c2: return`` too)."""
    return isinstance(stmt, ast.If) and isinstance(stmt.body[-1], ast.Return) and \
        (stmt.body[-1].value is None or isinstance(stmt.body[-1].value, ast.Constant) and
         stmt.body[-1].value.value is None) and _Loops._allowed(stmt.body[:-1])


def _exits(fn: ast.FunctionDef) -> list:
    """The kernel's statements with each early exit as divergence/exits.py shows it."""
    local = _local_names(fn)
    out, todo = [], list(fn.body)
    while todo:
        stmt = todo.pop(0)
        if not _is_exit(stmt):
            out.append(stmt)
            continue
        todo[:0] = stmt.orelse
        held, cut = f"{PREFIX}X{len(out)}", f"{PREFIX}K{len(out)}"
        new = [ast.Assign(targets=[ast.Name(id=held, ctx=ast.Store())], value=stmt.test)]
        if len(stmt.body) > 1:
            new.append(ast.If(test=ast.Name(id=held, ctx=ast.Load()), body=stmt.body[:-1], orelse=[]))
        new.append(ast.If(test=ast.Call(func=ast.Name(id=EXIT, ctx=ast.Load()),
                                        args=[ast.Name(id=held, ctx=ast.Load())], keywords=[]),
                          body=[stmt.body[-1]], orelse=[]))
        # the names read after the exit: cut to the programs left where the exit cuts the chunk
        later = sorted({n.id for s in todo for n in ast.walk(s) if isinstance(n, ast.Name) and
                        isinstance(n.ctx, ast.Load) and n.id in local and not n.id.startswith(PREFIX)})
        if later:
            rebind = ast.parse(f"{cut} = {CUT}(locals(), {tuple(later)!r})\n" +
                               "".join(f"if {v!r} in {cut}:\n    {v} = {cut}[{v!r}]\n" for v in later)).body
            for node in rebind[1:]:
                setattr(node, _PLAIN_IF, True)
            new += rebind
        out += _Loops._placed(stmt, new)
    return out


def _as_list(x) -> list:
    return x if isinstance(x, list) else [x]


def provide(namespace: dict) -> None:
    """Bind the rewrite's names in a rewritten function's globals. The masked control flow behind them loads
    here, when a kernel first runs, not with the rewrite."""
    from . import branches as maskedbranches, exits as maskedexits, loops as maskedloops
    namespace.setdefault(LOOP, maskedloops.loop)
    namespace.setdefault(WHILE, maskedloops.while_loop)
    namespace.setdefault(IF, maskedbranches.branch)
    namespace.setdefault(EXIT, maskedexits.leave)
    namespace.setdefault(CUT, maskedexits.cut)
    induction.provide(namespace)
