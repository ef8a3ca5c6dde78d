"""Opening a trace file never runs code from it; saves cannot collide or be redirected; the cache is private.

Every crafted file here carries a live payload: the control test shows that the same kernel text, compiled
as if the user had recorded it, does run its shell command (so the marker's absence elsewhere means
something). A file from "someone else" is saved under another cache folder, whose key signs it."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

import triton_trace
from triton_trace.store import tracefile as store
from triton_trace.compiled import compile_launch
from triton_trace.errors import UntrustedTrace
from helpers.paths import ROOT, TESTS
import kernels as K


@pytest.fixture()
def caches(tmp_path, monkeypatch):
    """(mine, theirs): two cache folders, each with its own key; the test runs as "mine"."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(mine))
    return mine, theirs


@pytest.fixture(scope="module")
def recorded():
    triton_trace.reset()
    x, y = torch.randn(200), torch.randn(200)
    K.add(x, y, kernel=triton_trace.trace(K.make_add()), block=64)
    launch = triton_trace.current_trace().launches[0]
    triton_trace.reset()
    return launch


def _payload(launch, marker) -> triton_trace.Launch:
    """The launch with a body line that runs a shell command when Triton's code generator visits it."""
    lines = launch.source.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("def "))
    while not lines[first].rstrip().endswith(":"):      # the signature may span lines
        first += 1
    first += 1
    indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
    lines.insert(first, f'{indent}tl.core.knobs.os.system("touch {marker}")')
    return dataclasses.replace(launch, source="\n".join(lines) + "\n")


def _save_as(trace_or_launch, path, cache, monkeypatch):
    trace = trace_or_launch if isinstance(trace_or_launch, triton_trace.Trace) else triton_trace.Trace((trace_or_launch,))
    mine = os.environ["TRITON_TRACE_CACHE_DIR"]
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(cache))
    try:
        trace.save(path)
    finally:
        monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", mine)
    return path


def _cli(*args, cache, cwd=None):
    env = {**os.environ, "TRITON_TRACE_CACHE_DIR": str(cache), "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "triton_trace", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


# -- a trace file is data ------------------------------------------------------------------------------------
def test_control_the_payload_is_live_when_compiled_as_the_users_own(recorded, caches, tmp_path):
    marker = tmp_path / "pwned"
    try:
        compile_launch(_payload(recorded, marker), "sm_90", cache=False)
    except triton_trace.TritonTraceError:
        pass
    assert marker.exists(), "the payload no longer runs when compiled: the tests below prove nothing"


def test_a_foreign_file_is_untrusted_and_its_kernel_never_compiles(recorded, caches, tmp_path, monkeypatch):
    mine, theirs = caches
    marker = tmp_path / "pwned"
    path = _save_as(_payload(recorded, marker), tmp_path / "evil.ttrace", theirs, monkeypatch)
    loaded = triton_trace.load(path)
    lc = loaded.launches[0]
    assert (lc.provenance, lc.trusted, lc.origin) == ("untrusted", False, str(path))
    with pytest.raises(UntrustedTrace, match="trust=True"):
        lc.compiled()
    report = triton_trace.analyze(loaded)
    assert report.launches[0].summary["compiled"]["layouts"] == "model"
    text = report.summary()
    assert text.count("compiled layouts skipped") == 1 and "--trust" in text
    from triton_trace.view.notebook import repr_html
    assert len(repr_html(loaded)) > 10_000 and not marker.exists()
    # the web view's compiled route says why, and does nothing
    from triton_trace.view.app import create_app
    client = create_app(loaded).test_client()
    answer = client.get("/api/launch/0/compiled", headers={"X-TT-Client": "1"}).get_json()
    assert "did not record" in (answer.get("error") or "") and not marker.exists()


def test_the_command_line_on_a_foreign_file(recorded, caches, tmp_path, monkeypatch):
    mine, theirs = caches
    marker = tmp_path / "pwned"
    path = _save_as(_payload(recorded, marker), tmp_path / "evil.ttrace", theirs, monkeypatch)
    rep = _cli("report", str(path), cache=mine)
    assert rep.returncode == 0, rep.stderr
    assert "compiled layouts skipped" in rep.stdout and not marker.exists()
    ir = _cli("ir", str(path), cache=mine)
    assert ir.returncode == 2 and "--trust" in ir.stderr and not marker.exists()
    diff = _cli("diff", str(path), str(path), cache=mine)
    assert diff.returncode == 0 and not marker.exists()
    # trusted by hand: the body allowlist still refuses the payload, naming the line
    ir = _cli("ir", str(path), "--trust", cache=mine)
    assert ir.returncode == 2 and not marker.exists()
    assert "tl.core" in ir.stderr or "core" in ir.stderr, ir.stderr
    rep = _cli("report", str(path), "--trust", cache=mine)
    assert rep.returncode == 0 and not marker.exists(), rep.stderr


def test_my_own_saved_file_is_signed_and_fully_featured(recorded, caches, tmp_path):
    path = tmp_path / "mine.ttrace"
    triton_trace.Trace((recorded,)).save(path)
    lc = triton_trace.load(path).launches[0]
    assert lc.provenance == "signed" and lc.trusted
    report = triton_trace.analyze(triton_trace.load(path))
    assert report.launches[0].summary["compiled"]["layouts"] == "compiler"


def test_a_signed_file_changed_by_one_byte_is_untrusted(recorded, caches, tmp_path):
    path = tmp_path / "mine.ttrace"
    triton_trace.Trace((recorded,)).save(path)
    raw = bytearray(path.read_bytes())
    at = raw.index(b"tl.store(")
    raw[at:at + 9] = b"tl.stove("
    path.write_bytes(bytes(raw))
    assert triton_trace.load(path).launches[0].provenance == "untrusted"
    assert triton_trace.load(path, trust=True).launches[0].provenance == "trusted"


def test_a_file_signed_with_another_key_or_a_forged_signature_is_untrusted(recorded, caches, tmp_path, monkeypatch):
    mine, theirs = caches
    path = _save_as(recorded, tmp_path / "theirs.ttrace", theirs, monkeypatch)
    raw = path.read_bytes()
    assert b'"signature":"' in raw
    assert triton_trace.load(path).launches[0].provenance == "untrusted"
    hlen = int.from_bytes(raw[12:20], "little")
    header = json.loads(raw[20:20 + hlen])
    header["signature"] = "0" * 64
    h = json.dumps(header).encode()
    forged = tmp_path / "forged.ttrace"
    forged.write_bytes(raw[:12] + len(h).to_bytes(8, "little") + h + raw[20 + hlen:])
    assert triton_trace.load(forged).launches[0].provenance == "untrusted"


def test_a_reproducer_of_a_foreign_file_says_so_before_it_runs(recorded, caches, tmp_path, monkeypatch):
    mine, theirs = caches
    path = _save_as(recorded, tmp_path / "theirs.ttrace", theirs, monkeypatch)
    out = _cli("repro", str(path), "-o", str(tmp_path / "repro"), cache=mine)
    assert out.returncode == 0 and "did not record" in out.stderr, out.stderr
    script = tmp_path / "repro" / "launch.py"
    env = {**os.environ, "PYTHONPATH": ROOT, "TRITON_TRACE_CACHE_DIR": str(mine)}
    ran = subprocess.run([sys.executable, str(script), "--plain"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert ran.returncode == 2 and "did not record" in ran.stderr and "--trust" in ran.stderr
    assert "outputs" not in ran.stdout
    ran = subprocess.run([sys.executable, str(script), "--plain", "--trust"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # the user's own file: no guard
    triton_trace.Trace((recorded,)).save(tmp_path / "mine.ttrace")
    out = _cli("repro", str(tmp_path / "mine.ttrace"), "-o", str(tmp_path / "own"), cache=mine)
    assert "FOREIGN = None" in (tmp_path / "own" / "launch.py").read_text()


# -- the cache is private or not used ------------------------------------------------------------------------
def _cache_files(root) -> list:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_kernel_modules_leave_no_file_and_no_bytecode(recorded, caches):
    mine, _ = caches
    recorded.compiled(cache=True)
    files = _cache_files(mine)
    assert not [f for f in files if f.startswith("modules") or "__pycache__" in f], files
    assert [f for f in files if f.startswith("compiled")]


def test_a_forged_compiled_entry_is_compiled_again(recorded, caches):
    mine, _ = caches
    first = recorded.compiled(cache=True)
    (entry,) = (mine / "compiled").iterdir()
    data = json.loads(entry.read_text())
    data["raw"]["num_warps"] = 32
    data["raw"]["ttgir"] = data["raw"]["ttgir"].replace("tt.load", "tt.forged")
    entry.write_text(json.dumps(data))
    again = recorded.compiled(cache=True)
    assert again.num_warps == first.num_warps != 32 and "tt.forged" not in again.ir["ttgir"]


@pytest.mark.parametrize("how", ["group_writable", "symlink", "other_owner", "unmakeable"])
def test_an_unsafe_or_unusable_cache_is_not_used_and_the_report_still_works(recorded, caches, tmp_path, monkeypatch,
                                                                         how):
    mine, _ = caches
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    if how == "group_writable":
        mine.mkdir()
        os.chmod(mine, 0o777)
    elif how == "symlink":
        mine.mkdir(mode=0o700)
        os.symlink(real, mine / "compiled")
        os.symlink(real, mine / "modules")
    elif how == "other_owner":
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            pytest.skip("making a folder owned by another user needs root here")
        mine.mkdir(mode=0o700)
        os.chown(mine, 65534, 65534)
    else:
        (tmp_path / "a_file").write_text("")
        monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    c = recorded.compiled(cache=True)
    assert c.notes and "cache not used" in c.notes[0] and c.ir["ttgir"]
    assert not list(real.iterdir())
    path = tmp_path / "t.ttrace"
    triton_trace.Trace((recorded,)).save(path)
    rep = _cli("report", str(path), "--trust", cache=os.environ["TRITON_TRACE_CACHE_DIR"])
    assert rep.returncode == 0, rep.stderr
    assert "[compiled]" in rep.stdout and "cache not used" in rep.stdout


# -- saves ---------------------------------------------------------------------------------------------------
def test_saves_never_follow_or_delete_planted_files(recorded, caches, tmp_path):
    path = tmp_path / "t.ttrace"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, str(path) + ".tmp")
    (tmp_path / "t.ttrace.tmp.blobs").write_text("mine too")
    triton_trace.Trace((recorded,)).save(path)
    assert victim.read_text() == "keep me" and (tmp_path / "t.ttrace.tmp.blobs").read_text() == "mine too"
    assert len(triton_trace.load(path)) == 1
    assert sorted(os.listdir(tmp_path)) == ["mine", "t.ttrace", "t.ttrace.tmp", "t.ttrace.tmp.blobs", "victim.txt"]


_SAVER = """
import sys, torch
sys.path.insert(0, {tests!r})
import kernels as K, triton_trace
n = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    triton_trace.reset()
    x = torch.full((n,), float(n)); y = torch.zeros(n)
    K.add(x, y, kernel=triton_trace.trace(K.make_add()), block=64)
    triton_trace.current_trace().save(sys.argv[1])
print("saved")
"""


def test_two_processes_saving_one_path_both_succeed(caches, tmp_path):
    mine, _ = caches
    script = tmp_path / "saver.py"
    script.write_text(_SAVER.format(tests=TESTS))
    path = tmp_path / "shared.ttrace"
    env = {**os.environ, "PYTHONPATH": ROOT, "TRITON_TRACE_CACHE_DIR": str(mine)}
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(n), "15"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in (640, 1280)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    lc = triton_trace.load(path).launches[0]
    assert lc.grid[0] in (10, 20) and lc.tensors[0].shape == (lc.grid[0] * 64,)
    assert sorted(os.listdir(tmp_path)) == ["mine", "saver.py", "shared.ttrace"]


_KILLED = """
import sys, torch
sys.path.insert(0, {tests!r})
import kernels as K, triton_trace
from triton_trace.store import tracefile as store
triton_trace.reset()
x = torch.randn(4096); K.add(x, x, kernel=triton_trace.trace(K.make_add()), block=64)
original = store._describe
def stalled(arr, f, pos):
    print("writing", flush=True)
    sys.stdin.readline()          # the test kills this process here, mid-save
    return original(arr, f, pos)
store._describe = stalled
triton_trace.current_trace().save(sys.argv[1])
"""


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(recorded, caches, tmp_path):
    mine, _ = caches
    script = tmp_path / "killed.py"
    script.write_text(_KILLED.format(tests=TESTS))
    path = tmp_path / "t.ttrace"
    env = {**os.environ, "PYTHONPATH": ROOT, "TRITON_TRACE_CACHE_DIR": str(mine)}
    p = subprocess.Popen([sys.executable, str(script), str(path)], env=env, text=True, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "writing"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    left = [n for n in os.listdir(tmp_path) if n.endswith(store.TMP_SUFFIX)]
    assert len(left) == 1 and left[0].startswith(".t.ttrace.")
    # a live process's temporary of the same path is left alone
    live = tmp_path / f".t.ttrace.{os.getpid()}.x{store.TMP_SUFFIX}"
    live.write_text("")
    triton_trace.Trace((recorded,)).save(path)
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(store.TMP_SUFFIX)) == [live.name]
    assert len(triton_trace.load(path)) == 1


def test_a_saved_trace_gets_the_usual_file_mode(recorded, caches, tmp_path):
    old = os.umask(0o022)
    try:
        triton_trace.Trace((recorded,)).save(tmp_path / "t.ttrace")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "t.ttrace").st_mode & 0o777 == 0o644


def test_another_local_user_cannot_plant_anything_in_my_cache(recorded, monkeypatch):
    """A real second user (nobody), where this process may switch to one: the cache sits in a folder anyone
    may enter, and only its own 0700 folders keep the other user out."""
    python = "/usr/bin/python3"
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not os.access(python, os.X_OK):
        pytest.skip("switching to a second local user needs root and a system python here")
    import shutil
    import tempfile
    open_dir = tempfile.mkdtemp()
    try:
        os.chmod(open_dir, 0o755)
        cache = os.path.join(open_dir, "cache")
        monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", cache)
        recorded.compiled(cache=True)
        assert sorted(os.listdir(cache)) == ["compiled", "key", "modules"]
        plant = ("import os, sys\n"
                 "for sub in ('', 'compiled', 'modules', 'native', 'modules/__pycache__'):\n"
                 "    try:\n"
                 "        open(os.path.join(sys.argv[1], sub, 'planted.pyc'), 'w').write('x')\n"
                 "        print('planted', sub)\n"
                 "    except OSError as e:\n"
                 "        print('refused', sub, type(e).__name__)\n"
                 "try:\n"
                 "    print('read key', len(open(os.path.join(sys.argv[1], 'key'), 'rb').read()))\n"
                 "except OSError as e:\n"
                 "    print('refused key', type(e).__name__)\n")

        def as_nobody():
            os.setgid(65534)
            os.setuid(65534)

        done = subprocess.run([python, "-c", plant, cache], capture_output=True, text=True, timeout=60,
                              preexec_fn=as_nobody, cwd="/")
        assert done.returncode == 0, done.stderr
        assert "planted" not in done.stdout and "read key" not in done.stdout, done.stdout
        assert done.stdout.count("refused") == 6, done.stdout
    finally:
        shutil.rmtree(open_dir)
