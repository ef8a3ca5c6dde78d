"""The one route table: every API view's path, the answer that serves it (answers.py), the payload it returns
(contract.py, blockview.py, compiledview.py) and its parameters with their bounds.

Three readers, one table: the Flask app registers its routes from it (app.py), a notebook output answers the
very same URLs through it (embed.py), and the page builds every request URL from it (``frontend_table()``
reaches frontend/routes.js as JSON: the browser page's ``data-tt-routes``, a notebook output's ``routes``).
So the URL a click asks for is the key a notebook output stores its answer under, by construction.

Parameters are parsed here, before an answer runs: a malformed or out-of-bounds one is a 400 that names it.
These are the bounds a request can be checked against on its own; an answer checks the rest against the
trace (a launch that exists, a program inside its grid, a tensor's rank).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Optional
from urllib.parse import parse_qsl, urlencode

from . import answers
from .compiledview import ACCEPTED
from .limits import MAX_OPS
from .payload import ApiError

BIG = 1 << 40                       # no index of a trace comes near it; bounds every integer of a request
MAX_DIMS = 64                       # a tensor dimension picked as the plane's rows or columns
MAX_INDEX = 8                       # entries of an element index
DEFAULT_TARGET = "sm_90"            # the Compiled panel's target (frontend/compiled.js opens at it)
_INT = re.compile(r"-?[0-9]{1,12}")  # ASCII digits only: \d takes "０" (a fullwidth zero) too
_SEGMENT = re.compile(r"<(?:(\w+):)?(\w+)>")


@dataclass(frozen=True)
class Param:
    """One parameter. ``int``: an integer in lo..hi. ``ints``: count[0] to count[1] comma-separated
    integers, each in lo..hi, or one of ``words`` (window=auto). ``choice``: one of ``words``.
    Absent or empty, it is ``default``."""
    name: str
    kind: str = "int"
    lo: int = 0
    hi: int = BIG
    count: tuple = (1, 1)
    words: tuple = ()
    default: object = None

    def parse(self, value):
        if value is None or value == "":
            return self.default
        if isinstance(value, int):          # a path integer, already digits to Flask's converter
            return self._bounded(value)
        text = str(value)
        if self.kind == "choice":
            if text not in self.words:
                raise ApiError(f"parameter '{self.name}' is one of {', '.join(self.words)}; got {text[:40]!r}")
            return text
        if self.kind == "int":
            return self._int(text)
        if text in self.words:
            return text
        parts = text.split(",")
        lo, hi = self.count
        if not lo <= len(parts) <= hi:
            many = str(lo) if lo == hi else f"{lo} to {hi}"
            also = "".join(f"{w} or " for w in self.words)
            raise ApiError(f"parameter '{self.name}' is {also}{many} comma-separated integers, got {len(parts)}: "
                           f"{text[:40]!r}")
        return tuple(self._int(p.strip()) for p in parts)

    def _int(self, text: str) -> int:
        if not _INT.fullmatch(text):
            raise ApiError(f"parameter '{self.name}' must be an integer, got {text[:40]!r}")
        return self._bounded(int(text))

    def _bounded(self, v: int) -> int:
        if not self.lo <= v <= self.hi:
            raise ApiError(f"parameter '{self.name}' must be in {self.lo}..{self.hi}, got {str(v)[:40]}")
        return v


@dataclass(frozen=True)
class Route:
    """One API view. ``rule``: Flask's, whose ``<int:x>`` and ``<x>`` segments are the path parameters.
    ``answer``: the function of answers.py, looked up on every call (so a test can replace it), called as
    ``answer(context, *path values, {query values by name})`` (without the mapping when there is no query
    parameter). ``context``: what the answer reads, the TraceIndex ("trace") or the app's "reloader"."""
    name: str
    rule: str
    answer: str
    payload: str
    params: tuple = ()
    methods: tuple = ("GET",)
    mimetype: str = "application/json"
    context: str = "trace"

    @property
    def path_names(self) -> tuple:
        return tuple(m.group(2) for m in _SEGMENT.finditer(self.rule))

    @property
    def query(self) -> tuple:
        return tuple(p for p in self.params if p.name not in self.path_names)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @cached_property
    def pattern(self) -> re.Pattern:
        """The rule as a regular expression over a URL's path (its converters' own: digits, or no slash)."""
        parts, at = [], 0
        for m in _SEGMENT.finditer(self.rule):
            parts += [re.escape(self.rule[at:m.start()]), f"(?P<{m.group(2)}>{'[0-9]+' if m.group(1) == 'int' else '[^/]+'})"]
            at = m.end()
        return re.compile("".join(parts) + re.escape(self.rule[at:]))


@dataclass(frozen=True)
class Page:
    """A route that is not an API view (the page, its files); app.py holds its handler by ``name``."""
    name: str
    rule: str
    methods: tuple = ("GET",)


LAUNCH, TENSOR, SEQ = Param("i"), Param("t"), Param("seq")
PID = Param("pid", "ints", lo=-BIG, count=(1, 3))        # x[,y[,z]]; negative ones are outside every grid (404)
SELECTION = (Param("mode", "choice", words=("all", "program", "op"), default="all"),
             Param("program", "ints", lo=-BIG, count=(1, 3)), Param("op"))

ROUTES = (
    Route("trace", "/api/trace", "trace", "TracePayload"),
    Route("version", "/api/version", "version", "reload.py's {watching, version, error}", context="reloader"),
    Route("launch", "/api/launch/<int:i>", "launch", "LaunchPayload", (LAUNCH,)),
    Route("grid", "/api/launch/<int:i>/grid", "grid", "GridPayload", (LAUNCH, Param("z", default=0))),
    Route("program", "/api/launch/<int:i>/program/<pid>", "program", "ProgramPayload",
          (LAUNCH, PID, Param("offset", default=0), Param("limit", lo=1, hi=MAX_OPS, default=MAX_OPS))),
    # the query's order is the one the page has always sent (a notebook output stores answers by URL)
    Route("tensor", "/api/launch/<int:i>/tensor/<int:t>", "tensor", "TensorPayload",
          (LAUNCH, TENSOR, *SELECTION, Param("rows", hi=MAX_DIMS - 1), Param("cols", hi=MAX_DIMS - 1),
           Param("wrap", lo=1, hi=1 << 31), Param("index", "ints", lo=-BIG, count=(1, MAX_INDEX)),
           Param("window", "ints", lo=-BIG, count=(4, 4), words=("auto",)))),
    Route("planes", "/api/launch/<int:i>/planes/<int:t>", "planes", "PlanesPayload",
          (LAUNCH, TENSOR, *SELECTION, Param("rows", hi=MAX_DIMS - 1), Param("cols", hi=MAX_DIMS - 1),
           Param("dim", hi=MAX_DIMS - 1), Param("index", "ints", lo=-BIG, count=(1, MAX_INDEX)),
           Param("first", default=0))),
    Route("values_npy", "/api/launch/<int:i>/tensor/<int:t>/values.npy", "values_npy", "a NumPy .npy file (download.py)",
          (LAUNCH, TENSOR, *SELECTION), mimetype="application/octet-stream"),
    Route("storage", "/api/launch/<int:i>/storage/<int:t>", "storage", "StoragePayload",
          (LAUNCH, TENSOR, *SELECTION, Param("wrap", lo=1, hi=BIG),
           Param("window", "ints", lo=-BIG, count=(4, 4), words=("auto",)))),
    Route("tiles", "/api/launch/<int:i>/tiles/<pid>", "tiles", "TilesPayload", (LAUNCH, PID, Param("step"))),
    Route("block", "/api/launch/<int:i>/block/<pid>/<int:seq>", "block", "BlockPayload", (LAUNCH, PID, SEQ)),
    Route("compiled", "/api/launch/<int:i>/compiled", "compiled", "CompiledPayload",
          (LAUNCH, Param("target", "choice", words=tuple(sorted(ACCEPTED)), default=DEFAULT_TARGET))),
    Route("diff", "/api/launch/<int:i>/diff/<int:t>", "diff", "DiffPayload", (LAUNCH, TENSOR)),
    Route("compare", "/api/launch/<int:i>/compare", "compare", "ComparePayload", (LAUNCH,)),
    Route("touches", "/api/launch/<int:i>/touches/<int:t>", "touches", "TouchesPayload",
          (LAUNCH, TENSOR, Param("index", "ints", lo=-BIG, count=(1, MAX_INDEX), default=()))),
    Route("feeds", "/api/launch/<int:i>/feeds/<int:t>", "feeds", "FeedsPayload",
          (LAUNCH, TENSOR, Param("index", "ints", lo=-BIG, count=(1, MAX_INDEX), default=()))),
    Route("findings", "/api/launch/<int:i>/findings", "findings", "FindingsPayload", (LAUNCH,)),
    Route("charts", "/api/launch/<int:i>/charts", "charts", "ChartsPayload", (LAUNCH,)),
    Route("precision", "/api/launch/<int:i>/precision", "precision", "PrecisionPayload", (LAUNCH,)),
)
BY_NAME = {r.name: r for r in ROUTES}

# Everything else the app serves. The last one answers any other /api/ path with a 404 naming contract.py.
PAGES = (Page("index", "/"), Page("static_file", "/static/<path:name>"), Page("favicon", "/favicon.svg"),
         Page("plotly_js", "/vendor/plotly.min.js"), Page("plotly_guards", "/vendor/plotly-guards.json"),
         Page("api_unknown", "/api/<path:rest>"))


# --------------------------------------------------------------------------------------------------------
# answering a request
# --------------------------------------------------------------------------------------------------------
def arguments(route: Route, path: Mapping, query: Mapping) -> tuple:
    """(path values in the rule's order, {query name: value}), each parsed and checked (ApiError: a 400)."""
    values = tuple(route.param(n).parse(path.get(n)) for n in route.path_names)
    return values, {p.name: p.parse(query.get(p.name)) for p in route.query}


def call(route: Route, context, path: Mapping, query: Mapping):
    """The answer to one request of ``route``: its encoded JSON (bytes for a file)."""
    values, args = arguments(route, path, query)
    answer = getattr(answers, route.answer)
    return answer(context, *values, args) if route.query else answer(context, *values)


def match(url: str) -> Optional[tuple]:
    """(route, path values, query values) of a URL of this table (as ``url()`` writes them), else None.
    The first value of a repeated query parameter counts, as in Flask's ``request.args.get``."""
    base, _, qs = url.partition("?")
    for route in ROUTES:
        m = route.pattern.fullmatch(base)
        if m:
            query: dict = {}
            for k, v in parse_qsl(qs, keep_blank_values=True):
                query.setdefault(k, v)
            return route, m.groupdict(), query
    return None


def answer(context, url: str):
    """What the app answers for ``url`` (a notebook output's stored answers are these)."""
    found = match(url)
    if found is None:
        raise ApiError(f"no API endpoint {url[:80]}; see triton_trace/view/routes.py", 404)
    route, path, query = found
    return call(route, context, path, query)


# --------------------------------------------------------------------------------------------------------
# building a URL (frontend/routes.js's apiUrl builds the same string from frontend_table())
# --------------------------------------------------------------------------------------------------------
def _text(v) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, (tuple, list)) else str(v)


def url(name: str, **values) -> str:
    """The URL of one request: path values are required, query values that are None are left out, lists
    are joined with commas, and the query is in the table's order, encoded as URLSearchParams encodes it."""
    route = BY_NAME[name]
    known = {p.name for p in route.params}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"the {name} route takes {sorted(known)}, not {unknown}")
    missing = [n for n in route.path_names if values.get(n) is None]
    if missing:
        raise ValueError(f"the {name} route needs {missing}")
    path = _SEGMENT.sub(lambda m: _text(values[m.group(2)]), route.rule)
    query = [(p.name, _text(values[p.name])) for p in route.query if values.get(p.name) is not None]
    return path + ("?" + urlencode(query) if query else "")


def frontend_table() -> dict:
    """What the page builds request URLs from: {name: {"path": "/api/launch/{i}/grid", "query": ["z"]}}."""
    return {r.name: {"path": _SEGMENT.sub(lambda m: "{" + m.group(2) + "}", r.rule), "query": [p.name for p in r.query]}
            for r in ROUTES}
