"""One way to write a number (issue 43, bug 7): analysis/units.py and its twin frontend/units.js give the
same strings, a change too small for three digits still reads as a change ("0.2 MB -> 0.2 MB" hid 4%),
and one comparison reads as one percentage in the hint, the report and the page. Expected strings are
written out by hand from the byte counts the kernels below must move."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis import units
from triton_trace.analysis.advice.whatif import _change
from helpers.paths import ROOT


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1000, "1 kB"), (1500, "1.5 kB"), (204_800, "205 kB"),
                                     (212_992, "213 kB"), (999_960, "1 MB"), (12_345_678, "12.3 MB"),
                                     (1125, "1.13 kB"), (5e12, "5 TB")])
def test_bytes_read_in_decimal_units_to_three_digits(n, text):
    assert units.nbytes(n) == text


def test_percentages_durations_and_plain_numbers():
    assert [units.percent(x) for x in (1 / 3, 0.125, 0.75, 1.0, 0.0004)] == ["33.3%", "12.5%", "75%", "100%", "0.04%"]
    assert [units.seconds(t) for t in (3.2e-8, 1.234e-5, 0.0042, 2.5)] == ["32 ns", "12.3 us", "4.2 ms", "2.5 s"]
    assert [units.sig(v) for v in (0.000123456, 4.0, 2.53333, 123456.7)] == ["0.000123", "4", "2.53", "123457"]


def test_a_small_change_reads_as_different_numbers():
    assert units.change(200_000, 200_100) == "200 kB -> 200.1 kB"
    assert units.change(204_800, 212_992) == "205 kB -> 213 kB"
    assert units.change(123_456_789, 123_456_790) == "123.456789 MB -> 123.45679 MB"
    assert units.change(0.333, 0.3334, units.percent) == "33.3% -> 33.34%"
    assert units.change(5, 5) == "5 B -> 5 B"


def test_the_what_if_hint_shows_a_four_percent_change():
    """The hint that once read "raise predicted DRAM reads by 4% (0.2 MB -> 0.2 MB)"."""
    text = _change(212_992, 204_800)
    assert text == "raise predicted DRAM reads by 4% (205 kB -> 213 kB)"
    before, after = re.findall(r"([\d.]+) kB", text)
    assert float(before) != float(after)
    assert abs(float(before) * 1e3 - 204_800) <= 500 and abs(float(after) * 1e3 - 212_992) <= 500
    assert "by 0.05%" in _change(200_000, 200_100) and "(200.1 kB -> 200 kB)" in _change(200_000, 200_100)


def _js(calls: list) -> list:
    """frontend/units.js on ``calls`` ([function, *args]), in node."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the twin is checked in the browser tests only")
    source = open(os.path.join(ROOT, "frontend", "units.js"), encoding="utf-8").read()
    runner = source + ("\nimport { readFileSync } from 'node:fs';\n"
                       "const F = { fmtBytes, fmtPct, fmtSeconds, fmtSig, fmtChange, fmtMetric, place };\n"
                       "const calls = JSON.parse(readFileSync(0, 'utf8'));\n"
                       "console.log(JSON.stringify(calls.map(([f, ...a]) => f === 'fmtChange' && a[2] === 'pct' ? "
                       "fmtChange(a[0], a[1], fmtPct) : F[f](...a))));\n")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tt_units_{os.getpid()}.mjs")
    with open(path, "w", encoding="utf-8") as f:
        f.write(runner)
    try:
        r = subprocess.run([node, path], input=json.dumps(calls), capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_javascript_twin_gives_the_same_strings():
    rng = random.Random(43)
    values = [0, 1, 999, 1000, 1125, 1250, 999_500, 999_960, 2.5, 0.125, 1e-9, 123_456_789]
    values += [round(10 ** rng.uniform(-3, 13), rng.randint(0, 6)) for _ in range(300)]
    shares = [0, 1, 1 / 3, 0.125, 0.0625, 0.00105, 0.99995] + [rng.random() for _ in range(100)]
    times = [1e-9, 3.2e-8, 1.234e-5, 0.0042, 0.9995, 2.5] + [10 ** rng.uniform(-9, 2) for _ in range(100)]
    pairs = [(200_000, 200_100), (204_800, 212_992), (5, 5)] + \
        [(v, v + rng.choice([1, 10, 100])) for v in values[:100]]
    calls = [["fmtBytes", v] for v in values] + [["fmtSig", v] for v in values + shares] + \
        [["fmtPct", s] for s in shares] + [["fmtSeconds", t] for t in times] + \
        [["fmtChange", a, b] for a, b in pairs] + [["fmtChange", a, b, "pct"] for a, b in zip(shares, shares[1:])] + \
        [["fmtMetric", k, v] for v in (4096, 0.375, 1234567, 0.123456) for k in ("load_bytes", "masked_share",
                                                                                  "flops", "arithmetic_intensity")] + \
        [["place", "cell In[8]", 6], ["place", "/a/b/kernel.py", 12], ["place", "C:\\x\\k.py", 3]]
    py = {"fmtBytes": units.nbytes, "fmtSig": units.sig, "fmtPct": units.percent, "fmtSeconds": units.seconds,
          "fmtMetric": units.metric, "place": units.place}

    def python(call):
        f, *a = call
        if f == "fmtChange":
            return units.change(a[0], a[1], units.percent if a[2:] == ["pct"] else units.nbytes)
        return py[f](*a)
    want = [python(c) for c in calls]
    got = _js(calls)
    differ = [(c, w, g) for c, w, g in zip(calls, want, got) if w != g]
    assert not differ, differ[:10]


@triton.jit
def column_sum(x_ptr, out_ptr, n_rows, stride, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    rows = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + rows * stride + c, mask=rows < n_rows)     # 4 bytes of each 32-byte sector used
    tl.store(out_ptr + c, tl.sum(x, axis=0))


def test_one_comparison_reads_as_one_percentage():
    """A strided load uses 4 of the 32 bytes of each sector: 12.5%, in the hint and in the op's numbers as
    the report and the page show them."""
    x, out = torch.randn(256, 512), torch.empty(512)
    triton_trace.reset()
    triton_trace.trace(column_sum)[(512,)](x, out, 256, x.stride(0), BLOCK=256)
    report = triton_trace.analyze(triton_trace.current_trace(), what_if=False).to_dict()
    triton_trace.reset()
    torch.testing.assert_close(out, x.sum(dim=0))
    launch = report["launches"][0]
    hint = next(h for h in launch["hints"] if h["kind"] == "uncoalesced")
    op = next(o for o in launch["ops"] if o["kind"] == "load")
    assert op["sector_efficiency"] == pytest.approx(4 / 32)
    assert "uses 12.5% of the bytes" in hint["message"]
    assert units.percent(op["sector_efficiency"]) == "12.5%"
    assert _js([["fmtPct", op["sector_efficiency"]]]) == ["12.5%"]
