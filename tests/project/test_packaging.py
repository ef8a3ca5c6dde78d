"""The wheel holds the whole package: every module of triton_trace/ and the web UI's files, and it imports
from the wheel alone (the test suite otherwise runs from the source tree, which hides a missing package)."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import paths

ROOT = Path(paths.ROOT)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (path,) = out.glob("triton_trace-*.whl")
    return path


def test_wheel_holds_every_module_and_the_frontend(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "triton_trace").rglob("*.py")}
    assert modules - names == set(), "modules missing from the wheel: add their packages to pyproject.toml"
    front = {f"triton_trace/frontend/{p.name}" for p in (ROOT / "frontend").iterdir()
             if p.suffix in (".html", ".js", ".css")}
    assert front and front - names == set()
    assert "triton_trace/native/loops.c" in names       # the cache simulation's loops, built where installed
    assert "triton_trace/native/arena.c" in names       # the traced launch's allocator, likewise
    assert "triton_trace/native/rowstats.c" in names    # the math values' per-program statistics, likewise


def test_the_wheel_alone_traces_analyses_and_serves(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = """
import torch, triton, triton.language as tl, triton_trace, os
assert triton_trace.__file__.startswith(os.environ["SITE"]), triton_trace.__file__
@triton_trace.trace
@triton.jit
def k(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)
x = torch.arange(100, dtype=torch.float32); y = torch.empty_like(x)
k[(4,)](x, y, 100, B=32)
assert torch.equal(y, x * 2)
r = triton_trace.analyze(triton_trace.current_trace())
assert r.to_dict()["launches"][0]["metrics"]["lanes"] == 256
app = triton_trace.create_app(triton_trace.current_trace())
page = app.test_client().get("/")
assert page.status_code == 200 and b"<html" in page.data.lower()
from triton_trace.native import cacheloops as native  # the loops were built from the wheel's source, in this cache
assert native.library() is not None, native.failure()
from triton_trace.native import arena        # so was the allocator, at the first traced launch
assert arena._state is not None, arena.failure()       # (loaded by the launch above)
from triton_trace.native import rowstats     # and the math values' statistics, by the same launch
assert rowstats.library() is not None, rowstats.failure()
assert sorted(n.split("-")[0] for n in os.listdir(os.path.join(os.environ["TRITON_TRACE_CACHE_DIR"], "native"))) == \
    ["arena", "loops", "rowstats"]
print("ok")
"""
    script = tmp_path / "use_wheel.py"        # Triton reads a kernel's source from its file
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(site), "SITE": str(site), "TRITON_TRACE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRITON_TRACE_NO_JIT", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
