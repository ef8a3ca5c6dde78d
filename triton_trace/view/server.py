"""``launch()``: serve a trace in the browser from a WSGI server thread, and the handle it returns.

The app itself is app.py's ``create_app`` (re-exported here). ``share=False`` listens on 127.0.0.1 only;
``share=True`` listens on every interface behind an unguessable token. Never Flask's debug server.
"""
from __future__ import annotations

import operator
import secrets
import socket
import signal
import sys
import threading
from typing import Optional

from werkzeug.serving import WSGIRequestHandler, make_server

from ..errors import TraceUsageError
from . import payload as P
from .app import create_app
from .lookup import TraceIndex

__all__ = ["launch", "create_app", "Server"]

DEFAULT_PORT = 5001
PORT_TRIES = 50


class Server:
    """A running web server: ``.url`` to open, ``.stop()`` to shut it down."""

    def __init__(self, httpd, url: str, port: int, public_url: Optional[str] = None):
        self._httpd = httpd
        self.url = url
        self.port = port
        self.public_url = public_url or url
        self._stopped = False
        self._thread = threading.Thread(target=httpd.serve_forever, name=f"triton_trace-web-{port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Shut the server down and wait for it; calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def wait(self) -> None:
        """Block until Ctrl-C, then stop. Further Ctrl-Cs during shutdown are ignored, so the user sees
        one line, not a traceback from inside socketserver."""
        interrupted = False
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            interrupted = True
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if interrupted:
                print("triton_trace: stopping the web server")
            self.stop()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def __repr__(self) -> str:
        return f"<triton_trace web server at {self.url}>"


def _in_ipython() -> bool:
    """True inside Jupyter or IPython, where launch() must not block the kernel."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get is not None and get() is not None


class _QuietHandler(WSGIRequestHandler):
    """HTTP/1.1 keep-alive (the page makes many small requests; a fresh connection for each costs more
    than answering it), idle connections closed after ``timeout`` seconds, and no access log on the
    user's terminal (errors still reach Flask's logger)."""
    protocol_version = "HTTP/1.1"
    timeout = 30
    disable_nagle_algorithm = True     # headers and body go out in separate writes: send them at once

    def log_request(self, code="-", size="-") -> None:
        pass


def _check_port(port) -> Optional[int]:
    """``port`` as an int, or None. Checked before the trace is analysed, and because socket.bind would
    raise OverflowError or TypeError, which reads as a crash rather than a bad argument."""
    if port is None:
        return None
    try:
        value = operator.index(port)
    except TypeError:
        value = int(port) if isinstance(port, str) and port.isdigit() else -1
    if not 0 <= value <= 65535:
        raise TraceUsageError(f"port={port!r} is not a port number: pass 0 to 65535, or None to take a free one")
    return value


def _bind(app, host: str, port: Optional[int]):
    """(server, port). ``port=None`` takes DEFAULT_PORT or the next free one. The socket is bound here:
    werkzeug's own bind exits the process when the port is taken."""
    candidates = [port] if port is not None else list(range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES)) + [0]
    for p in candidates:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, p))
            sock.listen(128)
        except OSError as e:
            sock.close()
            if port is not None:
                raise TraceUsageError(f"cannot serve on port {port} ({e.strerror}); pass another port= or "
                                      f"port=None to take a free one") from None
            continue
        bound = sock.getsockname()[1]
        try:
            httpd = make_server(host, bound, app, threaded=True, request_handler=_QuietHandler, fd=sock.fileno())
        finally:
            sock.close()      # werkzeug works on its own duplicate of the socket
        return httpd, bound
    raise TraceUsageError("found no free port to serve on; pass port=")


WARM_LAUNCHES = 64


def _warm(ti: TraceIndex) -> None:
    """Analyse, and index the first launches, before the URL is printed, so the first page view is fast."""
    ti.report()
    for i in range(min(len(ti.trace.launches), WARM_LAUNCHES)):
        P.program_metrics(ti, i)


def launch(share: bool = False, port: Optional[int] = None, block: Optional[bool] = None, trace=None,
           allowed_hosts=(), compare=None, analysis=None, watch=None, loader=None) -> Server:
    """Serve the current trace (or ``trace``: a Trace or a trace file path) in the browser.

    ``share=False`` listens on 127.0.0.1 only and answers to the host names 127.0.0.1, localhost and
    [::1]. ``share=True`` listens on every interface and requires the unguessable access token that is
    part of the printed URL; it also answers to this machine's host names, IP addresses, and the names in
    ``allowed_hosts`` (for a DNS name or proxy in front of it). ``port=None`` takes 5001 or the next
    free port. ``block=None`` blocks until Ctrl-C in a script and returns at once in Jupyter/IPython.
    ``compare``: a second trace of the same kernels (a Trace or path): the tensor view can then show where
    their outputs differ (``triton-trace view a.ttrace --compare b.ttrace``). ``analysis``: keyword
    arguments of ``triton_trace.analyze`` for what the page shows (``l2_bytes``, ``programs_in_flight``,
    ``gpu``, ...): pass the ones a script printed its report with, so the page shows the same numbers;
    ``{"shadow": "float64"}`` fills the Source panel's precision column, running a launch recorded without
    the shadow again from the inputs ``trace(inputs=True)`` kept (refused here when it cannot).
    A trace given as a path is followed: the page reloads when the file is written again; ``watch`` (a
    path) and ``loader(path)`` do the same for a trace loaded by the caller.
    """
    port = _check_port(port)
    if trace is None:
        from ..record.session import current_trace
        trace = current_trace()
    token = secrets.token_urlsafe(32) if share else None
    app = create_app(trace, token, allowed_hosts, compare, analysis, watch, loader)
    ti = app.extensions["triton_trace"]
    if (analysis or {}).get("shadow") is not None:      # before the analysis runs it, say why it cannot
        from .precisionview import shadow_refusal
        why = shadow_refusal(ti.trace, analysis["shadow"])
        if why:
            raise TraceUsageError(why)
    if ti.compare is not None:
        from ..analysis.diff import unrelated
        why = unrelated(ti.trace, ti.compare, ("this trace", "the compared one"))
        if why:         # the diff view pairs launches in order: it would show other kernels' outputs as differences
            print(f"triton_trace: warning: the compared trace is not of the same kernels: {why}", file=sys.stderr)
    _warm(ti)
    host = "0.0.0.0" if share else "127.0.0.1"
    httpd, bound = _bind(app, host, port)
    query = f"/?token={token}" if token else "/"
    url = f"http://127.0.0.1:{bound}{query}"
    public = f"http://{socket.gethostname()}:{bound}{query}" if share else None
    server = Server(httpd, url, bound, public)
    note = f" (port {DEFAULT_PORT} was taken)" if port is None and bound != DEFAULT_PORT else ""
    print(f"triton_trace: serving {len(ti.trace.launches)} launch(es) on port {bound}{note}")
    print(f"  {public or url}")
    if share:
        print(f"  {url}  (on this machine)\n  shared on every interface: the token in the URL is the password")
    if block is None:
        block = not _in_ipython()
    if block:
        print("  press Ctrl-C to stop")
        server.wait()
    return server
