"""A short load test on loopback: 20 concurrent clients against a 4096-program trace, no errors.
The full-length run (and the numbers to report) is benchmarks/speed/bench_web_load.py."""
from __future__ import annotations

import pytest

import triton_trace
from helpers import webcases as K
from benchmarks.speed.bench_web_load import run_load


@pytest.mark.slow
def test_twenty_clients_get_no_errors(capsys):
    srv = triton_trace.launch(trace=K.synthetic_tiled(64, 64, 16, 16), block=False, port=0)
    try:
        report = run_load(srv.url.rstrip("/"), clients=20, seconds=4)
    finally:
        srv.stop()
    with capsys.disabled():
        print(f"\nweb load: {report}")
    assert report["errors"] == 0, report["error_examples"]
    assert report["requests"] >= 100
    assert report["median_ms"] < 1000
