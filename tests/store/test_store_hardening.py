"""The trace reader against crafted and careless input: decompression bombs, wide headers, special files,
wrong field types, huge integers, and a seeded fuzz of all of them. Each is refused in one line
(TraceFileError), within bounded memory and time; whatever loads must also analyse, summarise and render."""
from __future__ import annotations

import copy
import json
import os
import random
import re
import threading
import time
import tracemalloc
import zlib

import pytest
import torch

import kernels as K
import triton_trace
from triton_trace import TraceFileError, trace
from triton_trace.store import tracefile as store


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small trace: a vector add with values, a layer norm (atomics, a lock) and a failing launch."""
    triton_trace.reset()
    x, y = torch.randn(200), torch.randn(200)
    K.add(x, y, kernel=trace(K.make_add()), block=64)
    xl, w = torch.randn(4, 16), torch.randn(16)
    _, mean, rstd = K.layer_norm_fwd(xl, w, torch.randn(16), kernel=trace(K.make_layer_norm_fwd()))
    path = tmp_path_factory.mktemp("small") / "small.ttrace"
    triton_trace.current_trace().save(path)
    triton_trace.reset()
    return path


def parts(path):
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[12:20], "little")
    return json.loads(raw[20:20 + hlen]), raw[20 + hlen:]


def write(path, header, blobs, raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    path.write_bytes(store.MAGIC + store.VERSION.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h + blobs)


def refused_quickly(path, match, max_mb=64, max_s=5.0):
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(TraceFileError, match=match) as ei:
            triton_trace.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(ei.value)
    assert time.perf_counter() - t0 < max_s
    assert peak < max_mb << 20, f"peak {peak >> 20} MB"
    return ei.value


def test_decompression_bomb_in_the_value_buffer(small, tmp_path):
    """A 256 MiB block of zeros (a few hundred KB compressed) where the ops use a few KB of values."""
    header, blobs = parts(small)
    bomb = zlib.compressobj(9)
    comp = b"".join(bomb.compress(bytes(1 << 24)) for _ in range(16)) + bomb.flush()
    header["launches"][0]["arrays"]["values"] = {"dtype": "|u1", "shape": [1 << 28], "offset": len(blobs),
                                                 "nbytes": len(comp), "raw_nbytes": 1 << 28}
    write(tmp_path / "bomb.ttrace", header, blobs + comp)
    refused_quickly(tmp_path / "bomb.ttrace", "value buffer declares|file of real trace data holds")


def test_decompression_bomb_in_the_op_table(small, tmp_path):
    """Four million rows of zeros in every op column: a few MB on disk, hundreds of MB declared."""
    header, blobs = parts(small)
    rows, extra = 1 << 22, b""
    for name, d in header["launches"][0]["arrays"].items():
        if name.startswith("ops."):
            per_row = d["raw_nbytes"] // d["shape"][0]
            data = zlib.compress(bytes(per_row * rows), 9)
            d.update(shape=[rows] + d["shape"][1:], offset=len(blobs) + len(extra), nbytes=len(data),
                     raw_nbytes=per_row * rows)
            extra += data
    write(tmp_path / "opbomb.ttrace", header, blobs + extra)
    refused_quickly(tmp_path / "opbomb.ttrace", "more than a .*-byte file of real trace data holds")


def test_decompression_bomb_in_the_kept_inputs(tmp_path):
    """trace(inputs=True) keeps the storages' bytes; a header may declare them as large as it likes, so they
    count against the same plausibility bound as every other block (a 2 MB file must not take 2 GB)."""
    triton_trace.reset()
    x = torch.randn(256)
    K.add(x, x, kernel=trace(K.make_add(), inputs=True), block=64)
    path = tmp_path / "kept.ttrace"
    triton_trace.current_trace().save(path)
    triton_trace.reset()
    assert triton_trace.load(path).launches[0].inputs is not None
    header, blobs = parts(path)
    lc = header["launches"][0]
    big = 1 << 29
    comp = zlib.compressobj(9)
    data = b"".join(comp.compress(bytes(1 << 24)) for _ in range(big >> 24)) + comp.flush()
    storages = lc["meta"]["module"]["inputs"]["storages"]
    storages[0] += big - sum(storages)
    lc["arrays"]["inputs"] = {"dtype": "|u1", "shape": [big], "offset": len(blobs), "nbytes": len(data),
                              "raw_nbytes": big}
    write(tmp_path / "inputs_bomb.ttrace", header, blobs + data)
    assert (tmp_path / "inputs_bomb.ttrace").stat().st_size < 2 << 20
    refused_quickly(tmp_path / "inputs_bomb.ttrace", "file of real trace data holds")


def test_the_header_budget_is_fixed_whatever_the_header_names(tmp_path):
    """The budget once grew with every "kernel_name" string in the header: 45 MB of them took 946 MB."""
    h = (b'{"format":"triton_trace","version":2,"launches":[],"pad":[' + b'{"kernel_name":0},' * (5 << 19)
         + b'{}]}')
    assert 45 << 20 < len(h) < 64 << 20
    write(tmp_path / "names.ttrace", None, b"", raw_header=h)
    refused_quickly(tmp_path / "names.ttrace", "JSON values, more than", max_mb=120, max_s=3)


def test_the_loaded_arrays_are_not_copied_twice(small, tmp_path, monkeypatch):
    """Decompressed straight into the final arrays: peak memory about the data, not twice it. (The per-program
    math values, JSON in the header, are not arrays: this launch records none, so the peak is the arrays'.)"""
    from triton_trace.record.checks import mathvalues_ops
    monkeypatch.setenv(mathvalues_ops.ENV, "0")
    triton_trace.reset()
    n = 1 << 21
    K.add(torch.randn(n), torch.randn(n), kernel=trace(K.make_add(), values=True), block=1024)
    path = tmp_path / "big.ttrace"
    triton_trace.current_trace().save(path)
    triton_trace.reset()
    header, _ = parts(path)
    declared = sum(d["raw_nbytes"] for lc in header["launches"] for d in lc["arrays"].values())
    tracemalloc.start()
    loaded = triton_trace.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(loaded) == 1 and declared > 16 << 20
    assert peak < 1.3 * declared, (peak, declared)


def test_a_wide_header_of_empty_objects_is_refused_before_parsing(small, tmp_path):
    h = b'{"format":"triton_trace","version":2,"launches":[],"pad":[' + b"{}," * (8 << 20) + b'{}]}'
    write(tmp_path / "wide.ttrace", None, b"", raw_header=h)
    # memory: the header bytes themselves (24 MB), not the 1.9 GB a parse of them took
    refused_quickly(tmp_path / "wide.ttrace", "JSON values, more than the 4000000", max_mb=40, max_s=2)


@pytest.mark.parametrize("where,key", [("top", "pad"), ("launch", "extra"), ("meta", "surprise")])
def test_unknown_keys_are_refused(small, tmp_path, where, key):
    header, blobs = parts(small)
    target = {"top": header, "launch": header["launches"][0], "meta": header["launches"][0]["meta"]}[where]
    target[key] = 1
    write(tmp_path / "k.ttrace", header, blobs)
    refused_quickly(tmp_path / "k.ttrace", "unknown")


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.ttrace"
    os.mkfifo(fifo)
    result = {}

    def read():
        try:
            triton_trace.load(fifo)
        except TraceFileError as e:
            result["error"] = str(e)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "load() blocked on a FIFO"
    assert "not a regular file" in result["error"]


@pytest.mark.parametrize("mutate,field", [
    (lambda lc: lc["config"].__setitem__("num_warps", "four"), "config.num_warps"),
    (lambda lc: lc["meta"].__setitem__("execution", "fast"), "meta.execution"),
    (lambda lc: lc["meta"]["execution"].__setitem__("fallbacks", {"a": 1}), "fallbacks"),
    (lambda lc: lc["meta"]["execution"].__setitem__("limit_notes", [3]), "limit_notes"),
    (lambda lc: lc.__setitem__("completed", "yes"), "completed"),
    (lambda lc: lc.__setitem__("kernel_name", ["k"]), "kernel_name"),
    (lambda lc: lc["tensors"][0].__setitem__("shape", ["4"]), "shape"),
    (lambda lc: lc.__setitem__("error", 5), "error"),
])
def test_field_types_are_checked_at_load(small, tmp_path, mutate, field):
    header, blobs = parts(small)
    lc = header["launches"][0]
    lc["config"] = lc["config"] or {}
    mutate(lc)
    write(tmp_path / "f.ttrace", header, blobs)
    err = refused_quickly(tmp_path / "f.ttrace", field.replace(".", r"\."))
    assert "launches[0]" in str(err)


def test_a_huge_integer_is_a_trace_file_error(small, tmp_path):
    """Python refuses to parse an integer of more than 4300 digits with a bare ValueError."""
    header, blobs = parts(small)
    raw = re.sub(rb'"source_line": [0-9]+', b'"source_line": ' + b"9" * 5000, json.dumps(header).encode(), count=1)
    write(tmp_path / "int.ttrace", None, blobs, raw_header=raw)
    refused_quickly(tmp_path / "int.ttrace", "digits")


# ----------------------------------------------------------------------------------------------------------
# the fuzz: random flips, truncations, type swaps and size bombs from a fixed seed
# ----------------------------------------------------------------------------------------------------------
_SWAPS = [None, True, -1, 0, 1 << 40, 3.5, "x", [], {}, [1, 2], {"a": 1}, 10 ** 19]


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))
    yield path


def _set(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def mutations(path, count, seed=1234):
    rng = random.Random(seed)
    raw = path.read_bytes()
    header, blobs = parts(path)
    leaves = [p for p in _leaves(header) if p]
    blocks = [(i, name) for i, lc in enumerate(header["launches"]) for name in lc["arrays"]]
    for n in range(count):
        kind = n % 4
        if kind == 0:                        # flip bytes anywhere
            b = bytearray(raw)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            yield "flip", bytes(b), None
        elif kind == 1:                      # truncate
            yield "truncate", raw[:rng.randrange(len(raw))], None
        elif kind == 2:                      # swap a header value for one of another type
            h = copy.deepcopy(header)
            _set(h, rng.choice(leaves), rng.choice(_SWAPS))
            yield "swap", None, (h, blobs)
        else:                                # declare a block far larger than it is
            h = copy.deepcopy(header)
            i, name = rng.choice(blocks)
            d = h["launches"][i]["arrays"][name]
            factor = rng.choice([2, 1000, 1 << 20])
            d["shape"] = [d["shape"][0] * factor] + d["shape"][1:] if d["shape"] else [factor]
            d["raw_nbytes"] = d["raw_nbytes"] * factor
            yield "bomb", None, (h, blobs)


@pytest.mark.slow
def test_reader_fuzz(small, tmp_path):
    from triton_trace.view.notebook import trace_html
    path = tmp_path / "fuzz.ttrace"
    outcomes = {}
    for i, (kind, raw, parts_) in enumerate(mutations(small, 240)):
        if raw is not None:
            path.write_bytes(raw)
        else:
            write(path, *parts_)
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            loaded = triton_trace.load(path)
        except TraceFileError as e:
            assert "\n" not in str(e), (i, kind, str(e))
            outcomes[kind, "refused"] = outcomes.get((kind, "refused"), 0) + 1
        else:
            # whatever loads must be usable: analysis, summary, JSON, notebook HTML
            report = triton_trace.analyze(loaded)
            report.summary()
            json.dumps(report.to_dict())
            trace_html(loaded)
            outcomes[kind, "loaded"] = outcomes.get((kind, "loaded"), 0) + 1
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert time.perf_counter() - t0 < 10, (i, kind)
        assert peak < 256 << 20, (i, kind, peak >> 20)
    assert outcomes.get(("bomb", "refused"), 0) > 0 and outcomes.get(("truncate", "refused"), 0) > 0
