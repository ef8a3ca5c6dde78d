"""Python's ``and``, ``or`` and ``not`` on Triton tensors, as the compiler means them.

The compiler turns ``a and b`` / ``a or b`` into elementwise ``logical_and`` / ``logical_or`` of the tensor
operands (Python values still short-circuit), and ``not a`` into ``a.__not__()``. Triton's interpreter runs
the kernel as Python, where ``and`` returns one operand by its truthiness: a library's
``mask = rows[:, None] < M and cols[None, :] < N`` masks only the columns, and rows past M are read and
written out of bounds. The traced kernel's source is rewritten so those operators call ``bool_op`` /
``not_op`` below, which apply the compiler's rules (``CodeGenerator.visit_BoolOp`` / ``visit_UnaryOp``).
"""
from __future__ import annotations

import ast

import triton.language as tl

BOOL_OP = "_triton_trace_bool_op"
NOT_OP = "_triton_trace_not_op"


def bool_op(is_and: bool, *thunks):
    """``a and b and ...`` (or ``or``) with each operand a thunk, evaluated in order as the compiler does:
    a Python value that decides the result returns at once; tensors are combined elementwise."""
    tensors = []
    value = None
    for thunk in thunks:
        value = thunk()
        if isinstance(value, tl.tensor):
            tensors.append(value)
        elif bool(value) is (not is_and):
            return value
    if not tensors:
        return value
    while len(tensors) >= 2:                        # right to left, as the compiler folds them
        rhs, lhs = tensors.pop(), tensors.pop()
        tensors.append(lhs.logical_and(rhs) if is_and else lhs.logical_or(rhs))
    return tensors[0]


def not_op(value):
    if isinstance(value, tl.tensor):
        return value.__not__()
    return not value


class _Transformer(ast.NodeTransformer):
    def visit_BoolOp(self, node: ast.BoolOp):
        node = self.generic_visit(node)
        if any(isinstance(n, ast.NamedExpr) for v in node.values for n in ast.walk(v)):
            return node         # an assignment expression must bind in the kernel's scope, not a lambda's
        no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        thunks = [ast.copy_location(ast.Lambda(args=no_args, body=v), v) for v in node.values]
        call = ast.Call(func=ast.Name(id=BOOL_OP, ctx=ast.Load()),
                        args=[ast.Constant(value=isinstance(node.op, ast.And)), *thunks], keywords=[])
        return ast.copy_location(call, node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        node = self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(func=ast.Name(id=NOT_OP, ctx=ast.Load()), args=[node.operand],
                                          keywords=[]), node)


def transform(tree: ast.AST) -> ast.AST:
    tree = _Transformer().visit(tree)
    ast.fix_missing_locations(tree)
    return tree


def provide(namespace: dict) -> None:
    """Make the helpers visible to the rewritten kernel (Triton puts its own helpers there the same way)."""
    namespace.setdefault(BOOL_OP, bool_op)
    namespace.setdefault(NOT_OP, not_op)
