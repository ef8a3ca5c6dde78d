"""The local server against a hostile web page and a careless user: DNS rebinding (foreign Host names,
absolute-URI request lines), non-ASCII route integers, the shared server's host names. Real servers on
real sockets, raw HTTP requests (a browser sends whatever Host the page's domain has)."""
from __future__ import annotations

import json
import socket

import pytest

import triton_trace


def raw_get(port: int, target: str, host: str) -> tuple:
    """(status, body) of one HTTP/1.1 request with exactly this request target and Host header (and the
    X-TT-Client header the page sends with every API request)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nX-TT-Client: 1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture
def local(small_trace):
    srv = triton_trace.launch(trace=small_trace, block=False, port=0)
    yield srv
    srv.stop()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST", "127.0.0.1:{port}",
                                  "localhost:{port}", "[::1]:{port}"])
def test_local_server_answers_its_own_names(local, host):
    status, body = raw_get(local.port, "/api/launch/0", host.format(port=local.port))
    assert status == 200 and json.loads(body)["kernel"] == "add_kernel"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example",
                                  "localhost.evil.example:{port}", "10.0.0.5", "", "127.0.0.2"])
def test_local_server_refuses_foreign_host_names(local, host):
    status, body = raw_get(local.port, "/api/launch/0", host.format(port=local.port))
    assert status == 403
    err = json.loads(body)
    assert err["status"] == 403 and "host name" in err["error"] and b"\n" not in body.strip()
    assert b"add_kernel" not in body


def test_absolute_uri_request_lines_are_checked_too(local):
    status, body = raw_get(local.port, "http://evil.example/api/launch/0", "127.0.0.1")
    assert status == 403 and b"add_kernel" not in body
    status, _ = raw_get(local.port, f"http://127.0.0.1:{local.port}/api/launch/0", "127.0.0.1")
    assert status == 200


@pytest.mark.parametrize("path", ["/api/launch/%EF%BC%90", "/api/launch/%D9%A0/grid", "/api/launch/0%E2%81%B0"])
def test_route_integers_are_ascii_digits(small_trace, path, make_client):
    c = make_client(small_trace)
    assert c.get(path).status_code == 404
    assert c.get("/api/launch/0").status_code == 200


def test_query_integers_are_ascii_digits(small_trace, make_client):
    c = make_client(small_trace)
    r = c.get("/api/launch/0/grid?z=%EF%BC%90")
    assert r.status_code == 400 and "integer" in r.get_json()["error"]


def test_shared_server_host_names(small_trace):
    srv = triton_trace.launch(trace=small_trace, share=True, block=False, port=0,
                              allowed_hosts=["traces.example.org"])
    try:
        token = srv.url.split("token=")[1]
        target = f"/api/launch/0?token={token}"
        for host in ("127.0.0.1", socket.gethostname(), "192.0.2.7", "[2001:db8::1]", "traces.example.org"):
            assert raw_get(srv.port, target, host)[0] == 200, host
        assert raw_get(srv.port, target, "evil.example")[0] == 403
        assert raw_get(srv.port, "/api/launch/0", "127.0.0.1")[0] == 403        # the token still guards
    finally:
        srv.stop()
