"""The web app: a Flask app factory over a frozen Trace (server.py serves it).

Its routes are routes.py's table: each parses and bounds its request's parameters there and hands them to
its answer (answers.py), which the notebook's inlined payloads use too; contract.py documents every payload.
Bad parameters get a 4xx JSON error, never a 500. Pages carry a Content-Security-Policy that allows no
outside origin, no inline script and no inline style; all data reaches the page through the JSON API (the
route table through the page's ``data-tt-routes``) and is written into the page with ``textContent``. The app keeps its state (the trace and what
it derives from it) in ``app.extensions``: nothing lives at module level.
"""
from __future__ import annotations

import hmac
import html
import ipaddress
import json
import os
import re
import socket
from importlib import resources
from pathlib import Path
from typing import Optional

from flask import Flask, current_app, jsonify, request, send_file
from werkzeug.exceptions import HTTPException
from werkzeug.routing import IntegerConverter

from ..errors import TraceUsageError
from ..model import Trace
from . import answers as A
from . import routes as R
from .embed import frontend_dir
from . import payload as P
from .payload import encode
from .lookup import TraceIndex
from .reload import Reloader
from .tensormap import PlaneError

# The page sends the token from its own URL (?token=) in this header with every API request. There is no
# cookie: a cookie is sent to every port of the host, so another local app would receive it.
TOKEN_HEADER = "X-TT-Token"
# Cross-site requests. The page sends this header with every API request; a page on another origin can
# send a GET (an <img>, a form, fetch(mode: "no-cors")) that makes the server do costly work (compile a
# kernel, render a tensor) even though it cannot read the answer, but it cannot add a custom header
# without a CORS preflight, which this app never approves (it sends no Access-Control-Allow-* header).
# Where the browser says where a request comes from (Sec-Fetch-Site), only this origin or the user
# (typing a URL: "none") may call the API. A shared server's token stands in for both.
CLIENT_HEADER = "X-TT-Client"
SAME_ORIGIN_SITES = frozenset({"same-origin", "none"})
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
# The tab icon: four grid cells in the viridis colours of the program grid. Served from here because the
# wheel ships the frontend's .html, .js and .css files only.
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#111827"/><rect x="3" y="3" width="4" height="4" fill="#fde725"/><rect x="9" y="3" width="4" '
           'height="4" fill="#21918c"/><rect x="3" y="9" width="4" height="4" fill="#3b528b"/><rect x="9" y="9" '
           'width="4" height="4" fill="#5ec962"/></svg>')

# --------------------------------------------------------------------------------------------------------
# the app factory
# --------------------------------------------------------------------------------------------------------
def create_app(trace, token: Optional[str] = None, allowed_hosts=(), compare=None, analysis=None,
               watch=None, loader=None) -> Flask:
    """A Flask app that serves ``trace`` (a Trace or the path of a trace file), and with ``compare`` (a
    second one, of the same kernels) the differences of their outputs on the tensor view.

    With ``token`` (a shared server), every page and API request must carry it (``?token=`` or the
    ``X-TT-Token`` header). Without it, every API request must carry the ``X-TT-Client`` header and
    must not come from another site (see CLIENT_HEADER). Requests whose Host is not an allowed name get
    403 (see LOOPBACK_HOSTS). ``analysis``: keyword arguments of ``triton_trace.analyze`` for the served
    analysis (``{"l2_bytes": 16 << 10, "programs_in_flight": 8}``), as a script's own report used them.
    A trace given as a file path is followed (reload.py); ``watch`` names the file of a trace given as an
    object (the command line loads it itself), and ``loader(path)`` loads it again (default: store.load).
    """
    path = os.fspath(watch) if watch is not None else os.fspath(trace) if isinstance(trace, (str, os.PathLike)) else None
    trace = _as_trace(trace, "the web app shows")
    compare = _as_trace(compare, "compare=") if compare is not None else None
    load_again = loader or (lambda p: _as_trace(p, "the web app shows"))
    make_index = lambda t: TraceIndex(_as_trace(load_again(t) if isinstance(t, (str, os.PathLike)) else t,
                                                "the web app shows"), analyze=A.analyzer(analysis), compare=compare)
    app = Flask(__name__, static_folder=None)
    app.url_map.merge_slashes = False     # "/static//etc/passwd" is a 404, not a redirect
    app.url_map.converters["int"] = AsciiInt
    app.config["TT_TOKEN"] = token
    app.config["TT_HOSTS"] = _allowed_hosts(bool(token), allowed_hosts)
    app.extensions["triton_trace"] = make_index(trace)
    # a trace file is followed (reload.py): a new run's trace replaces it on the page's next poll
    app.extensions["triton_trace.reloader"] = (
        Reloader(path, make_index, lambda ix: app.extensions.__setitem__("triton_trace", ix)) if path else None)
    app.extensions["triton_trace.static"] = _static_files()
    for route in R.ROUTES:
        app.add_url_rule(route.rule, "api_" + route.name, _api_view(route), methods=list(route.methods))
    for page in R.PAGES:
        app.add_url_rule(page.rule, page.name, PAGE_VIEWS[page.name], methods=list(page.methods))
    app.before_request(_check_host)
    app.before_request(_check_token)
    app.before_request(_check_origin)
    app.after_request(_secure_headers)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(P.ApiError, lambda e: _error(str(e), e.status))
    app.register_error_handler(PlaneError, lambda e: _error(str(e), 400))
    app.register_error_handler(Exception, _internal_error)
    return app


def _as_trace(trace, what: str) -> Trace:
    if isinstance(trace, (str, os.PathLike)):
        from ..store.tracefile import load
        trace = load(trace)
    if not isinstance(trace, Trace):
        raise TraceUsageError(f"{what} a triton_trace.Trace or a trace file path; got {type(trace).__name__}")
    return trace


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


def _check_origin():
    """Refuse an /api/ request a page on another origin could have sent, before its route runs."""
    if not request.path.startswith("/api/") or current_app.config.get("TT_TOKEN"):
        return None        # not the API, or a shared server whose token _check_token has already checked
    site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if site and site not in SAME_ORIGIN_SITES:
        return _error(f"API requests from another site (Sec-Fetch-Site: {site[:20]}) are refused; open the "
                      f"triton_trace page itself; see README, 'The web UI'", 403)
    if not request.headers.get(CLIENT_HEADER, "").strip():
        return _error(f"API requests need the {CLIENT_HEADER} header (the triton_trace page sends it; a page "
                      f"on another site cannot); add it: {CLIENT_HEADER}: 1", 403)
    return None


def _secure_headers(resp):
    for name in [h for h in resp.headers.keys() if h.lower().startswith("access-control-allow-")]:
        del resp.headers[name]     # never approve a CORS request or preflight (see CLIENT_HEADER)
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
# routes: routes.py's table parses each request's parameters and calls its answer (answers.py)
# --------------------------------------------------------------------------------------------------------
def _api_view(route: R.Route):
    def view(**path):
        context = _ti() if route.context == "trace" else current_app.extensions.get("triton_trace.reloader")
        body = R.call(route, context, path, request.args)
        return current_app.response_class(body, mimetype=route.mimetype)
    view.__name__ = "api_" + route.name
    return view


def _json(body: str):
    return current_app.response_class(body, mimetype="application/json")


def api_unknown(rest: str):
    raise P.ApiError(f"no API endpoint /api/{rest[:80]}; see triton_trace/view/contract.py", 404)


def index():
    """The page, with the route table its code builds request URLs from (frontend/routes.js)."""
    path = current_app.extensions["triton_trace.static"].get("index.html")
    if path is None:
        raise P.ApiError("no static file 'index.html'", 404)
    table = html.escape(json.dumps(R.frontend_table(), sort_keys=True, separators=(",", ":")), quote=True)
    page = path.read_text(encoding="utf-8").replace("<body", f'<body data-tt-routes="{table}"', 1)
    resp = current_app.response_class(page, mimetype="text/html")
    resp.headers["Cache-Control"] = "no-store"
    return resp


def static_file(name: str):
    return _static(name)


def favicon():
    return current_app.response_class(FAVICON, mimetype="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


def plotly_js():
    return _static("plotly.min.js", max_age=86400)


def plotly_guards():
    """The element ids plotly.js checks before injecting a bundled <style> (see CSP above)."""
    def scan():
        path = current_app.extensions["triton_trace.static"].get("plotly.min.js")
        found = set(_GUARD.findall(path.read_bytes())) if path is not None else set()
        return encode({"ids": sorted(f.decode() for f in found)})
    return _json(_ti().memo(("plotly-guards",), scan))


PAGE_VIEWS = {"index": index, "static_file": static_file, "favicon": favicon, "plotly_js": plotly_js,
              "plotly_guards": plotly_guards, "api_unknown": api_unknown}


def _static(name: str, max_age: int = 60):
    path = current_app.extensions["triton_trace.static"].get(name)
    if path is None:
        raise P.ApiError(f"no static file {name[:80]!r}", 404)
    return send_file(path, mimetype=_STATIC_TYPES.get(path.suffix), max_age=max_age)
