"""The trace file: an exact round trip, deterministic bytes, and refusal of damaged or crafted files."""
import dataclasses
import json
import pickle
import zlib

import numpy as np
import pytest
import torch

import kernels as K
import triton_trace
from triton_trace import TraceFileError, trace
from triton_trace.store import tracefile as store
from triton_trace.model import OP_COLUMNS, Launch, Trace, empty_ops


@pytest.fixture(scope="module")
def sample_trace():
    """Launches of several shapes: values, atomics, dots, a program filter, a value cap, a failure."""
    triton_trace.reset()
    x, y = torch.randn(300), torch.randn(300)
    K.add(x, y, kernel=trace(K.make_add()), block=64)
    K.matmul(torch.randn(20, 18), torch.randn(18, 17), kernel=trace(programs=[0, 3])(K.make_matmul()))
    xl, w = torch.randn(5, 12), torch.randn(12)
    _, mean, rstd = K.layer_norm_fwd(xl, w, torch.randn(12), kernel=trace(values=100)(K.make_layer_norm_fwd()))
    K.layer_norm_bwd(torch.randn(5, 12), xl, w, mean, rstd, group_size_m=2,
                     dx_kernel=trace(K.make_layer_norm_bwd_dx()), dwdb_kernel=trace(K.make_layer_norm_bwd_dwdb()))
    K.scale(x, 2.0, kernel=trace(K.make_autotuned()))
    triton_trace.set_progress(lambda done, total, kernel: (_ for _ in ()).throw(KeyboardInterrupt) if done == 2 else None)
    try:
        with pytest.raises(KeyboardInterrupt):
            K.softmax(torch.randn(4, 10), kernel=trace(K.make_softmax(), batch=False))
    finally:
        triton_trace.set_progress(None)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    assert len(tr) == 7
    return tr


def assert_launches_equal(a: Launch, b: Launch):
    for f in dataclasses.fields(Launch):
        if f.name in ("provenance", "origin"):     # where it came from, not what it holds
            continue
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if f.name == "ops":
            assert va.keys() == vb.keys() == OP_COLUMNS.keys()
            for col in va:
                assert va[col].dtype == vb[col].dtype and va[col].shape == vb[col].shape, col
                np.testing.assert_array_equal(va[col], vb[col], err_msg=col)
        elif isinstance(va, np.ndarray):
            assert va.dtype == vb.dtype and va.shape == vb.shape, f.name
            np.testing.assert_array_equal(va, vb, err_msg=f.name)
        else:
            assert va == vb, f.name


def test_round_trip_keeps_every_array(sample_trace, tmp_path):
    path = tmp_path / "t.ttrace"
    sample_trace.save(path)
    loaded = triton_trace.load(path)
    assert len(loaded) == len(sample_trace)
    for a, b in zip(sample_trace.launches, loaded.launches):
        assert_launches_equal(a, b)
        for i in range(a.num_ops):
            ra, rb = a.access(i), b.access(i)
            assert (ra.kind, ra.tensor, ra.line, ra.program, ra.dims) == (rb.kind, rb.tensor, rb.line, rb.program, rb.dims)
            for arr in ("offsets", "mask", "values"):
                va, vb = getattr(ra, arr), getattr(rb, arr)
                assert (va is None) == (vb is None)
                if va is not None:
                    np.testing.assert_array_equal(va, vb)
    kinds = {a.kind for lc in loaded.launches for a in lc.all_ops()}
    assert {"load", "store", "atomic_cas", "atomic_xchg", "dot", "reduce", "math"} <= kinds
    assert loaded.launches[1].skipped_programs > 0 and loaded.launches[2].values_truncated
    assert not loaded.launches[-1].completed and loaded.launches[5].config["kwargs"] == {"BLOCK": 32}


def test_saved_bytes_are_deterministic(sample_trace, tmp_path):
    sample_trace.save(tmp_path / "a.ttrace")
    sample_trace.save(tmp_path / "b.ttrace")
    triton_trace.load(tmp_path / "a.ttrace").save(tmp_path / "c.ttrace")
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.ttrace", "b.ttrace", "c.ttrace"))
    assert a == b == c


def test_loading_never_unpickles(sample_trace, tmp_path, monkeypatch):
    sample_trace.save(tmp_path / "t.ttrace")

    def forbidden(*args, **kwargs):
        raise AssertionError("load() must not unpickle")
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(np, "load", forbidden)
    assert len(triton_trace.load(tmp_path / "t.ttrace")) == 7


def test_empty_trace_round_trips(tmp_path):
    Trace().save(tmp_path / "e.ttrace")
    assert len(triton_trace.load(tmp_path / "e.ttrace")) == 0


# ------------------------------------------------------------------------------------------------------
# damaged and crafted files
# ------------------------------------------------------------------------------------------------------
def split(path):
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[12:20], "little")
    return raw[:8], int.from_bytes(raw[8:12], "little"), json.loads(raw[20:20 + hlen]), raw[20 + hlen:]


def join(path, header, blobs, magic=store.MAGIC, version=store.VERSION):
    h = json.dumps(header).encode()
    path.write_bytes(magic + version.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h + blobs)


@pytest.fixture
def saved(sample_trace, tmp_path):
    path = tmp_path / "t.ttrace"
    sample_trace.save(path)
    return path


def refused(path, match, **kw):
    with pytest.raises(TraceFileError, match=match):
        triton_trace.load(path, **kw)


def test_bad_magic_and_garbage(saved, tmp_path):
    p = tmp_path / "bad.ttrace"
    p.write_bytes(b"PK\x03\x04" + saved.read_bytes()[4:])
    refused(p, "magic")
    p.write_bytes(b"")
    refused(p, "magic")
    refused(tmp_path / "missing.ttrace", "cannot open")
    refused(tmp_path, "is a folder")


def test_newer_version_is_refused(saved):
    magic, _, header, blobs = split(saved)
    join(saved, header, blobs, version=store.VERSION + 1)
    refused(saved, f"version {store.VERSION + 1} is newer .*upgrade triton_trace")


def test_truncated_file(saved, tmp_path):
    raw = saved.read_bytes()
    for cut in (10, 30, len(raw) // 2, len(raw) - 1):
        p = tmp_path / f"cut{cut}.ttrace"
        p.write_bytes(raw[:cut])
        refused(p, "not a usable triton_trace file")


def test_corrupt_block_and_bad_header_json(saved):
    magic, _, header, blobs = split(saved)
    d = header["launches"][0]["arrays"]["lanes.base"]
    corrupt = bytearray(blobs)
    corrupt[d["offset"]: d["offset"] + d["nbytes"]] = b"\xff" * d["nbytes"]
    join(saved, header, bytes(corrupt))
    refused(saved, "corrupt|decompress")
    h = b"[" * 100000 + b"]" * 100000
    saved.write_bytes(store.MAGIC + store.VERSION.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h)
    refused(saved, "header is not valid JSON|not a triton_trace header")
    saved.write_bytes(store.MAGIC + store.VERSION.to_bytes(4, "little") + (2 ** 62).to_bytes(8, "little") + b"{}")
    refused(saved, "header length exceeds the file")


@pytest.mark.parametrize("shape", [[1 << 40], [1 << 32, 1 << 32, 16], [1 << 62, 4]])
def test_header_declaring_enormous_arrays_is_refused_before_allocating(saved, shape):
    magic, _, header, blobs = split(saved)
    d = header["launches"][0]["arrays"]["lanes.base"]
    n = 1
    for s in shape:
        n *= s
    d.update(shape=shape, raw_nbytes=n * 8)
    join(saved, header, blobs)
    refused(saved, "more data than its compressed size|would need|does not match|not a size or an offset")


def test_memory_budget(saved):
    refused(saved, "pass max_bytes=", max_bytes=100)


@pytest.mark.parametrize("dtype", ["|O", "<V8", "object", "<M8[ns]"])
def test_disallowed_dtype(saved, dtype):
    magic, _, header, blobs = split(saved)
    header["launches"][0]["arrays"]["values"]["dtype"] = dtype
    join(saved, header, blobs)
    refused(saved, "dtype .* is not allowed")


def test_value_dtype_table_is_checked(saved):
    magic, _, header, blobs = split(saved)
    header["launches"][0]["value_dtypes"] = ["|O"]
    join(saved, header, blobs)
    refused(saved, "value dtype")


@pytest.mark.parametrize("mutate,match", [
    (lambda h: h["launches"][0].__setitem__("arrays", []), "arrays is list, not dict"),
    (lambda h: h["launches"][0].pop("grid"), r"lacks \['grid'\]"),
    (lambda h: h["launches"][0]["arrays"]["lanes.base"].__setitem__("offset", -5), "beyond the end"),
    (lambda h: h["launches"][0]["arrays"]["lanes.base"].__setitem__("nbytes", -1), "beyond the end"),
    (lambda h: h["launches"][0]["arrays"]["lanes.seg_sig"].__setitem__("shape", [-1]), "does not match"),
    (lambda h: h["launches"][0].__setitem__("grid", [1, 1, 1]), "outside|more than the programs"),
    (lambda h: h.__setitem__("format", "other"), "not a triton_trace header"),
    (lambda h: h.__setitem__("kinds", ["store", "load"]), "op-kind table"),
])
def test_inconsistent_header(saved, mutate, match):
    magic, _, header, blobs = split(saved)
    mutate(header)
    join(saved, header, blobs)
    refused(saved, match)


def _tampered(sample_trace, tmp_path, **columns):
    lc = sample_trace.launches[0]
    ops = {k: v.copy() for k, v in lc.ops.items()}
    for name, fn in columns.items():
        fn(ops[name])
    path = tmp_path / "tampered.ttrace"
    Trace((dataclasses.replace(lc, ops=ops),)).save(path)
    return path


@pytest.mark.parametrize("columns,match", [
    ({"lane_start": lambda a: a.__setitem__(-1, 10 ** 9)}, "outside the lane buffers"),
    ({"lane_count": lambda a: a.__setitem__(0, -3)}, "outside the lane buffers"),
    ({"value_start": lambda a: a.__setitem__(0, 10 ** 9)}, "outside the value buffer"),
    ({"kind": lambda a: a.__setitem__(0, 200)}, "unknown kinds"),
    ({"tensor": lambda a: a.__setitem__(0, 9)}, "unknown kinds or tensors"),
    ({"value_dtype": lambda a: a.__setitem__(0, 5)}, "unknown (files or )?value dtypes"),
    ({"ndim": lambda a: a.__setitem__(0, 99)}, "invalid rank"),
    ({"shape": lambda a: a.__setitem__((0, 0), 3)}, "shapes do not match"),
    ({"program": lambda a: a.__setitem__((0, 0), 50)}, "outside the launch grid"),
])
def test_inconsistent_op_rows(sample_trace, tmp_path, columns, match):
    refused(_tampered(sample_trace, tmp_path, **columns), match)


def test_raw_block_that_lies_about_its_size(saved):
    magic, _, header, blobs = split(saved)
    d = header["launches"][0]["arrays"]["lanes.base"]
    small = zlib.compress(np.zeros(3, np.int64).tobytes())
    d.update(offset=len(blobs), nbytes=len(small))
    join(saved, header, blobs + small)
    refused(saved, "does not decompress to its declared size")


def test_synthetic_launch_without_recorded_ids_round_trips(tmp_path):
    lc = Launch.from_flat(kernel_name="k", source="", source_file="", source_line=0, grid=(2, 1, 1), args={}, tensors=(),
                files=(), value_dtypes=(), ops=empty_ops(), offsets=np.zeros(0, np.int64), mask=np.zeros(0, bool),
                values=np.zeros(0, np.uint8))
    Trace((lc,)).save(tmp_path / "s.ttrace")
    back = triton_trace.load(tmp_path / "s.ttrace").launches[0]
    assert back.recorded_ids is None and back.skipped_ids().tolist() == [[0, 0, 0], [1, 0, 0]]


@pytest.mark.parametrize("mutate,match", [
    # each would make analyze() allocate per program or per storage element, or crash on a bad type
    (lambda lc: lc.__setitem__("grid", [1 << 40, 1, 1]), "grid"),
    (lambda lc: lc.__setitem__("grid", [65535, 65535, 65535]), "grid"),
    (lambda lc: lc["tensors"][0].__setitem__("storage_size", 1 << 40), "pass max_bytes="),
    (lambda lc: lc["tensors"][0].__setitem__("storage_size", -1), "storage offset"),
    (lambda lc: lc["tensors"][0].__setitem__("elem_bytes", 1 << 62), "element size"),
    (lambda lc: lc["tensors"][0].__setitem__("strides", []), "shape and strides"),
    (lambda lc: lc.__setitem__("config", 5), "config is int, not dict"),
    (lambda lc: lc.__setitem__("args", [1]), "args is list, not dict"),
])
def test_header_fields_the_analysis_sizes_arrays_by_are_checked(saved, mutate, match):
    magic, _, header, blobs = split(saved)
    mutate(header["launches"][0])
    join(saved, header, blobs)
    refused(saved, match)


# ------------------------------------------------------------------------------------------------------
# the compact lane arrays (format version 2) and files of version 1 (flat offsets and mask)
# ------------------------------------------------------------------------------------------------------
def _block(arr: np.ndarray, pos: int) -> tuple:
    raw = np.ascontiguousarray(arr).tobytes()
    comp = zlib.compress(raw, 1)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": pos, "nbytes": len(comp),
            "raw_nbytes": len(raw)}, comp


def as_version_1(path, trace, mutate=lambda name, arr: arr):
    """Rewrite a saved file as format version 1 would have stored it: flat offsets and mask arrays."""
    _, _, header, blobs = split(path)
    for h, lc in zip(header["launches"], trace.launches):
        for name in [k for k in h["arrays"] if k.startswith("lanes.")]:
            del h["arrays"][name]
        del h["lanes"]
        for name, arr in (("offsets", np.asarray(lc.offsets)), ("mask", np.asarray(lc.mask))):
            h["arrays"][name], comp = _block(mutate(name, arr), len(blobs))
            blobs += comp
    join(path, header, blobs, version=1)


def _replace_array(path, launch: int, name: str, arr: np.ndarray):
    _, _, header, blobs = split(path)
    header["launches"][launch]["arrays"][name], comp = _block(arr, len(blobs))
    join(path, header, blobs + comp)


def test_lanes_are_stored_compactly(sample_trace, saved):
    _, version, header, _ = split(saved)
    assert version == store.VERSION == 2
    for h, lc in zip(header["launches"], sample_trace.launches):
        assert h["lanes"] == lc.lanes.size
        assert not {"offsets", "mask"} & set(h["arrays"])
        assert {"lanes." + k for k in lc.lanes.to_arrays()} <= set(h["arrays"])
    add = sample_trace.launches[0]          # a vector add: every block contiguous
    assert add.lanes.nbytes <= 2 * add.lanes.size


def test_big_contiguous_trace_is_small_on_disk(tmp_path):
    n, block = 1 << 20, 1024
    ops = empty_ops(n // block)
    ops["kind"][:] = 0
    ops["program"][:, 0] = np.arange(n // block)
    ops["lane_start"] = np.arange(n // block, dtype=np.int64) * block
    ops["lane_count"][:], ops["ndim"][:], ops["shape"][:, 0] = block, 1, block
    ops["value_dtype"][:], ops["elem_bytes"][:], ops["file"][:] = -1, 4, -1
    from triton_trace.model import TensorInfo
    lc = Launch.from_flat(kernel_name="k", source="", source_file="", source_line=0, grid=(n // block, 1, 1), args={},
                tensors=(TensorInfo("x", "float32", (n,), (1,), 0, n, 4),), files=(), value_dtypes=(), ops=ops,
                offsets=np.arange(n, dtype=np.int64), mask=np.ones(n, bool), values=np.zeros(0, np.uint8))
    assert lc.lanes.nbytes < 0.05 * n
    lc.ops["tensor"][:] = 0
    Trace((lc,)).save(tmp_path / "big.ttrace")
    assert (tmp_path / "big.ttrace").stat().st_size < 0.1 * n
    back = triton_trace.load(tmp_path / "big.ttrace").launches[0]
    np.testing.assert_array_equal(back.offsets, np.arange(n))
    assert back.mask.all()


def test_version_1_files_still_load(sample_trace, saved):
    as_version_1(saved, sample_trace)
    loaded = triton_trace.load(saved)
    for a, b in zip(sample_trace.launches, loaded.launches):
        assert_launches_equal(a, b)
    # loading compacts the flat arrays; saving again writes the current version
    loaded.save(saved)
    assert split(saved)[1] == store.VERSION
    for a, b in zip(sample_trace.launches, triton_trace.load(saved).launches):
        assert_launches_equal(a, b)


@pytest.mark.parametrize("mutate,match", [
    (lambda name, a: a.astype(np.int32) if name == "offsets" else a, "wrong dtype or rank"),
    (lambda name, a: a.astype(np.uint8) if name == "mask" else a, "wrong dtype or rank"),
    (lambda name, a: a.reshape(1, -1) if name == "mask" else a, "wrong dtype or rank"),
    (lambda name, a: a[:-1] if name == "mask" else a, "differ in length"),
    (lambda name, a: a[:5], "outside the lane buffers"),
])
def test_damaged_version_1_lanes(sample_trace, saved, mutate, match):
    as_version_1(saved, sample_trace, mutate)
    refused(saved, match)


def test_version_1_file_without_lane_arrays(sample_trace, saved):
    as_version_1(saved, sample_trace)
    _, _, header, blobs = split(saved)
    del header["launches"][0]["arrays"]["mask"]
    join(saved, header, blobs, version=1)
    refused(saved, "lane buffers are missing")


@pytest.mark.parametrize("name,change,match", [
    ("lanes.base", lambda a: a[:-1], "lane arrays are inconsistent: .*row"),
    ("lanes.base", lambda a: a.astype(np.int32), "lane arrays are inconsistent: .*int64"),
    ("lanes.seg_rows", lambda a: a * 2, "lane arrays are inconsistent"),
    ("lanes.seg_sig", lambda a: a + 100, "lane arrays are inconsistent: .*unknown signature"),
    ("lanes.sig_offs", lambda a: a + 9, "lane arrays are inconsistent: .*unknown encoding"),
    ("lanes.sig_n", lambda a: a + 1, "lane arrays are inconsistent"),
    ("lanes.sig_shape", lambda a: a[:, :2].copy(), "lane arrays are inconsistent: .*columns"),
    ("lanes.sig_strides", lambda a: a + 1, "lane arrays are inconsistent: .*malformed"),
    ("lanes.code", lambda a: np.concatenate([a, a]), "lane arrays are inconsistent: .*code holds"),
    ("lanes.bits", lambda a: np.concatenate([a, [1]]).astype(np.uint8), "lane arrays are inconsistent: .*bits"),
])
def test_damaged_lane_arrays(sample_trace, saved, name, change, match):
    _, _, header, _ = split(saved)
    launch = next(i for i, h in enumerate(header["launches"]) if h["lanes"] > 0)
    arrays = sample_trace.launches[launch].lanes.to_arrays()
    _replace_array(saved, launch, name, np.asarray(change(arrays[name[len("lanes."):]])))
    refused(saved, match)


@pytest.mark.parametrize("mutate,match", [
    (lambda lc: lc.__setitem__("lanes", lc["lanes"] + 1), "lane arrays are inconsistent"),
    (lambda lc: lc.__setitem__("lanes", -1), "lanes is -1, not an integer"),
    (lambda lc: lc.__setitem__("lanes", "many"), "lanes is 'many', not an integer"),
    (lambda lc: lc.pop("lanes"), r"lacks \['lanes'\]"),
    (lambda lc: lc["arrays"].pop("lanes.bits"), "lane arrays are inconsistent: .*missing"),
    (lambda lc: lc["arrays"].__setitem__("offsets", lc["arrays"]["lanes.base"]), "unknown array block 'offsets'"),
    (lambda lc: lc["arrays"].__setitem__("lanes.extra", lc["arrays"]["lanes.base"]), "unknown"),
])
def test_lane_header_fields_are_checked(saved, mutate, match):
    _, _, header, blobs = split(saved)
    mutate(header["launches"][0])
    join(saved, header, blobs)
    refused(saved, match)


def test_lanes_that_would_expand_past_the_budget_are_refused(saved):
    """A few bytes of affine rows can declare 2**32 lanes; views and analyses would expand them."""
    _, _, header, blobs = split(saved)
    n, rows = 1 << 30, 4
    arrays = {"sig_offs": np.zeros(1, np.uint8), "sig_mask": np.zeros(1, np.uint8), "sig_n": np.array([n]),
              "sig_ndim": np.ones(1, np.uint8), "sig_shape": np.array([[n] + [0] * 7]),
              "sig_strides": np.array([[1] + [0] * 7]), "seg_sig": np.zeros(1, np.int32),
              "seg_rows": np.array([rows]), "base": np.zeros(rows, np.int64), "row_strides": np.zeros(0, np.int64),
              "code": np.zeros(0, np.int32), "delta32": np.zeros(0, np.int32), "raw": np.zeros(0, np.int64),
              "bits": np.zeros(0, np.uint8)}
    h = header["launches"][0]
    for name, arr in arrays.items():
        h["arrays"]["lanes." + name], comp = _block(arr, len(blobs))
        blobs += comp
    h["lanes"] = n * rows
    join(saved, header, blobs)
    refused(saved, "needs 36.0 GiB once expanded.*pass max_bytes=")
