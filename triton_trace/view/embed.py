"""The web viewer inside a notebook output: the browser page's frontend (bundled by bundle.py) mounted in
the output, fed by the very payloads the web app serves (answers.py), inlined.

An output has no server behind it (an exported notebook, a page opened offline), so it carries a snapshot:
the answers its views ask for, each compressed and stored under the URL the viewer asks for it by (here and
in frontend/routes.js built from routes.py's table, and answered through it as the app answers it), chosen
in order of use (the trace, each launch's panels and charts, the tensors over all programs, then programs
with their tensor views: the one asked for, those with findings, then in grid order; the opened launch's
Compiled panel for COMPILED_TARGET before each op's own views) until a byte budget is spent. A view outside
the snapshot says so, and how to see it. The JSON is escaped for a script element; plotly.js and the
frontend come once per page (notebook.py).
"""
from __future__ import annotations

import base64
import json
import secrets
import zlib
from importlib import resources
from pathlib import Path
from typing import Optional

import numpy as np

from ..analysis.units import nbytes
from . import routes as R
from .bundle import bundle, script_safe
from .limits import (EMBED_ALL_BYTES, EMBED_BYTES, EMBED_ELEMENT_SHARE, EMBED_ELEMENTS, EMBED_LAUNCHES, EMBED_STEPS,
                     MULTIPLES_DEFAULT)
from .lookup import TraceIndex
from .payload import ApiError
from .planesview import bounded as planes_bounded
from .tensormap import invertible, view_index
from .tensorview import elements, encode_bounded


def frontend_dir() -> Path:
    """The shipped frontend (``triton_trace/frontend`` in an installed wheel), else the repository's
    ``frontend/`` (a source checkout or an editable install). Looked up by path: the frontend has no
    ``__init__.py``, and importlib.resources gives a namespace package a MultiplexedPath, not a folder."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "frontend", package.parent / "frontend"):
        if (candidate / "index.html").is_file():
            return candidate
    try:
        root = resources.files("triton_trace.frontend")
        for path in getattr(root, "_paths", [root]):
            if Path(str(path)).joinpath("index.html").is_file():
                return Path(str(path))
    except (ModuleNotFoundError, TypeError):
        pass
    return package.parent / "frontend"


def markup() -> str:
    """The viewer's elements: the body of frontend/index.html, the one place they are written."""
    page = (frontend_dir() / "index.html").read_text(encoding="utf-8")
    start = page.index(">", page.index("<body")) + 1
    return page[start:page.rindex("</body>")].strip()


def style() -> str:
    """frontend/style.css; every rule is scoped to ``.tt-app``, so it styles nothing else on the page."""
    return script_safe((frontend_dir() / "style.css").read_text(encoding="utf-8"), "frontend/style.css")


def assets() -> str:
    """What every embedded viewer on a page needs once: the frontend bundle (plotly.js is notebook.py's)."""
    code, _ = bundle(frontend_dir())
    return f'<script type="text/javascript">{code}</script>'


def json_for_script(text: str) -> str:
    """JSON text safe inside <script type="application/json">: <, > and & (and the two line separators
    JavaScript treats as line ends) become \\u escapes, which only ever occur inside JSON strings."""
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# --------------------------------------------------------------------------------------------------------
# the snapshot: the URLs the frontend requests (view.js, tensor.js), with the answers the app would give
# --------------------------------------------------------------------------------------------------------
COMPILED_TARGET = R.DEFAULT_TARGET      # the Compiled panel's default target; others are not carried


def compiled_path(i: int) -> str:
    return R.url("compiled", i=i, target=COMPILED_TARGET)


def panels_first(shape) -> bool:
    """Whether tensor.js opens a tensor of ``shape`` as small multiples (multiples.js's wantsPanels)."""
    return len(shape) == 3 and 0 < int(shape[0]) <= MULTIPLES_DEFAULT


def tensor_path(i: int, t: int, mode: str, pid=None, op=None, shape=()) -> str:
    """The URL tensor.js asks for a tensor view of ``mode`` by (it zooms to the selection by default; a
    tensor of ``shape`` it opens as small multiples is asked for by the planes route)."""
    program, op = pid if mode != "all" else None, op if mode == "op" else None
    if panels_first(shape):
        return R.url("planes", i=i, t=t, mode=mode, program=program, op=op)
    return R.url("tensor", i=i, t=t, mode=mode, program=program, op=op, window="auto" if mode != "all" else None)


def storage_path(i: int, t: int, mode: str, pid=None, op=None) -> str:
    """The URL storage.js asks for the storage beside a tensor view of ``mode`` (zoomed as that view is)."""
    return R.url("storage", i=i, t=t, mode=mode, program=pid if mode != "all" else None,
                 op=op if mode == "op" else None, window="auto" if mode != "all" else None)


def pack(body: str) -> str:
    """One answer as the output stores it: zlib-compressed, base64 (embed.js inflates it when asked for).
    The views' JSON is repetitive columns of numbers: compressed, an output carries several times more."""
    return base64.b64encode(zlib.compress(body.encode("utf-8"), 9)).decode("ascii")


def all_programs_view(ti: TraceIndex, i: int, t: int) -> tuple:
    """(URL, a builder) of the tensor view over all programs, lighter than the app's: it is drawn for
    every element the launch touched, so its values (then program ids) go first, as the view then says."""
    shape = ti.trace.launches[i].tensors[t].shape
    path = tensor_path(i, t, "all", shape=shape)
    light = planes_bounded if panels_first(shape) else encode_bounded
    return path, lambda: light(json.loads(R.answer(ti, path)), EMBED_ALL_BYTES)


class Snapshot:
    """Answers by URL, packed, added until ``budget`` bytes of packed answers are spent."""

    def __init__(self, ti: TraceIndex, budget: int):
        self.ti, self.budget, self.used = ti, int(budget), 0
        self.answers: dict = {}
        self.memory: dict = {}      # (launch, pid) -> [(seq, tensor)] of the programs whose ops are in
        self.full = False

    def add(self, path: str, build, force: bool = False) -> bool:
        if path in self.answers:
            return True
        try:
            body = build()
        except ApiError:          # a view the app would refuse too (an op that touches no tensor...)
            return False
        packed = pack(body)
        if not force and self.used + len(packed) > self.budget:
            self.full = True
            return False
        self.answers[path] = packed
        self.used += len(packed)
        return True

    def ask(self, path: str, force: bool = False) -> bool:
        """Add the app's own answer to ``path`` (a URL of routes.py's table)."""
        return self.add(path, lambda: R.answer(self.ti, path), force)

    def launch(self, i: int, force: bool = False) -> bool:
        ok = all([self.ask(R.url("launch", i=i), force), self.ask(R.url("grid", i=i, z=0), force),
                  self.ask(R.url("findings", i=i), force)])
        if ok and self.ti.trace.launches[i].tensors:
            self.add(*all_programs_view(self.ti, i, 0), force)
        ok = ok and self.ask(R.url("charts", i=i), force)
        return ok and self.ask(R.url("precision", i=i), force)       # the Source panel's precision column

    def program(self, i: int, pid: tuple, force: bool = False) -> bool:
        """The program's ops (and the grid of its z-slice); remembers the memory ops it ran."""
        if pid[2] and not self.ask(R.url("grid", i=i, z=pid[2]), force):
            return False
        path = R.url("program", i=i, pid=pid)
        body = R.answer(self.ti, path)
        if not self.add(path, lambda: body, force):
            return False
        ops = json.loads(body)["ops"]
        self.memory[(i, pid)] = [(s, t) for s, k, t in zip(ops["seq"], ops["kind"], ops["tensor"]) if k < 10 and t >= 0]
        return True

    def layouts(self, i: int, pid: tuple) -> None:
        """The program's tiles (every step, then each of the first EMBED_STEPS) and the storage beside each of
        its tensor views: a few runs each, so they always go in, as the program's own views do."""
        path = R.url("tiles", i=i, pid=pid)
        body = R.answer(self.ti, path)
        self.add(path, lambda: body, force=True)
        for step in range(min(json.loads(body)["steps"], EMBED_STEPS)):
            self.ask(R.url("tiles", i=i, pid=pid, step=step), force=True)
        memory = self.memory.get((i, pid), [])
        for t in sorted({t for _, t in memory}):
            self.ask(storage_path(i, t, "program", pid), force=True)
        for seq, t in memory:
            self.ask(storage_path(i, t, "op", pid, seq), force=True)

    def views(self, i: int, pid: tuple, ops: bool, force: bool = False) -> bool:
        """The tensor views of a program whose ops are in: each tensor it touched, or (``ops``) each op's."""
        memory, tensors = self.memory[(i, pid)], self.ti.trace.launches[i].tensors
        if not ops:
            return all([self.ask(tensor_path(i, t, "program", pid, shape=tensors[t].shape), force)
                        for t in sorted({t for _, t in memory})])
        ok = True
        for seq, t in memory:          # each op's tensor view and its block
            ok = self.ask(tensor_path(i, t, "op", pid, seq, tensors[t].shape), force) and ok
            ok = self.ask(R.url("block", i=i, pid=pid, seq=seq), force) and ok
        return ok

    def elements(self, i: int, pid: tuple, budget: int) -> int:
        """The accesses to each element the program wrote and the loads that fed it (an element's click
        asks for both), until ``budget`` more bytes are spent or EMBED_ELEMENTS elements are in."""
        ix, stop, n = self.ti.launch(i), self.used + budget, 0
        writes = ix.program_rows(ix.linear(pid))
        writes = writes[ix.memory[writes] & (ix.write[writes] > 0) & (ix.launch.ops["tensor"][writes] >= 0)]
        for t in sorted({int(v) for v in ix.launch.ops["tensor"][writes]}):
            info = ix.launch.tensors[t]
            table = elements(ix, writes[ix.launch.ops["tensor"][writes] == t], t)
            if not invertible(info):
                continue
            idx, ok = view_index(info, table.offsets[(table.kinds & 2) > 0][:EMBED_ELEMENTS])
            for index in idx[ok].tolist():
                if n >= EMBED_ELEMENTS or self.used >= stop or self.full:
                    return n
                paths = [R.url(name, i=i, t=t, index=index) for name in ("touches", "feeds")]
                if not all([self.ask(path) for path in paths]):
                    return n
                n += 1
        return n


def _programs(ti: TraceIndex, i: int, first: Optional[tuple]) -> list:
    """Programs of launch ``i`` in the order the snapshot takes them: ``first``, those with findings, then
    every recorded program in grid order."""
    ix = ti.launch(i)
    gx, gy, _ = ix.grid
    found = json.loads(R.answer(ti, R.url("findings", i=i)))["program"]
    order = [tuple(first)] if first else []
    order += [tuple(p) for p in found if p]
    lin = np.flatnonzero(ix.recorded)
    order += [(int(v % gx), int(v // gx % gy), int(v // (gx * gy))) for v in lin[:4096]]
    seen, out = set(), []
    for p in order:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def snapshot(ti: TraceIndex, start: dict, budget: int = EMBED_BYTES) -> tuple:
    """(packed answers by path, a note saying what was left out). ``start``: the place the view opens at."""
    snap = Snapshot(ti, budget)
    snap.ask(R.url("trace"), force=True)
    n = len(ti.trace.launches)
    first = start.get("li") or 0
    if n:
        snap.launch(first, force=True)      # the view must open, whatever the budget
    launches = [first] + [i for i in range(min(n, EMBED_LAUNCHES)) if i != first]
    for i in launches[1:]:
        snap.launch(i)
    progs = {}
    for i in launches:
        if snap.full and i != first:
            break
        progs[i] = _programs(ti, i, tuple(start["pid"]) if start.get("pid") and i == first else None)
    if start.get("pid"):         # the place the view opens at, whatever the budget
        asked = tuple(start["pid"])
        snap.program(first, asked, force=True)
        snap.views(first, asked, ops=False, force=True)
        snap.views(first, asked, ops=True, force=True)
        snap.layouts(first, asked)
    # what a click on an element shows (its accesses, what fed it): the elements the opened program wrote
    fed = None
    if n and (progs.get(first) or start.get("pid")):
        writer = tuple(start["pid"]) if start.get("pid") else progs[first][0]
        fed = (writer, snap.elements(first, writer, budget // EMBED_ELEMENT_SHARE))
    # then, in the order the views are used: every program's ops, the tensors of each, then each op's
    took, viewed = {}, {i: 0 for i in progs}
    for i, ps in progs.items():
        took[i] = []
        for pid in ps:
            if (i, pid) not in snap.memory and not snap.program(i, pid):
                break
            took[i].append(pid)
    for ops in (False, True):
        for i in progs:
            for pid in took[i]:
                if not snap.views(i, pid, ops):
                    break
                viewed[i] += not ops
        if not ops:              # the other tensors over all programs, after the programs' own views
            for i in progs:
                for t in range(1, len(ti.trace.launches[i].tensors)):
                    snap.add(*all_programs_view(ti, i, t))
            # a compile takes seconds: only while there is budget left for it
            if n and not snap.full:
                snap.ask(compiled_path(first))
    if n:                        # with what is left: the storage beside each tensor's view over all programs
        for t in range(len(ti.trace.launches[first].tensors)):
            snap.ask(storage_path(first, t, "all"))
    parts = []
    for i, ps in progs.items():
        total = int(ti.launch(i).recorded.sum())
        if len(took[i]) < total or viewed[i] < total:
            parts.append(f"launch {i}: the ops of {len(took[i])} of {total} programs, the tensor views of {viewed[i]}")
    if n > len(progs):
        parts.append(f"{n - len(progs)} launch(es) not included")
    held = ("it holds " + "; ".join(parts) if parts else "it holds every program")
    if n:
        held += (f", the Compiled panel of launch {first} for {COMPILED_TARGET} only" if compiled_path(first) in snap.answers
                 else f", not the Compiled panel of launch {first}")
    if fed and fed[1]:
        held += f", what fed the first {fed[1]} element(s) program {fed[0]} wrote"
    note = held + \
        f", in {nbytes(snap.used)}; show(..., budget=) takes more, triton_trace.launch() serves everything"
    return snap.answers, note


# --------------------------------------------------------------------------------------------------------
# the output's HTML
# --------------------------------------------------------------------------------------------------------
NEEDS_JS = ("This triton_trace view needs JavaScript: trust the notebook (Jupyter: File > Trust Notebook) "
            "and run the cell again, or open the trace in the browser with triton_trace.launch().")


def viewer_html(ti: TraceIndex, start: Optional[dict] = None, budget: int = EMBED_BYTES) -> str:
    """One output: the viewer's elements, its payloads, and the call that mounts it. Needs ``assets()``
    (and plotly.js for the charts) earlier on the page."""
    start = start or {"view": "list"}
    answers, note = snapshot(ti, start, budget)
    data = ('{"note":' + json.dumps(note) + ',"start":' + json.dumps(start, sort_keys=True) +
            ',"routes":' + json.dumps(R.frontend_table(), sort_keys=True) + ',"payloads":{' +
            ",".join(json.dumps(k) + ":" + json.dumps(v) for k, v in sorted(answers.items())) + "}}")
    uid = "tt-" + secrets.token_hex(6)
    _, version = bundle(frontend_dir())
    mount = (f'(function () {{ var root = document.getElementById("{uid}"), tries = 0;'
             f' function go() {{ if (!window.__ttEmbed) {{ if (++tries < 50) return setTimeout(go, 100);'
             f' root.querySelector(".tt-needs-js").textContent = "The triton_trace viewer script is not on this page:'
             f' the first triton_trace output of a notebook carries it; display this again."; return; }}'
             f' root.querySelector(".tt-needs-js").remove();'
             f' window.__ttEmbed.embed(root, JSON.parse(document.getElementById("{uid}-data").textContent)); }}'
             f' go(); }})();')
    return (f'<style>{style()}</style>'
            f'<div class="tt-app tt-embedded" id="{uid}" data-tt-version="{version}">'
            f'<p class="tt-needs-js banner">{NEEDS_JS}</p>{markup()}</div>'
            f'<script type="application/json" id="{uid}-data">{json_for_script(data)}</script>'
            f'<script type="text/javascript">{mount}</script>')
