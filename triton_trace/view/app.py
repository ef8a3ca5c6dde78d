"""The web app: a Flask app factory over a frozen Trace (server.py serves it).

The routes only parse and check request parameters and hand them to payload.py, which documents every
endpoint. Bad parameters get a 4xx JSON error, never a 500. Pages carry a Content-Security-Policy that
allows no outside origin, no inline script and no inline style; all data reaches the page through the
JSON API and is written into the page with ``textContent``. The app keeps its state (the trace and what
it derives from it) in ``app.extensions``: nothing lives at module level.
"""
from __future__ import annotations

import hmac
import ipaddress
import os
import re
import socket
from importlib import resources
from pathlib import Path
from typing import Optional

import numpy as np
from flask import Blueprint, Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException
from werkzeug.routing import IntegerConverter

from ..errors import TraceUsageError
from ..model import Trace
from . import payload as P
from .payload import encode
from .lookup import TraceIndex
from .tensormap import PlaneError
from .tensorview import tensor_payload

# The page sends the token from its own URL (?token=) in this header with every API request. There is no
# cookie: a cookie is sent to every port of the host, so another local app would receive it.
TOKEN_HEADER = "X-TT-Token"
# Host names a server answers to. DNS rebinding: a web page whose own domain re-resolves to 127.0.0.1 is
# same-origin with this server, so anything but these names is refused. A shared server also answers to
# this machine's names, any IP literal (a rebinding attack needs a domain name), and the names passed as
# ``allowed_hosts`` (``launch(allowed_hosts=...)``, ``triton-trace view --allow-host``).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# The frontend's code and plotly.js are the package's files and hold nothing from the trace; they are
# served without the token because a cross-site frame cannot carry it (a module's imports and the page's
# <script> tags send no header and, there, no cookie). The page itself and every /api/ answer need it.
PUBLIC_PREFIXES = ("/static/", "/vendor/", "/favicon.svg")
# No inline script and no inline style. plotly.js would inject <style> elements: frontend/index.html gives
# it a stylesheet to fill through the CSSOM instead (id "plotly.js-style-global"), and the ids that guard
# its bundled map CSS are placed in the page before it loads (/vendor/plotly-guards.json), so it skips it.
# Only pages on this machine may frame the UI (a local Jupyter notebook's iframe(), see notebook.py).
# img-src blob: lets plotly's "Download plot as a PNG" draw its SVG into a canvas (no outside origin).
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; font-src 'self'; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'self' http://127.0.0.1:* http://localhost:*")
_GUARD = re.compile(rb'getElementById\("([0-9a-f]{16,128})"\)')
_STATIC_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
_INT = re.compile(r"-?[0-9]{1,12}")       # ASCII digits only: \d takes "０" (a fullwidth zero) too
# The tab icon: four grid cells in the viridis colours of the program grid. Served from here because the
# wheel ships the frontend's .html, .js and .css files only.
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#111827"/><rect x="3" y="3" width="4" height="4" fill="#fde725"/><rect x="9" y="3" width="4" '
           'height="4" fill="#21918c"/><rect x="3" y="9" width="4" height="4" fill="#3b528b"/><rect x="9" y="9" '
           'width="4" height="4" fill="#5ec962"/></svg>')

api = Blueprint("api", __name__, url_prefix="/api")
pages = Blueprint("pages", __name__)


# --------------------------------------------------------------------------------------------------------
# the app factory
# --------------------------------------------------------------------------------------------------------
def create_app(trace, token: Optional[str] = None, allowed_hosts=()) -> Flask:
    """A Flask app that serves ``trace`` (a Trace or the path of a trace file).

    With ``token`` (a shared server), every page and API request must carry it (``?token=`` or the
    ``X-TT-Token`` header). Requests whose Host is not an allowed name get 403 (see LOOPBACK_HOSTS).
    """
    if isinstance(trace, (str, os.PathLike)):
        from ..store import load
        trace = load(trace)
    if not isinstance(trace, Trace):
        raise TraceUsageError(f"the web app shows a triton_trace.Trace or a trace file path; got {type(trace).__name__}")
    app = Flask(__name__, static_folder=None)
    app.url_map.merge_slashes = False     # "/static//etc/passwd" is a 404, not a redirect
    app.url_map.converters["int"] = AsciiInt
    app.config["TT_TOKEN"] = token
    app.config["TT_HOSTS"] = _allowed_hosts(bool(token), allowed_hosts)
    app.extensions["triton_trace"] = TraceIndex(trace, analyze=_analyzer())
    app.extensions["triton_trace.static"] = _static_files()
    app.register_blueprint(api)
    app.register_blueprint(pages)
    app.before_request(_check_host)
    app.before_request(_check_token)
    app.after_request(_secure_headers)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(P.ApiError, lambda e: _error(str(e), e.status))
    app.register_error_handler(PlaneError, lambda e: _error(str(e), 400))
    app.register_error_handler(Exception, _internal_error)
    return app


def _analyzer():
    try:
        from ..analysis import analyze
    except ImportError:
        return None
    return lambda trace: analyze(trace, max_findings=P.MAX_FINDINGS)


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


def _static_files() -> dict:
    """The frontend's servable files by name. Requests are looked up here, never joined onto a path."""
    root = frontend_dir()
    files = {p.name: p for p in root.iterdir() if p.is_file() and p.suffix in _STATIC_TYPES} if root.is_dir() else {}
    plotly = Path(str(resources.files("plotly"))) / "package_data" / "plotly.min.js"
    if plotly.is_file():
        files["plotly.min.js"] = plotly
    return files


def _ti() -> TraceIndex:
    return current_app.extensions["triton_trace"]


# --------------------------------------------------------------------------------------------------------
# access token, headers, errors
# --------------------------------------------------------------------------------------------------------
class AsciiInt(IntegerConverter):
    """Route integers in ASCII digits only (werkzeug's takes any Unicode digit)."""
    regex = r"[0-9]+"


def _allowed_hosts(shared: bool, extra) -> frozenset:
    if isinstance(extra, str):
        extra = [extra]
    names = set(LOOPBACK_HOSTS) | {str(h).strip().lower().strip("[]") for h in extra or () if str(h).strip()}
    if shared:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def _host_name(host: str) -> str:
    """The name part of a Host header: "[::1]:5001" -> "::1", "Example.org:80" -> "example.org"."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _check_host():
    name = _host_name(request.host or "")
    cfg = current_app.config
    if name in cfg["TT_HOSTS"] or (cfg.get("TT_TOKEN") and _is_ip(name)):
        return None
    return _error(f"host name {name[:80]!r} is not served here (allowed: "
                  f"{', '.join(sorted(cfg['TT_HOSTS']))}); see README, 'The web UI'", 403)


def _check_token():
    want = current_app.config.get("TT_TOKEN")
    if not want or request.path.startswith(PUBLIC_PREFIXES):
        return None
    given = request.args.get("token") or request.headers.get(TOKEN_HEADER) or ""
    if not hmac.compare_digest(given.encode(), want.encode()):
        return _error("this server is shared with an access token; open the URL it printed", 403)
    return None


def _secure_headers(resp):
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    if request.path.startswith("/api/"):
        resp.headers["Cache-Control"] = "no-store"
    return resp


def _error(message: str, status: int):
    resp = jsonify({"error": message, "status": status})
    resp.status_code = status
    return resp


def _http_error(e: HTTPException):
    return _error(e.description or e.name, e.code or 500)


def _internal_error(e: Exception):
    current_app.logger.exception("unhandled error")
    return _error(f"internal error: {type(e).__name__}", 500)


# --------------------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------------------
def _int(text: Optional[str], name: str, default=None, lo: int = 0, hi: int = 1 << 40):
    if text is None or text == "":
        if default is None:
            raise P.ApiError(f"parameter '{name}' is required")
        return default
    if not _INT.fullmatch(text):
        raise P.ApiError(f"parameter '{name}' must be an integer, got {text[:40]!r}")
    v = int(text)
    if not lo <= v <= hi:
        raise P.ApiError(f"parameter '{name}' must be in {lo}..{hi}, got {v}")
    return v


def _ints(text: str, name: str) -> tuple:
    parts = text.split(",")
    if len(parts) > 8:
        raise P.ApiError(f"parameter '{name}' has too many entries")
    return tuple(_int(p.strip(), name, lo=-(1 << 40)) for p in parts)


def _launch(i: int) -> int:
    n = len(_ti().trace.launches)
    if not 0 <= i < n:
        raise P.ApiError(f"unknown launch {i}; the trace has {n} launch(es)", 404)
    return i


def _program(i: int, text: Optional[str]) -> tuple:
    if not text:
        raise P.ApiError("parameter 'program' is required, as x,y,z")
    pid = _ints(text, "program")
    if len(pid) > 3:
        raise P.ApiError(f"a program id has 1 to 3 coordinates, got {text[:40]!r}")
    pid = pid + (0,) * (3 - len(pid))
    grid = _ti().launch(i).grid
    if not all(0 <= v < n for v, n in zip(pid, grid)):
        raise P.ApiError(f"program {pid} is outside the grid {tuple(grid)}", 404)
    return pid


# --------------------------------------------------------------------------------------------------------
# routes
# --------------------------------------------------------------------------------------------------------
def _json(body: str):
    return current_app.response_class(body, mimetype="application/json")


def _once(key, build):
    """The encoded JSON of a payload that never changes for this trace, built on first request."""
    return _json(_ti().memo(("json",) + key, lambda: encode(build())))


@api.get("/trace")
def get_trace():
    return _once(("trace",), lambda: P.trace_payload(_ti()))


@api.get("/launch/<int:i>")
def get_launch(i: int):
    _launch(i)
    return _once(("launch", i), lambda: P.launch_payload(_ti(), i))


@api.get("/launch/<int:i>/grid")
def get_grid(i: int):
    _launch(i)
    z = _int(request.args.get("z"), "z", default=0)
    return _once(("grid", i, z), lambda: P.grid_payload(_ti(), i, z))


@api.get("/launch/<int:i>/program/<pid>")
def get_program(i: int, pid: str):
    _launch(i)
    offset = _int(request.args.get("offset"), "offset", default=0)
    limit = _int(request.args.get("limit"), "limit", default=P.MAX_OPS, lo=1, hi=P.MAX_OPS)
    return _json(encode(P.program_payload(_ti(), i, _program(i, pid), offset, limit)))


@api.get("/launch/<int:i>/tensor/<int:t>")
def get_tensor(i: int, t: int):
    ti = _ti()
    lc = ti.trace.launches[_launch(i)]
    if not 0 <= t < len(lc.tensors):
        raise P.ApiError(f"launch {i} has {len(lc.tensors)} tensors; there is no tensor {t}", 404)
    args = request.args
    mode = args.get("mode", "all")
    ix = ti.launch(i)
    if mode == "all":
        rows, key, selection = ix.tensor_rows(t), ("elements", i, t), {"mode": "all", "program": None, "op": None}
    elif mode in ("program", "op"):
        pid = _program(i, args.get("program"))
        if mode == "program":
            rows, key = ix.tensor_rows(t, ix.linear(pid)), None
            selection = {"mode": "program", "program": list(pid), "op": None}
        else:
            seq = _int(args.get("op"), "op")
            row = P.op_row(ix, pid, seq)
            if int(lc.ops["tensor"][row]) != t or not ix.memory[row]:
                raise P.ApiError(f"op {seq} of program {pid} does not access tensor {t} ({lc.tensors[t].name!r})")
            rows, key = np.array([row], dtype=np.int64), None
            selection = {"mode": "op", "program": list(pid), "op": seq}
    else:
        raise P.ApiError(f"parameter 'mode' is one of all, program, op; got {mode[:40]!r}")
    rank = len(lc.tensors[t].shape)
    rows_dim = _int(args.get("rows"), "rows", default=-1, lo=0, hi=max(rank - 1, 0)) if args.get("rows") else None
    cols_dim = _int(args.get("cols"), "cols", default=-1, lo=0, hi=max(rank - 1, 0)) if args.get("cols") else None
    index = _ints(args["index"], "index") if args.get("index") else None
    wrap = _int(args.get("wrap"), "wrap", lo=1, hi=1 << 31) if args.get("wrap") else None
    window = args.get("window") or None
    if window not in (None, "auto"):
        window = _ints(window, "window")
        if len(window) != 4:
            raise P.ApiError("parameter 'window' is auto or r0,r1,c0,c1")
    request_key = ("tensor-json", i, t, mode, selection["program"] and tuple(selection["program"]), selection["op"],
                   rows_dim, cols_dim, index, wrap, window)
    body = ti.cached(request_key, lambda: tensor_payload(ti, i, t, rows, key, selection, rows_dim, cols_dim,
                                                         index, wrap, window))
    return _json(body)


@api.get("/launch/<int:i>/findings")
def get_findings(i: int):
    _launch(i)
    return _once(("findings", i), lambda: P.findings_payload(_ti(), i))


@api.get("/launch/<int:i>/charts")
def get_charts(i: int):
    _launch(i)
    return _once(("charts", i), lambda: P.charts_payload(_ti(), i))


@api.route("/<path:rest>")
def api_unknown(rest: str):
    raise P.ApiError(f"no API endpoint /api/{rest[:80]}; see triton_trace/view/payload.py", 404)


@pages.get("/")
def index():
    return _static("index.html", cache=False)


@pages.get("/static/<path:name>")
def static_file(name: str):
    return _static(name)


@pages.get("/favicon.svg")
def favicon():
    return current_app.response_class(FAVICON, mimetype="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


@pages.get("/vendor/plotly.min.js")
def plotly_js():
    return _static("plotly.min.js", max_age=86400)


@pages.get("/vendor/plotly-guards.json")
def plotly_guards():
    """The element ids plotly.js checks before injecting a bundled <style> (see CSP above)."""
    def scan():
        path = current_app.extensions["triton_trace.static"].get("plotly.min.js")
        found = set(_GUARD.findall(path.read_bytes())) if path is not None else set()
        return encode({"ids": sorted(f.decode() for f in found)})
    return _json(_ti().memo(("plotly-guards",), scan))


def _static(name: str, cache: bool = True, max_age: int = 60):
    path = current_app.extensions["triton_trace.static"].get(name)
    if path is None:
        raise P.ApiError(f"no static file {name[:80]!r}", 404)
    resp = send_file(path, mimetype=_STATIC_TYPES.get(path.suffix), max_age=max_age if cache else 0)
    if not cache:
        resp.headers["Cache-Control"] = "no-store"
    return resp
