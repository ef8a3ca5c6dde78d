"""Source locations as the reader knows them, not as the machinery named them.

- A kernel defined in a notebook cell lives in a temporary file ipykernel compiled the cell from
  (``/tmp/ipykernel_4242/2903154219.py``). IPython's tracebacks call it ``Cell In[8], line 6``; the views say
  ``cell In[8]`` (the frontend's ``place()`` adds ", line 6"). The name comes from the running shell, so a
  trace viewed in the notebook that made it is named this way (file lists, the source panel, findings'
  messages); elsewhere the file name is all there is.
- The IR of a compile (``triton-trace ir``, the Compiled panel) was made from the kernel module rebuilt in
  triton_trace's private cache (compiled/source.py), so its locations name that cache file and its lines.
  ``readable_ir`` puts back the kernel's own file and line wherever the text names the module: MLIR
  ``loc("file":line:col)``, PTX ``.file`` and ``.loc`` directives and their comments.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Callable, Optional

from ..analysis.units import place

_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>")      # plain IPython's cell names
_MODULE_FILE = re.compile(r"k\w{8}\.py")                      # toolchain.import_module's mkstemp names
_MLIR_LOC = re.compile(r'loc\("([^"]*)":(\d+):(\d+)\)')
_PTX_FILE = re.compile(r'^(\s*\.file\s+(\d+)\s+)"([^"]*)"')
_PTX_LOC = re.compile(r"^(\s*\.loc\s+(\d+)\s+)(\d+)(\s+\d+[^/]*?)\s*(//.*)?$")


def cell_name(file: Optional[str]) -> Optional[str]:
    """``cell In[8]`` for the file of a notebook cell the running IPython knows, else ``file``."""
    if not file:
        return file
    ipython = sys.modules.get("IPython")          # never imported here: outside IPython there is no cell
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    named = getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(file)
    if named:
        return f"cell {named[1]}"
    m = _INPUT.fullmatch(file)
    return f"cell In[{m.group(1)}]" if m else file


def cell_text(text: Optional[str], files) -> Optional[str]:
    """``text`` (a finding's message) with each ``file:line`` of a notebook cell among ``files`` named as
    IPython names it."""
    for file in files:
        name = cell_name(file)
        if text and name != file and file in text:
            text = re.sub(re.escape(file) + r":(\d+)", lambda m: place(name, m.group(1)), text)
    return text


def _is_module_file(path: str) -> bool:
    """The rebuilt kernel module: a mkstemp name in the private cache's modules/ folder (or the scratch
    folder a compile uses when the cache is unusable)."""
    folder = os.path.basename(os.path.dirname(path))
    return bool(_MODULE_FILE.fullmatch(os.path.basename(path))) and (folder == "modules" or
                                                                   folder.startswith("triton_trace_"))


def readable_ir(text: str, original: Callable[[int], tuple], kernel_file: str) -> str:
    """``text`` with every location in the kernel module replaced by the kernel's own file and line.
    ``original(line)``: (file, line) in the user's source of a module line (KernelModule.original)."""
    def label(file):
        return cell_name(file) or "?"

    def mlir(m):
        if not _is_module_file(m.group(1)):
            return m.group(0)
        file, line = original(int(m.group(2)))
        return f'loc("{label(file)}":{line}:{m.group(3)})' if file else m.group(0)

    module_ids = set()
    out = []
    for row in text.splitlines():
        f = _PTX_FILE.match(row)
        if f and _is_module_file(f.group(3)):
            module_ids.add(f.group(2))
            out.append(f'{f.group(1)}"{label(kernel_file)}"')
            continue
        out.append(_MLIR_LOC.sub(mlir, row))
    if not module_ids:
        return "\n".join(out)
    # PTX names its files at the end: a second pass rewrites the .loc lines of the module's file ids
    for k, row in enumerate(out):
        m = _PTX_LOC.match(row)
        if not m or m.group(2) not in module_ids:
            continue
        file, line = original(int(m.group(3)))
        if not file:
            continue
        # a helper from another file keeps the module's line in the directive (one .file per module); the
        # comment says where it is
        at = line if file == kernel_file else m.group(3)
        out[k] = f"{m.group(1)}{at}{m.group(4)}  // {place(label(file), line)}"
    return "\n".join(out)
