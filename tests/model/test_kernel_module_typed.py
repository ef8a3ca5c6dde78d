"""``Launch.module``: the typed kernel module (model/kernelmodule.py) that replaced the untyped
``Launch.meta["module"]`` dict. It is set when the launch is built (the launch stays frozen), a trace file keeps it
as ``meta.module`` in the same shape as before (so files written earlier still load, and a loaded trace
saves it back unchanged), and a malformed record is refused at ``load()`` with a message naming the field."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import TraceFileError
from triton_trace.model import Helper, KeptInputs, KernelModule, Launch, Param, Unresolved
from triton_trace.model import kernelmodule as KM
from triton_trace.store import signing
from triton_trace.store import tracefile as store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
while not os.path.isdir(os.path.join(ROOT, "triton_trace")):      # tests/ or a folder under it
    ROOT = os.path.dirname(ROOT)

_SCALE = tl.constexpr(3)
_SHIFT = tl.constexpr(0.5)


@triton.jit
def _scaled(x):
    return x * _SCALE


@triton.jit
def _helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, _scaled(tl.load(x_ptr + offs, mask=m)) + _SHIFT, mask=m)


def _helper_def_line() -> int:
    return next(i + 1 for i, t in enumerate(open(__file__).read().splitlines()) if t.startswith("def _scaled("))


def _traced(n: int = 100, **opts) -> Launch:
    triton_trace.reset()
    x = torch.randn(n)
    triton_trace.trace(_helper_kernel, **opts)[(2,)](x, torch.empty(n), n, BLOCK=64, num_warps=2)
    return triton_trace.current_trace().launches[-1]


def _parts(path) -> tuple:
    raw = open(path, "rb").read()
    hlen = int.from_bytes(raw[12:20], "little")
    return json.loads(raw[20:20 + hlen]), raw[20 + hlen:]


def _write(path, header: dict, blobs: bytes) -> None:
    """A trace file with ``header``, signed with this user's key as ``save`` signs (so it loads as recorded here)."""
    header = {k: v for k, v in header.items() if k != "signature"}
    h = signing.sign(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    with open(path, "wb") as f:
        f.write(store.MAGIC + store.VERSION.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h + blobs)


def _old_record(launch: Launch) -> dict:
    """``meta["module"]`` exactly as triton_trace wrote it before the module was typed (record/kernelmodule.py
    and session.py of that version), for this file's kernel traced by ``_traced(inputs=True)``."""
    return {"helpers": [{"name": "_scaled", "def_name": "_scaled", "source": "def _scaled(x):\n    return x * _SCALE\n",
                         "file": launch.source_file, "line": _helper_def_line()}],
            "imports": ["import triton.language as tl"],
            "constants": ["_SHIFT = tl.constexpr(0.5)", "_SCALE = tl.constexpr(3)"],
            "missing": [], "triton": triton.__version__,
            "params": {"x_ptr": {"kind": "tensor"}, "out_ptr": {"kind": "tensor"},
                       "n": {"kind": "value", "expr": "100"}, "BLOCK": {"kind": "value", "expr": "64"}},
            "launch_options": {"num_warps": 2},
            "inputs": {"storages": [400, 400], "written": [False, True], "kept": True}}


def test_the_captured_module_is_typed():
    launch = _traced(inputs=True)
    mod = launch.module
    assert isinstance(mod, KernelModule) and "module" not in launch.meta
    assert mod.helpers == (Helper("_scaled", "_scaled", "def _scaled(x):\n    return x * _SCALE\n", launch.source_file,
                                  _helper_def_line()),)
    assert set(mod.constants) == {"_SCALE = tl.constexpr(3)", "_SHIFT = tl.constexpr(0.5)"}
    assert mod.imports == ("import triton.language as tl",) and mod.missing == ()
    assert mod.params == {"x_ptr": Param("tensor"), "out_ptr": Param("tensor"), "n": Param("value", expr="100"),
                          "BLOCK": Param("value", expr="64")}
    assert mod.launch_options == {"num_warps": 2} and mod.options() == {"num_warps": 2}
    assert mod.triton == triton.__version__
    assert mod.inputs == KeptInputs((400, 400), (False, True), True)
    assert mod.inputs.input_bytes == len(launch.inputs) and mod.inputs.final_bytes == len(launch.finals)
    assert _traced().module.inputs is None          # traced without inputs=True


def test_a_helper_from_the_test_kernels_and_what_cannot_be_carried():
    import kernels as K
    triton_trace.reset()
    K.poly(torch.randn(100), kernel=triton_trace.trace(K.make_nested()))
    helper, = triton_trace.current_trace().launches[-1].module.helpers
    assert (helper.name, helper.def_name) == ("_poly", "_poly") and helper.source.startswith("def _poly(")

    class Opaque:
        pass
    thing = Opaque()

    def body(x_ptr, N: tl.constexpr):
        if thing is None:
            tl.store(x_ptr, 1.0)
        tl.store(x_ptr + tl.arange(0, N), tl.zeros([N], tl.float32))
    triton_trace.reset()
    try:
        triton_trace.trace(triton.jit(body))[(1,)](torch.ones(8), N=8)
    except Exception:       # noqa: BLE001 whether the interpreter runs the dead branch is not this test's
        pass
    missing = triton_trace.current_trace().launches[-1].module.missing
    assert any(isinstance(m, Unresolved) and m.name == "thing" and "Opaque" in m.why for m in missing)


def test_the_launch_stays_frozen_and_the_module_checks_its_fields():
    launch = _traced()
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.module = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.module.triton = "9.9"
    with pytest.raises(TypeError, match="module=.*KernelModule"):
        dataclasses.replace(launch, module=launch.module.to_dict())
    with pytest.raises(ValueError, match=r"^line is"):
        Helper("h", "h", "def h():\n    pass\n", "f.py", "3")
    with pytest.raises(ValueError, match=r"helpers\[0\] is dict"):
        dataclasses.replace(launch.module, helpers=({"name": "h"},))
    with pytest.raises(ValueError, match="expr is set on a parameter of kind 'tensor'"):
        Param("tensor", expr="1")
    with pytest.raises(ValueError, match="written holds 1 flags for 2 storages"):
        KeptInputs((4, 4), (True,), True)


def test_a_save_and_load_round_trip_keeps_the_module(tmp_path):
    launch = _traced(inputs=True)
    triton_trace.current_trace().save(tmp_path / "a.ttrace")
    back = triton_trace.load(tmp_path / "a.ttrace").launches[0]
    assert back.module == launch.module
    assert KernelModule.from_dict(launch.module.to_dict()) == launch.module
    triton_trace.Trace((back,)).save(tmp_path / "b.ttrace")        # a loaded trace saves it back unchanged
    first, second = _parts(tmp_path / "a.ttrace")[0], _parts(tmp_path / "b.ttrace")[0]
    assert second["launches"][0]["meta"] == first["launches"][0]["meta"]
    assert triton_trace.load(tmp_path / "b.ttrace").launches[0].module == launch.module


def test_the_file_keeps_the_earlier_layout_and_earlier_files_load(tmp_path):
    launch = _traced(inputs=True)
    triton_trace.current_trace().save(tmp_path / "t.ttrace")
    header, blobs = _parts(tmp_path / "t.ttrace")
    assert header["launches"][0]["meta"]["module"] == _old_record(launch)      # the on-disk shape is unchanged
    # a file from before launch options and the Triton release were recorded, with a note on its inputs
    older = {k: v for k, v in _old_record(launch).items() if k not in ("launch_options", "triton")}
    older["inputs"]["note"] = "kept"
    header["launches"][0]["meta"]["module"] = older
    _write(tmp_path / "old.ttrace", header, blobs)
    back = triton_trace.load(tmp_path / "old.ttrace").launches[0]
    assert back.provenance == "signed" and back.module.launch_options == {} and back.module.triton is None
    assert back.module.inputs.note == "kept" and back.module.helpers == launch.module.helpers
    assert back.module.params == launch.module.params and back.module.constants == launch.module.constants
    script = back.reproducer(tmp_path / "r")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": ROOT}, cwd=tmp_path)
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr


def _crafted(record: dict) -> list:
    """(change to the module record, the field the refusal must name)."""
    def change(fn):
        out = json.loads(json.dumps(record))
        fn(out)
        return out
    where = r"launches\[0\]\.meta\.module"
    return [
        (change(lambda m: m["helpers"][0].update(line="8")), rf"{where}\.helpers\[0\]\.line is '8'"),
        (change(lambda m: m["helpers"][0].update(source="#" * (KM.MAX_SOURCE + 1))),
         rf"{where}\.helpers\[0\]\.source holds {KM.MAX_SOURCE + 1} characters"),
        (change(lambda m: m["imports"].append("import " + "a" * KM.MAX_TEXT)), rf"{where}\.imports\[1\] holds"),
        (change(lambda m: m["helpers"][0].update(extra=1)), rf"{where}\.helpers\[0\] has unknown keys \['extra'\]"),
        (change(lambda m: m.update(code="import os")), rf"{where} has unknown keys \['code'\]"),
        (change(lambda m: m.pop("params")), rf"{where} lacks \['params'\]"),
        (change(lambda m: m["params"].update(n={"kind": "value", "expr": 100})),
         rf"{where}\.params\['n'\]\.expr is int"),
        (change(lambda m: m["params"].update(n={"kind": "code"})), rf"{where}\.params\['n'\]\.kind is 'code'"),
        (change(lambda m: m["missing"].append({"name": "x"})), rf"{where}\.missing\[0\] lacks \['why'\]"),
        (change(lambda m: m.update(launch_options={"num_warps": [1]})),
         rf"{where}\.launch_options\['num_warps'\] is \[1\], not an integer"),
        (change(lambda m: m.update(triton=3)), rf"{where}\.triton is int"),
        (change(lambda m: m["inputs"].update(written=[True])), rf"{where}\.inputs\.written holds 1 flags for 2"),
        (change(lambda m: m.update(constants="X = 1")), rf"{where}\.constants is str, not a list"),
    ]


def test_a_malformed_module_record_is_refused_naming_the_field(tmp_path):
    launch = _traced(inputs=True)
    triton_trace.current_trace().save(tmp_path / "t.ttrace")
    header, blobs = _parts(tmp_path / "t.ttrace")
    for k, (record, field) in enumerate(_crafted(header["launches"][0]["meta"]["module"])):
        header["launches"][0]["meta"]["module"] = record
        _write(tmp_path / f"bad{k}.ttrace", header, blobs)
        with pytest.raises(TraceFileError, match=field):
            triton_trace.load(tmp_path / f"bad{k}.ttrace")
    with pytest.raises(ValueError, match=r"^module\.helpers\[0\]\.line is"):
        KernelModule.from_dict(_crafted(launch.module.to_dict())[0][0])


def test_the_reproducer_and_the_compiled_view_work_from_a_loaded_trace(tmp_path):
    _traced(inputs=True)
    triton_trace.current_trace().save(tmp_path / "t.ttrace")
    trace = triton_trace.load(tmp_path / "t.ttrace")
    launch = trace.launches[0]
    script = launch.reproducer(tmp_path / "r")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": ROOT}, cwd=tmp_path)
    assert r.returncode == 0 and "bit for bit" in r.stdout, r.stdout + r.stderr
    assert "LAUNCH_OPTIONS = {'num_warps': 2}" in open(script).read()
    c = launch.compiled("sm_80")
    assert c.num_warps == 2 and c.missing == () and c.to_dict()["missing"] == []
    got = triton_trace.create_app(trace).test_client().get("/api/launch/0/compiled?target=sm_80",
                                                           headers={"X-TT-Client": "1"}).get_json()
    assert got["error"] is None
    helper = launch.module.helpers[0]
    shown = [s for s in got["source"] if got["files"][s["file"]].endswith(os.path.basename(helper.file))
             and s["first_line"] == helper.line]
    assert shown and shown[0]["lines"][0].startswith("def _scaled(")
