"""Reading the compiler's output: the source line of every IR line (MLIR ``loc`` records in TTIR and TTGIR,
``.loc`` directives in PTX), the layouts Triton chose (``#blocked`` and friends in TTGIR) and, per global
memory op, the instruction it became and its vector width.

Lines of inlined helpers carry ``callsite(callee at caller)`` locations; the callee's line is the one shown
(it is where the op is written), mapped back through the kernel module's spans to the user's file.
"""
from __future__ import annotations

import re

_LOC_DEF = re.compile(r"^#(loc\d*)\s*=\s*loc\((.*)\)\s*$")
_TRAIL = re.compile(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_FILELINE = re.compile(r"^\"([^\"]*)\":(\d+):(\d+)")
_REF = re.compile(r"#(loc\d*)")
_LAYOUT_DEF = re.compile(r"^#([\w]+)\s*=\s*#(?:ttg|triton_gpu|ttng)\.(\w+)<\{(.*)\}>\s*$")
_PTX_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+\"([^\"]*)\"")
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
# TTGIR memory ops -> (how the access runs, load/store)
MEMORY_OPS = {
    "tt.load": ("ld", "load"), "tt.store": ("st", "store"), "tt.atomic_rmw": ("atom", "atomic"),
    "tt.atomic_cas": ("atom", "atomic"), "ttg.async_copy_global_to_local": ("cp.async", "load"),
    "ttng.async_tma_copy_global_to_local": ("tma", "load"), "ttng.async_tma_copy_local_to_global": ("tma", "store"),
    "tt.descriptor_load": ("tma", "load"), "tt.descriptor_store": ("tma", "store"),
    "ttng.async_tma_gather": ("tma", "load"), "ttng.async_tma_scatter": ("tma", "store"),
}
_OP = re.compile(r"^\s*(?:%[\w#:, %]+=\s*)?\"?([a-z_]+\.[a-z_]+)\"?")
_PTX_MEM = re.compile(r"\b(ld\.global|st\.global|atom\.global|red\.global|cp\.async\.(?:bulk\.)?\w*|"
                      r"cp\.async\b)[\w.]*")


def _resolve(defs: dict, body: str, depth: int = 0, columns: bool = False):
    """(file, line) a location body names (``columns``: (file, line, column)), following references; the
    callee of a callsite."""
    if depth > 50:
        return None
    m = _FILELINE.match(body)
    if m:
        return (m.group(1), int(m.group(2))) + ((int(m.group(3)),) if columns else ())
    if body.startswith("callsite("):
        inner = body[len("callsite("):]
        ref = _REF.match(inner.strip())
        return _resolve(defs, defs.get(ref.group(1), ""), depth + 1, columns) if ref else None
    for ref in _REF.findall(body):
        found = _resolve(defs, defs.get(ref, ""), depth + 1, columns)
        if found:
            return found
    inline = re.search(r"\"[^\"]*\":\d+:\d+", body)
    return _resolve(defs, inline.group(0), depth + 1, columns) if inline else None


def mlir_lines(text: str, columns: bool = False) -> list:
    """Per line of a TTIR/TTGIR text: (file, line) of its source (``columns``: (file, line, column)), or None."""
    lines = text.splitlines()
    defs = {}
    for line in lines:
        m = _LOC_DEF.match(line)
        if m:
            defs[m.group(1)] = m.group(2)
    out = []
    for line in lines:
        if line.startswith("#"):
            out.append(None)
            continue
        m = _TRAIL.search(line)
        if not m:
            out.append(None)
            continue
        tok = m.group(1)
        out.append(_resolve(defs, defs.get(tok[1:], ""), columns=columns) if tok.startswith("#")
                   else _resolve(defs, tok, columns=columns))
    return out


def ptx_lines(text: str, columns: bool = False) -> list:
    """Per line of a PTX text: (file, line) of the ``.loc`` in force (``columns``: (file, line, column)), or
    None."""
    files = dict(m.groups() for m in map(_PTX_FILE.match, text.splitlines()) if m)    # listed at the end
    current, out, in_asm, asm_loc = None, [], False, None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("// begin inline asm"):
            in_asm, asm_loc = True, None
        elif stripped.startswith("// end inline asm"):
            in_asm = False
        m = _PTX_LOC.match(line)
        if m:
            loc = ((files.get(m.group(1), ""), int(m.group(2))) + ((int(m.group(3)),) if columns else ())
                   if m.group(2) != "0" else None)
            # inside an inline-asm block LLVM moves on to the next op's line before the asm's last
            # instruction: the block's first .loc is the op's
            if not in_asm or asm_loc is None:
                current = loc
                asm_loc = loc if in_asm else asm_loc
            out.append(current)
            continue
        if stripped.startswith("}") or stripped.startswith(".func") or stripped.startswith(".entry"):
            current = None
        out.append(current if stripped and not stripped.startswith("//") else None)
    return out


def layouts(text: str) -> dict:
    """TTGIR layout aliases: name -> {"kind": "blocked", "sizePerThread": [...], ...}."""
    found = {}
    for line in text.splitlines():
        m = _LAYOUT_DEF.match(line)
        if not m:
            continue
        entry = {"kind": m.group(2)}
        for key, value in re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|[\w.\-]+)", m.group(3)):
            if value.startswith("["):
                entry[key] = [int(v) for v in re.findall(r"-?\d+", value)]
            else:
                entry[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
        found[m.group(1)] = entry
    return found


def _tensor_type(line: str) -> tuple:
    """(shape, element type, layout name) of the last ranked tensor type on a TTGIR line."""
    found = re.findall(r"tensor<([\dx]+)x(!tt\.ptr<(\w+)>|\w+)(?:,\s*#(\w+))?>", line)
    if not found:
        return (), "", None
    dims, whole, pointee, layout = found[-1]
    return tuple(int(d) for d in dims.split("x")), pointee or whole, layout or None


def _ptx_widths(ptx: str, where: list) -> dict:
    """(file, line) -> [(instruction, vector bytes)] of the global memory instructions of that source line."""
    by_line: dict = {}
    for line, loc in zip(ptx.splitlines(), where):
        m = _PTX_MEM.search(line)
        if not m or loc is None:
            continue
        instr = m.group(0)
        if instr.startswith("cp.async"):
            # cp.async.cg.shared.global [dst], [src], cp-size{, src-size}; commit/wait groups move nothing
            size = re.search(r"\],\s*(0x[0-9a-fA-F]+|\d+)", line) if "global" in instr else None
            nbytes = int(size.group(1), 0) if size else 0
        else:
            vec = re.search(r"\.v(\d)", instr)
            bits = re.search(r"\.[bufs](8|16|32|64|128)\b", instr)
            nbytes = (int(vec.group(1)) if vec else 1) * (int(bits.group(1)) // 8 if bits else 0)
        by_line.setdefault(loc, []).append((instr, nbytes))
    return by_line


def memory_ops(ttgir: str, ptx: str, original) -> list:
    """Every global memory op of the TTGIR with its source place (via ``original(module line)``), layout and,
    from the PTX, the widest access its source line became."""
    where = mlir_lines(ttgir)
    widths = _ptx_widths(ptx, ptx_lines(ptx))
    # two ops on one source line (``tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))``) can become different
    # instructions: an fp32 B tile that a tf32 dot wants K-major in shared memory is copied 4 bytes at a
    # time, A 16; the column tells them apart, the line alone would give both the widest
    where_col = mlir_lines(ttgir, columns=True)
    widths_col = _ptx_widths(ptx, ptx_lines(ptx, columns=True))
    alias = layouts(ttgir)
    out = []
    for n, (line, loc, loc_col) in enumerate(zip(ttgir.splitlines(), where, where_col), start=1):
        m = _OP.match(line)
        if not m or m.group(1) not in MEMORY_OPS:
            continue
        how, direction = MEMORY_OPS[m.group(1)]
        shape, elem, layout = _tensor_type(line)
        file, src = original(loc) if loc else (None, 0)
        prefix = {"load": ("ld.", "cp.async"), "store": ("st.",), "atomic": ("atom.", "red.")}[direction]
        kind_instrs = [w for i, w in (widths_col.get(loc_col, []) if loc_col else []) if i.startswith(prefix) and w] \
            or [w for i, w in (widths.get(loc, []) if loc else []) if i.startswith(prefix) and w]
        out.append({"op": m.group(1), "instruction": how, "direction": direction, "ir_line": n,
                    "file": file, "line": src, "shape": list(shape), "element": elem,
                    "layout": dict(alias.get(layout, {}), name=layout) if layout else None,
                    "vector_bytes": max(kind_instrs) if kind_instrs else None})
    return out
