"""The local server does no work for a page on another origin: every /api/ request must carry the
X-TT-Client header the UI sends (a foreign page cannot add it without a CORS preflight, which is never
approved) and must not come from another site (Sec-Fetch-Site). A refused request never reaches its route:
the compiled answer (seconds of compiling) is counted, and must not run. Real servers on real sockets, and a
hostile page in a real headless Chromium."""
from __future__ import annotations

import http.client
import http.server
import json
import threading
from contextlib import contextmanager

import pytest

import triton_trace
from triton_trace.view import answers as A
from triton_trace.view import app as app_mod

COMPILED = "/api/launch/0/compiled?target=sm_90"


@pytest.fixture
def compiles(monkeypatch):
    """The requests that reached the compiled route (each would compile, or read the compile's cache)."""
    calls = []
    real = A.compiled

    def counted(ti, i, args):
        calls.append((i, dict(args)))
        return real(ti, i, args)
    monkeypatch.setattr(A, "compiled", counted)
    return calls


@pytest.fixture
def refusals(monkeypatch):
    """(method, path, Sec-Fetch-Site) of every request the origin check refused, in order. Installed
    before the server's app is made, because create_app registers the check it finds then."""
    seen = []
    real = app_mod._check_origin

    def recorded():
        resp = real()
        if resp is not None:
            r = app_mod.request
            seen.append((r.method, r.path, r.headers.get("Sec-Fetch-Site")))
        return resp
    monkeypatch.setattr(app_mod, "_check_origin", recorded)
    return seen


@pytest.fixture
def server(small_trace, compiles, refusals):
    srv = triton_trace.launch(trace=small_trace, block=False, port=0)    # bound and listening on return
    yield srv
    srv.stop()


def request(port: int, path: str, headers=(), method: str = "GET") -> tuple:
    """(status, headers, body) of one request with exactly these extra headers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, headers=dict(headers))
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------
# raw requests
# ---------------------------------------------------------------------------------------------------------
def test_a_plain_get_is_refused_before_the_compile(server, compiles):
    status, _, body = request(server.port, COMPILED)
    assert status == 403 and compiles == []
    err = json.loads(body)
    assert err["status"] == 403 and "X-TT-Client" in err["error"]


def test_with_the_header_it_compiles(server, compiles):
    status, headers, body = request(server.port, COMPILED, {"X-TT-Client": "1"})
    assert status == 200, body[:300]
    assert json.loads(body)["stages"] and len(compiles) == 1
    assert not [h for h in headers if h.lower().startswith("access-control-")]
    for site in ("same-origin", "none"):          # the page itself; a URL the user typed
        assert request(server.port, "/api/launch/0", {"X-TT-Client": "1", "Sec-Fetch-Site": site})[0] == 200


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_another_site_is_refused_even_with_the_header(server, compiles, site):
    status, _, body = request(server.port, COMPILED, {"X-TT-Client": "1", "Sec-Fetch-Site": site})
    assert status == 403 and compiles == []
    assert f"Sec-Fetch-Site: {site}" in json.loads(body)["error"]


def test_a_preflight_is_never_approved(server, compiles):
    preflight = {"Origin": "http://evil.example", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "x-tt-client", "Sec-Fetch-Site": "cross-site"}
    for path in (COMPILED, "/", "/api/trace"):
        status, headers, _ = request(server.port, path, preflight, method="OPTIONS")
        assert not [h for h in headers if h.lower().startswith("access-control-allow")], (path, headers)
        assert status == 403 or not path.startswith("/api/")
    assert compiles == []


# ---------------------------------------------------------------------------------------------------------
# the Flask app: every API route is guarded, the page and its files are not
# ---------------------------------------------------------------------------------------------------------
def test_every_api_route_is_guarded(small_trace, make_client):
    c = make_client(small_trace, page=False)
    rules = [r.rule for r in c.application.url_map.iter_rules() if r.rule.startswith("/api/")]
    assert len(rules) >= 10
    for rule in rules:
        path = rule.replace("<int:i>", "0").replace("<int:t>", "0").replace("<int:seq>", "0")
        path = path.replace("<pid>", "0,0,0").replace("<path:rest>", "nothing")
        r = c.get(path)
        assert r.status_code == 403 and "X-TT-Client" in r.get_json()["error"], path


def test_the_page_and_its_files_need_no_header(small_trace, make_client):
    c = make_client(small_trace, page=False)
    for url in ("/", "/static/app.js", "/vendor/plotly.min.js", "/favicon.svg"):
        assert c.get(url, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200, url


def test_a_shared_servers_token_stands_in_for_the_header(small_trace, make_client):
    c = make_client(small_trace, page=False, token="s3cret-token")
    assert c.get("/api/trace", headers={"X-TT-Token": "s3cret-token"}).status_code == 200
    assert c.get("/api/trace?token=s3cret-token").status_code == 200
    assert c.get("/api/trace", headers={"X-TT-Client": "1"}).status_code == 403     # the token still guards


# ---------------------------------------------------------------------------------------------------------
# a hostile page in a real browser
# ---------------------------------------------------------------------------------------------------------
ATTACK = """<!doctype html><html><body><script>
const url = "http://127.0.0.1:%(port)d%(path)s";
const settle = (p) => p.then(() => "done", (e) => "refused: " + e.message);
const image = new Promise((resolve) => {
  const img = new Image();
  img.onload = img.onerror = () => resolve("done");
  img.src = url + "&via=img";
  document.body.append(img);
});
const frame = new Promise((resolve) => {
  const f = document.createElement("iframe");
  f.onload = () => resolve("done");
  f.src = url + "&via=iframe";
  document.body.append(f);
});
window.__results = Promise.all([
  settle(fetch(url + "&via=no-cors", { mode: "no-cors" })),
  image,
  frame,
  settle(fetch(url + "&via=header", { headers: { "X-TT-Client": "1" } })),
]);
</script></body></html>"""


@contextmanager
def other_site(html: str):
    """A second local HTTP server, on another port, whose every page is ``html``."""
    page = html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.mark.browser
@pytest.mark.parametrize("attacker_host", ["127.0.0.1", "localhost"])       # same site, other port; another site
def test_a_foreign_page_cannot_make_the_server_compile(browser, server, compiles, refusals, attacker_host):
    ctx = browser.new_context()
    try:
        with other_site(ATTACK % {"port": server.port, "path": COMPILED}) as attacker_port:
            evil = ctx.new_page()
            evil.goto(f"http://{attacker_host}:{attacker_port}/")
            results = evil.evaluate("window.__results")
        # every request reached the server and was refused; the one with the header never left the browser
        assert results[:3] == ["done"] * 3 and results[3].startswith("refused"), results
        paths = sorted((m, p) for m, p, _ in refusals)
        assert ("GET", "/api/launch/0/compiled") in paths and ("OPTIONS", "/api/launch/0/compiled") in paths
        assert len([1 for m, _ in paths if m == "GET"]) == 3, refusals           # no-cors fetch, <img>, <iframe>
        assert {s for _, _, s in refusals} == {"same-site" if attacker_host == "127.0.0.1" else "cross-site"}
        assert compiles == []

        ui = ctx.new_page()                       # the UI itself still loads its launch
        ui.goto(f"{server.url}#/launch/0")
        ui.wait_for_selector("#summary .title")
        assert ui.inner_text("#summary .title") == "add_kernel"
        assert compiles == []                     # nothing compiled until the Compiled panel opens
    finally:
        ctx.close()


@pytest.mark.browser
def test_the_ui_still_works_in_a_notebooks_iframe(browser, server, refusals):
    """triton_trace.iframe(server) on a page of another site (a local Jupyter): the framed UI's requests
    are its own origin's, with the header, so they are served."""
    from triton_trace.view.notebook import iframe
    host_page = f'<!doctype html><html><body>{iframe(server.url + "#/launch/0").data}</body></html>'
    ctx = browser.new_context()
    try:
        with other_site(host_page) as port:
            pg = ctx.new_page()
            pg.goto(f"http://localhost:{port}/")
            frame = pg.frame_locator("iframe")
            # the launch's panels show once all of them are drawn (no half-loaded page: issue 43, bug 6)
            title = frame.locator('#launch-view[aria-busy="false"] #summary .title')
            assert title.inner_text(timeout=10_000) == "add_kernel"
        assert refusals == []
    finally:
        ctx.close()
