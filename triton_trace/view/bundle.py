"""The frontend's ES modules as one classic script, for a notebook output: an output's HTML cannot import
modules by URL (there is no server behind an exported notebook), so the modules the browser page loads
one by one are joined here, each in its own function scope, in import order.

This reads only our own frontend, written in a small subset of module syntax that the joiner checks:
``import { a, b } from "./name.js";`` and ``export`` before a top-level ``function``, ``async function``,
``class`` or ``const``. Anything else (a default export, a re-export, an import of another form) is
refused with the file and line, so a change to the frontend cannot quietly break the notebook.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from ..errors import FrontendError

ENTRY = "embed"          # frontend/embed.js: the notebook's entry module
_IMPORT = re.compile(r'^import \{([\w\s,$]+)\} from "\./(\w+)\.js";[ \t]*$', re.M)
_EXPORT = re.compile(r"^export (?:async function|function|class|const) ([\w$]+)", re.M)
_OTHER = re.compile(r"^\s*(?:import|export)\b", re.M)


BundleError = FrontendError      # the frontend uses module syntax the joiner does not handle


def _module(folder: Path, name: str) -> tuple:
    """(the module's body with its imports and export keywords rewritten, its imports, its exports)."""
    path = folder / f"{name}.js"
    if not path.is_file():
        raise BundleError(f"{path} is missing: the frontend folder is incomplete (reinstall triton_trace)")
    src = path.read_text(encoding="utf-8")
    imports = [(m.group(2), [n.strip() for n in m.group(1).split(",") if n.strip()]) for m in _IMPORT.finditer(src)]
    exports = _EXPORT.findall(src)
    body = _IMPORT.sub(lambda m: f"const {{{m.group(1)}}} = M[{m.group(2)!r}];", src)
    body = re.sub(r"^export (?=async function|function|class|const)", "", body, flags=re.M)
    left = _OTHER.search(body)
    if left:
        line = body.count("\n", 0, left.start()) + 1
        raise BundleError(f"{path}:{line}: module syntax the notebook bundle does not handle: "
                          f"{body[left.start():left.start() + 60].strip()!r} (see triton_trace/view/bundle.py)")
    return body, imports, exports


def _order(folder: Path, entry: str) -> list:
    """Modules in dependency order (each after what it imports), from ``entry``."""
    seen, order, parsed = set(), [], {}

    def visit(name: str, stack: tuple):
        if name in stack:
            raise BundleError(f"import cycle in the frontend: {' -> '.join(stack + (name,))}")
        if name in seen:
            return
        parsed[name] = _module(folder, name)
        for dep, _ in parsed[name][1]:
            visit(dep, stack + (name,))
        seen.add(name)
        order.append(name)

    visit(entry, ())
    return [(name, parsed[name]) for name in order]


@functools.lru_cache(maxsize=4)
def bundle(folder: Path) -> tuple:
    """(the script, its version). The script defines ``window.__ttEmbed = {version, embed}`` once per page;
    a page that already has this version keeps it."""
    parts = []
    for name, (body, imports, exports) in _order(folder, ENTRY):
        for dep, names in imports:
            missing = [n for n in names if n not in _order_exports(folder, dep)]
            if missing:
                raise BundleError(f"{folder / (name + '.js')} imports {', '.join(missing)} from ./{dep}.js, "
                                  f"which does not export them")
        parts.append(f'M[{name!r}] = (function () {{\n"use strict";\n{body}\n'
                     f"return {{ {', '.join(exports)} }};\n}})();")
    code = "\n".join(parts)
    version = hashlib.sha256(code.encode()).hexdigest()[:16]
    script = (f'(function () {{\n"use strict";\nif (window.__ttEmbed && window.__ttEmbed.version === "{version}") '
              f"return;\nconst M = {{}};\n{code}\nwindow.__ttEmbed = {{ version: \"{version}\", embed: M[{ENTRY!r}].embed }};"
              f"\n}})();")
    return script_safe(script, "the frontend bundle"), version


def _order_exports(folder: Path, name: str) -> list:
    return _module(folder, name)[2]


def script_safe(text: str, what: str) -> str:
    """``text`` unchanged, checked to be safe inside an inline <script> element: no closing tag and no
    comment opener (which, before a "<script", changes how the element ends)."""
    low = text.lower()
    for bad in ("</script", "<!--"):
        if bad in low:
            raise BundleError(f"{what} contains {bad!r}, which would break out of an inline <script>")
    return text
