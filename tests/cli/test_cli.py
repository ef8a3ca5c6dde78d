"""The triton-trace command line, run as a real subprocess (python -m triton_trace and the console script)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import triton_trace
from helpers.paths import SCRIPTS


def cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "triton_trace", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def plain_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "plain.ttrace"
    r = cli("run", "-o", str(out), os.path.join(SCRIPTS, "plain_script.py"), "200")
    assert r.returncode == 0, r.stderr
    return out, r


def test_run_traces_an_unmodified_script(plain_trace):
    out, r = plain_trace
    assert "plain_script ok n=200" in r.stdout           # the script ran with its own arguments
    trace = triton_trace.load(out)
    assert [lc.kernel_name for lc in trace.launches] == ["scale_kernel", "shift_kernel"]
    lc = trace.launches[0]
    assert lc.grid == (4, 1, 1)
    loads = lc.accesses(program=(3, 0, 0), kind="load")
    assert len(loads) == 1
    expected = 3 * 64 + np.arange(64)
    np.testing.assert_array_equal(loads[0].offsets, expected)
    np.testing.assert_array_equal(loads[0].mask, expected < 200)
    np.testing.assert_array_equal(loads[0].values[loads[0].mask], expected[expected < 200].astype(np.float32))


def test_run_filters_kernels_and_programs(tmp_path):
    out = tmp_path / "f.ttrace"
    # the form: options after the script and its arguments
    r = cli("run", os.path.join(SCRIPTS, "plain_script.py"), "200", "-k", "shift_kernel", "--programs", "1;2",
            "-o", str(out))
    assert r.returncode == 0, r.stderr
    trace = triton_trace.load(out)
    assert [lc.kernel_name for lc in trace.launches] == ["shift_kernel"]
    lc = trace.launches[0]
    assert {tuple(p) for p in lc.programs().tolist()} == {(1, 0, 0), (2, 0, 0)}
    assert lc.recorded_programs == 2 and lc.skipped_programs == 2


FMA_SCRIPT = """
import torch, triton, triton.language as tl

@triton.jit
def square_add(x_ptr, c_ptr, out_ptr):
    r = tl.arange(0, 16)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, x * x + tl.load(c_ptr + r))

x, c, out = torch.full((16,), 1 + 2.0 ** -12), torch.full((16,), -1.0), torch.empty(16)
square_add[(1,)](x, c, out)
print("out", out[0].item())
"""


@pytest.mark.parametrize("numerics", ["compiled", "interpreter"])
def test_run_numerics_compiled_fuses_as_the_gpu(tmp_path, numerics):
    """(1 + 2^-12)^2 - 1 is 2^-11 + 2^-24 with one rounding (the GPU's fma.rn) and 2^-11 with two."""
    script, out = tmp_path / "fma.py", tmp_path / "fma.ttrace"
    script.write_text(FMA_SCRIPT)
    r = cli("run", str(script), "--numerics", numerics, "-o", str(out))
    assert r.returncode == 0, r.stderr
    want = 2.0 ** -11 + (2.0 ** -24 if numerics == "compiled" else 0.0)
    assert f"out {want!r}" in r.stdout
    lc = triton_trace.load(out).launches[0]
    assert lc.meta.get("numerics") == (numerics if numerics == "compiled" else None)
    stored = lc.accesses(kind="store")[0].values
    assert (stored == np.float32(want)).all()
    bad = cli("run", str(script), "--numerics=gpu", "-o", str(out))
    assert bad.returncode != 0 and "--numerics is 'interpreter' or 'compiled'" in bad.stderr


def test_run_keeps_the_trace_when_the_script_fails(tmp_path):
    out = tmp_path / "fail.ttrace"
    r = cli("run", "-o", str(out), os.path.join(SCRIPTS, "plain_script.py"), "100", "--fail")
    assert r.returncode == 1
    assert "planted failure" in r.stderr and "Traceback" not in r.stderr
    assert len(triton_trace.load(out).launches) == 2


def test_report_table_and_json_exit_status(tmp_path, plain_trace):
    out, _ = plain_trace
    r = cli("report", str(out))
    assert r.returncode == 0, r.stderr
    assert "scale_kernel" in r.stdout and "shift_kernel" in r.stdout
    rj = cli("report", str(out), "--json")
    assert rj.returncode == 0
    data = json.loads(rj.stdout)
    assert [lc["kernel"] for lc in data["launches"]] == ["scale_kernel", "shift_kernel"]
    assert data["findings"] == []

    bad = tmp_path / "oob.ttrace"
    r = cli("run", "-o", str(bad), os.path.join(SCRIPTS, "oob_script.py"))
    assert r.returncode == 0, r.stderr
    r = cli("report", str(bad))
    assert r.returncode == 1                                   # findings gate CI
    assert "out_of_bounds" in r.stdout
    data = json.loads(cli("report", str(bad), "--json").stdout)
    kinds = {f["kind"] for f in data["findings"]}
    assert "out_of_bounds" in kinds
    assert all(f["program"] == [1, 0, 0] for f in data["findings"] if f["kind"] == "out_of_bounds")


@pytest.mark.parametrize("command", [[], ["run"], ["view"], ["report"]])
def test_help(command):
    r = cli(*command, "--help")
    assert r.returncode == 0 and "usage:" in r.stdout


def test_console_script_is_installed():
    exe = shutil.which("triton-trace", path=os.path.dirname(sys.executable))
    assert exe, "pip install should put a triton-trace console script next to python"
    r = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "run" in r.stdout and "report" in r.stdout


@pytest.mark.parametrize("command", ["report", "view"])
def test_bad_paths_and_damaged_files_give_one_line(tmp_path, command):
    missing = cli(command, str(tmp_path / "nope.ttrace"))
    assert missing.returncode == 2 and "no such trace file" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    damaged = tmp_path / "damaged.ttrace"
    damaged.write_bytes(b"TTRACE\x00\x01" + b"\x00" * 40)
    r = cli(command, str(damaged))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert cli(command, str(tmp_path)).returncode == 2            # a folder


def test_run_bad_script_path(tmp_path):
    r = cli("run", "-o", str(tmp_path / "x.ttrace"), str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such script" in r.stderr and "Traceback" not in r.stderr
    r = cli("run", "--programs", "a;b", os.path.join(SCRIPTS, "plain_script.py"))
    assert r.returncode == 2 and "--programs" in r.stderr


def one_line_error(r, text):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and text in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2, r.stderr      # argparse adds its usage line


def test_view_busy_or_bad_port_is_one_line(plain_trace):
    out, _ = plain_trace
    with socket.socket() as s:        # a port some other server is listening on
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        one_line_error(cli("view", str(out), "--port", str(port)), f"cannot serve on port {port}")
    one_line_error(cli("view", str(out), "--port", "70000"), "not a port number")


def test_run_checks_the_output_path_before_running(tmp_path):
    """A bad -o is found before the script runs (a long run's trace would be lost at save time)."""
    marker = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    one_line_error(cli("run", "-o", str(tmp_path), str(script)), "is a folder")
    assert not marker.exists()
    one_line_error(cli("run", "--programs", "0;-1", str(script)), "negative")


def test_view_serves_a_saved_trace(plain_trace):
    out, _ = plain_trace
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "triton_trace", "view", str(out), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if "http://" in line:
                url = line[line.index("http://"):].split()[0]
        assert url, "triton-trace view did not print its URL"
        assert url.startswith(f"http://127.0.0.1:{port}")
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
        api = urllib.request.Request(f"http://127.0.0.1:{port}/api/trace", headers={"X-TT-Client": "1"})
        with urllib.request.urlopen(api, timeout=10) as resp:          # the header the page sends
            assert resp.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_report_exit_status_tells_findings_from_errors(plain_trace, tmp_path, monkeypatch, capsys):
    """1: findings; 2: every error (a damaged file, a FIFO, a crash inside the analysis); 0: clean."""
    out, _ = plain_trace
    assert cli("report", str(out)).returncode == 0
    bad = tmp_path / "bad.ttrace"
    bad.write_bytes(b"TTRACE\x00\x01garbage")
    assert cli("report", str(bad)).returncode == 2
    fifo = tmp_path / "fifo.ttrace"
    os.mkfifo(fifo)
    r = cli("report", str(fifo), timeout=60)               # used to hang in open()
    assert r.returncode == 2 and "not a regular file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    from triton_trace import analysis, cli as cli_mod

    def crash(trace):
        raise RuntimeError("a bug in the analysis")
    monkeypatch.setattr(analysis, "analyze", crash)
    assert cli_mod.main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: a bug in the analysis" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_report_takes_the_analysis_options_of_analyze(plain_trace):
    """``report --gpu/--l2-kib/--in-flight`` give what ``analyze(...)`` gives with the same options (the
    served page takes them too: ``view``); a GPU the table lacks is a one-line error."""
    out, _ = plain_trace
    r = cli("report", str(out), "--json", "--gpu", "A100", "--l2-kib", "16", "--in-flight", "4")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["params"]["gpu"] == "A100" and got["params"]["l2_bytes"] == 16 << 10
    assert got["params"]["programs_in_flight"] == 4
    want = triton_trace.analyze(triton_trace.load(str(out)), gpu="A100", l2_bytes=16 << 10,
                                programs_in_flight=4).to_dict()
    assert got["launches"][0]["roofline"] == json.loads(json.dumps(want["launches"][0]["roofline"]))
    default = json.loads(cli("report", str(out), "--json").stdout)
    assert default["params"]["gpu"] == "H200" and default["params"]["programs_in_flight"] != 4
    one_line_error(cli("report", str(out), "--gpu", "X100"), "unknown GPU")
